#!/usr/bin/env python3
"""Time the by-name string search per binary, and compare it with another version.

    python tools/byname_bench.py PATH...                       # files or folders
    python tools/byname_bench.py --against HEAD~3 --repeat 7 PATH...   # a git revision
    python tools/byname_bench.py --against OLD/byname --repeat 7 PATH...   # a byname/ package folder
    python tools/byname_bench.py --against OLD/byname.py --repeat 7 PATH...   # the one-module version

For every ELF/PE binary under PATH: `find_library_names` as the payload
inspector calls it (its compiled patterns, "deep" mode for NVIDIA's own
libraries), min of `--repeat` runs. With `--against`, that version of the
by-name search is loaded beside the current one and run interleaved with it
on the same mapping; the results must be identical (a difference is printed
and counts). A revision is read from this checkout's git history: its
scanner/scan/read/byname/ package, or byname.py before the package. Only the
by-name search is the other version's; the modules it imports from outside it
(fatbin, pages, model, the rules) are the current ones.
Prints the files over `--show` seconds (and every difference), then totals;
`--out FILE` writes every file's references as JSON lines.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TextIO

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


REPO = Path(__file__).resolve().parent.parent
PACKAGE = "cuda4amd.scan.read.byname"
#: where the by-name search lives in a revision: the package, or the module before it
PACKAGE_DIR = "scanner/scan/read/byname"
MODULE_FILE = "scanner/scan/read/byname.py"


def load_module(path: Path) -> ModuleType:
    """The one-module by-name search at ``path``, under a name of its own."""
    spec = importlib.util.spec_from_file_location(PACKAGE + "_against", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_package(folder: Path) -> ModuleType:
    """The byname package in ``folder``, beside the current one: loaded under the
    package's own name (its modules import each other by it), then its modules are
    moved out of ``sys.modules`` and the current ones put back. The other version's
    functions keep the objects they imported at module level (an import inside one of
    its functions, run later, would get the current package's module)."""
    current = {name: module for name, module in sys.modules.items()
               if name == PACKAGE or name.startswith(PACKAGE + ".")}
    for name in current:
        del sys.modules[name]
    try:
        spec = importlib.util.spec_from_file_location(PACKAGE, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot load {folder}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = module
        spec.loader.exec_module(module)
    finally:
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]
        sys.modules.update(current)
    return module


def git(*args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, check=False)
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


@contextlib.contextmanager
def revision(rev: str) -> Iterator[Path]:
    """The by-name search of git revision ``rev``, written to a temporary folder:
    the package folder, or the one module."""
    with tempfile.TemporaryDirectory() as tmp:
        listed = git("ls-tree", "-r", "--name-only", rev, PACKAGE_DIR, MODULE_FILE).decode().splitlines()
        if any(name.startswith(PACKAGE_DIR + "/") for name in listed):
            folder = Path(tmp) / "byname"
            folder.mkdir()
            for name in listed:
                if name.startswith(PACKAGE_DIR + "/") and name.endswith(".py") and name.count("/") == 4:
                    (folder / Path(name).name).write_bytes(git("show", f"{rev}:{name}"))
            yield folder
        elif MODULE_FILE in listed:
            target = Path(tmp) / "byname.py"
            target.write_bytes(git("show", f"{rev}:{MODULE_FILE}"))
            yield target
        else:
            raise SystemExit(f"{rev}: neither {PACKAGE_DIR}/ nor {MODULE_FILE}")


def load(against: str) -> ModuleType:
    """The other version: a byname.py file, a byname/ package folder or a git revision."""
    path = Path(against)
    if path.is_file():
        return load_module(path)
    if path.is_dir():
        return load_package(path)
    with revision(against) as found:
        return load_module(found) if found.is_file() else load_package(found)


def timed(module, buf, info, rules, patterns, nvidia):
    start = time.perf_counter()
    result = search(module, buf, info, rules, patterns, nvidia)
    return result, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--against",
                        help="the version to compare with: a git revision, a byname/ folder or a byname.py")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--show", type=float, default=0.02, help="print files slower than this (seconds)")
    parser.add_argument("--out", help="write every file's references as JSON lines")
    args = parser.parse_args()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            return compare(args, out)
    return compare(args, None)


def compare(args: argparse.Namespace, out: TextIO | None) -> int:
    rules = load_rules()
    inspector = PayloadInspector(rules, rules.release(rules.default_release))
    other = load(args.against) if args.against else None
    other_patterns = other.NamePatterns(rules) if other else None
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
