#!/usr/bin/env python3
"""The figures of docs/rules.md "Speed": what loading the rules and looking names up cost.

    python tools/rules_speed.py              # 7 fresh processes; the best of each step
    python tools/rules_speed.py --runs 1     # one (what tests/unit/test_rules.py runs)

Each run is a fresh interpreter (bytecode cached) that times, once each:
importing cuda4amd.rules, load_rules(), the first look-up of each kind (which
builds its regex), every release table's first parse, and a scan's worth of
rules (all of these and the GPU profiles, frameworks, kernels and run-time
rules). Then, timed over many calls in that process: a look-up of every
dependency name and imported symbol of the goldens (tests/goldens/*/scan.json,
as classify and the read stage make them), and a later family_for and
system_kind. The best of the runs is printed for each step: on a busy
machine the best is the one least disturbed.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

ONE_RUN = r'''
import importlib, json, sys, time, timeit
from pathlib import Path
out = {}
def once(name, f):
    t = time.perf_counter(); value = f(); out[name] = time.perf_counter() - t; return value
R = once("import cuda4amd.rules", lambda: importlib.import_module("cuda4amd.rules"))
r = once("load_rules()", R.load_rules)
once("first family_for, windows", lambda: r.family_for("x.dll", "windows"))
once("first family_for, linux", lambda: r.family_for("libx.so", "linux"))
once("first is_unknown_cuda, linux", lambda: r.is_unknown_cuda("libx.so", "linux"))
once("first family_for_symbol", lambda: r.family_for_symbol("malloc"))
for tag in r.release_tags:
    once(f"release({tag!r}), first use", lambda: r.release(tag))
def scan_worth():
    s = R.load_rules()
    for tag in s.release_tags:
        s.release(tag)
    s.gpus, s.frameworks, s.ptx, s.names, s.generators
once("a scan's worth (load_rules, releases, gpus, frameworks, ptx, names, generators)", scan_worth)
names, symbols = set(), set()
for path in Path(sys.argv[1]).glob("*/scan.json"):
    for b in json.loads(path.read_text(encoding="utf-8"))["binaries"]:
        platform = "windows" if b["format"] == "PE" else "linux"
        for d in b["dependencies"]:
            names.add((d["name"].rsplit("/", 1)[-1], platform))
            symbols.update(s for group in (d.get("symbols") or {}).values() for s in group)
def lookups():
    for n, p in names:
        r.family_for(n, p) or r.is_unknown_cuda(n, p)
    for s in symbols:
        r.family_for_symbol(s)
count = len(names) + len(symbols)
out[f"per look-up, the goldens' {len(names)} names and {len(symbols)} symbols"] = min(
    timeit.repeat(lookups, number=20, repeat=5)) / 20 / count
def per_call(f):
    return min(timeit.repeat(f, number=2000, repeat=5)) / 2000
out["later family_for"] = per_call(lambda: r.family_for("libstdc++.so.6", "linux"))
out["later system_kind"] = per_call(lambda: r.system_kind("KERNEL32.dll", "windows"))
print(json.dumps(out))
'''


def measure(runs: int) -> dict[str, float]:
    """The best time of each step over `runs` fresh processes, in seconds."""
    best: dict[str, float] = {}
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", ONE_RUN, str(REPO / "tests" / "goldens")],
                              capture_output=True, text=True, check=True, cwd=REPO)
        for step, seconds in json.loads(done.stdout).items():
            best[step] = min(seconds, best.get(step, seconds))
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes (default 7)")
    args = parser.parse_args(argv)
    for step, seconds in measure(args.runs).items():
        shown = f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} µs"
        print(f"{shown:>10}  {step}")


if __name__ == "__main__":
    main()
