#!/usr/bin/env python3
"""Time the by-name string search per binary, and compare it with another version.

    python tools/byname_bench.py PATH...                       # files or folders
    python tools/byname_bench.py --against OLD/byname.py --repeat 7 PATH...
    git show HEAD~3:scanner/scan/read/byname.py > /tmp/old_byname.py   # a version to compare with

For every ELF/PE binary under PATH: `find_library_names` as the payload
inspector calls it (its compiled patterns, "deep" mode for NVIDIA's own
libraries), min of `--repeat` runs. With `--against`, that file is loaded as
a second byname module and run interleaved with the current one on the same
mapping; the results must be identical (a difference is printed and counts).
Prints the files over `--show` seconds (and every difference), then totals;
`--out FILE` writes every file's references as JSON lines.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

from cuda4amd.rules.ruleset import load_rules
from cuda4amd.scan.read import byname
from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.engine import mapped, read_buffer
from cuda4amd.scan.read.payload import PayloadInspector


def binaries(paths):
    for path in paths:
        if os.path.isfile(path):
            yield path
            continue
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                if os.path.islink(full) or not os.path.isfile(full):
                    continue
                try:
                    with open(full, "rb") as handle:
                        head = handle.read(4)
                except OSError:
                    continue
                if head[:2] == b"MZ" or head == b"\x7fELF":
                    yield full


def search(module, buf, info, rules, patterns, nvidia):
    try:
        return [[r.name, r.encoding, r.template]
                for r in module.find_library_names(buf, info, rules, patterns, nvidia=nvidia)]
    except MalformedBinary as exc:
        return f"MalformedBinary: {exc}"


def load(path):
    spec = importlib.util.spec_from_file_location("cuda4amd.scan.read.byname_against", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def timed(module, buf, info, rules, patterns, nvidia):
    start = time.perf_counter()
    result = search(module, buf, info, rules, patterns, nvidia)
    return result, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--against", help="another byname.py to compare with")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--show", type=float, default=0.02, help="print files slower than this (seconds)")
    parser.add_argument("--out", help="write every file's references as JSON lines")
    args = parser.parse_args()
    rules = load_rules()
    inspector = PayloadInspector(rules, rules.release(rules.default_release))
    other = load(args.against) if args.against else None
    other_patterns = other.NamePatterns(rules) if other else None
    out = open(args.out, "w") if args.out else None
    count = differ = 0
    total_new = total_old = 0.0
    for path in binaries(args.paths):
        try:
            with mapped(path) as buf:
                try:
                    info = read_buffer(buf)
                except MalformedBinary:
                    continue
                mode = inspector.kernel_scan(path, info)
                if mode is None:
                    continue  # ZLUDA replaces it: never searched
                nvidia = mode == "deep"
                new = old = float("inf")
                result = before = None
                for _ in range(args.repeat):
                    result, seconds = timed(byname, buf, info, rules, inspector.names, nvidia)
                    new = min(new, seconds)
                    if other is not None:
                        before, seconds = timed(other, buf, info, rules, other_patterns, nvidia)
                        old = min(old, seconds)
        except OSError:
            continue
        count += 1
        total_new += new
        if out:
            out.write(json.dumps({"path": path, "mode": mode, "refs": result}) + "\n")
        size = os.path.getsize(path) >> 20
        if other is None:
            if new > args.show:
                print(f"{new:8.3f} s  {mode:5} {size:4} MiB  {path}")
            continue
        total_old += old
        same = result == before
        differ += not same
        if old > args.show or new > args.show or not same:
            print(f"{old:8.3f} -> {new:8.3f} s  x{old / max(new, 1e-9):4.1f}  {'same' if same else 'DIFFERENT'}"
                  f"  {mode:5} {size:4} MiB  {path}")
        if not same:
            print(f"    before: {before}\n    now:    {result}")
    if other is None:
        print(f"{count} binaries: {total_new:.3f} s")
    else:
        print(f"{count} binaries: {total_old:.3f} s -> {total_new:.3f} s, {differ} with different results")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
