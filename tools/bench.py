#!/usr/bin/env python3
"""Benchmark `cuda4amd scan` on real CUDA wheels, the way docs/performance.md reports it.

    python tools/bench.py                 # print the table
    python tools/bench.py --runs 7        # more repetitions

Downloads (once, into the wheel cache) and unpacks the wheels, links their
trees into one folder, then measures in fresh processes:
  * end-to-end `cuda4amd scan TREE --format json`: wall time and peak RSS
    (warm: one untimed run first, so the page cache holds the files);
  * the reading stage alone (headers and import tables), fast engine vs lief,
    side by side in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from wheelcache import unpacked  # noqa: E402

CORE = [
    "cupy-cuda12x==14.2.0",
    "ctranslate2==4.8.5",
    "nvidia-cuda-runtime-cu12==12.9.79",
    "nvidia-cufft-cu12==11.4.1.4",
]
# the kernel-heavy cuBLAS wheel (cublasLt64_12.dll alone holds ~3000 fat binary containers)
SETS = {"core": CORE, "core+cublas": CORE + ["nvidia-cublas-cu12==12.9.2.10"]}

READ_STAGE = """
import json, resource, sys, time
from cuda4amd.scan.discover import discover, resolve_target
from cuda4amd.scan.pipeline import read_all
target = resolve_target(sys.argv[1])
found = discover(target, follow_links=True).binaries  # the tree links to the unpacked wheels
start = time.perf_counter()
binaries, errors = read_all(target, found, sys.argv[2])
print(json.dumps({"seconds": time.perf_counter() - start, "binaries": len(binaries),
                  "errors": len(errors), "bytes": sum(b.size for b in found)}))
"""


def timed(command: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in MB and stdout of one fresh process."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = child.stdout.read()
    _, _, usage = os.wait4(child.pid, 0)
    child.returncode = 0
    return time.perf_counter() - start, usage.ru_maxrss // 1024, out.decode()


def measure(packages: list[str], runs: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="cuda4amd-bench-"))
    tree = workdir / "tree"
    tree.mkdir()
    for spec in packages:
        (tree / spec.split("==")[0]).symlink_to(unpacked(spec), target_is_directory=True)

    # the tree's folders are links to the unpacked wheels, outside it: --follow-links walks them
    scan = [sys.executable, "-c", "from cuda4amd.cli import main; main()", "scan", str(tree), "--format", "json",
            "--follow-links"]
    timed(scan)  # warm the page cache and Python's bytecode cache
    runs_done = [timed(scan) for _ in range(runs)]
    report = json.loads(runs_done[-1][2])
    read = {engine: [timed([sys.executable, "-c", READ_STAGE, str(tree), engine]) for _ in range(max(1, runs // 2))]
            for engine in ("fast", "lief")}
    shutil.rmtree(workdir)

    def stage(engine: str) -> tuple[float, int, dict]:
        results = [json.loads(out) for _, _, out in read[engine]]
        return statistics.median(r["seconds"] for r in results), max(rss for _, rss, _ in read[engine]), results[0]

    fast_s, fast_rss, facts = stage("fast")
    lief_s, lief_rss, _ = stage("lief")
    wall = [w for w, _, _ in runs_done]
    print(f"packages: {', '.join(packages)}")
    print(f"tree: {report['summary']['files']} files, {facts['binaries']} binaries, {facts['bytes'] / 2**20:.0f} MiB of binaries; verdict {report['verdict']}")
    print()
    print("| measurement | median | min | max | peak RSS |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| end-to-end `cuda4amd scan --format json` ({runs} warm runs) | {statistics.median(wall):.3f} s | {min(wall):.3f} s | {max(wall):.3f} s | {max(r for _, r, _ in runs_done)} MB |")
    print(f"| reading stage, fast engine | {fast_s:.3f} s | | | {fast_rss} MB |")
    print(f"| reading stage, lief engine | {lief_s:.3f} s | | | {lief_rss} MB |")
    print()
    print(f"reading stage: fast is {lief_s / fast_s:.0f}x faster than lief")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--set", choices=sorted(SETS), action="append", help="package set(s) to measure (default: all)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print()
    for name in args.set or SETS:
        print(f"## {name}")
        print()
        measure(SETS[name], args.runs)


if __name__ == "__main__":
    main()
