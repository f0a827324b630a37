"""Two builds of cuda4amd, one tree, interleaved: the comparison that holds on a machine whose speed drifts.

    python tools/ab_bench.py TREE --a /tmp/old-venv/bin/python --b .venv/bin/python --runs 10
    python tools/ab_bench.py TREE --a python3 --a-path old/src --b python3 --b-path src   # source trees

Each run is a fresh process, `python -m cuda4amd scan TREE --format json`,
A and B alternating (the order flips every round), for a warm full scan
(`--no-cache`) and a re-scan (each side's own facts cache, filled by two
untimed runs first). Prints each side's median and minimum and B ÷ A, then
every run in the order it ran. Single figures on a shared machine move by
±30 % from hour to hour (docs/performance.md); a ratio from the same
minutes does not. A run whose page faults read the disk (major faults of
the scan and its workers: pages of the tree dropped from the page cache
since the run before) is marked with their count, and each side's runs
without any are summarised too.

A scan's exit status is its verdict (cli/scan.py); a run whose status
differs from the first untimed run of either side (a build that crashed,
or one that judges the tree differently) stops the comparison: its time
would say nothing.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree")
    parser.add_argument("--a", required=True, help="interpreter of build A")
    parser.add_argument("--b", required=True, help="interpreter of build B")
    parser.add_argument("--a-path", help="PYTHONPATH for A (a source tree holding cuda4amd/)")
    parser.add_argument("--b-path", help="PYTHONPATH for B")
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    sides = {"A": (args.a, args.a_path), "B": (args.b, args.b_path)}
    caches = {name: tempfile.mkdtemp(prefix=f"cuda4amd-ab-{name}-") for name in sides}

    first_status: int | None = None  # the exit status of the first run, which every run must give

    def run(name: str, extra: list[str]) -> tuple[float, int]:
        """(seconds, page faults that read the disk) of one scan."""
        nonlocal first_status
        python, path = sides[name]
        env = {**os.environ, "CUDA4AMD_FACTS_CACHE": caches[name]}
        if path:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (path, os.environ.get("PYTHONPATH")) if p)
        faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_majflt
        start = time.perf_counter()
        done = subprocess.run([python, "-m", "cuda4amd", "scan", args.tree, "--format", "json", *extra],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        elapsed = time.perf_counter() - start
        faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_majflt - faults
        if first_status is None:
            first_status = done.returncode
        if done.returncode != first_status:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-5:]
            raise SystemExit(f"build {name} exited {done.returncode}, the first run {first_status}: no comparison\n"
                             + "\n".join(tail))
        return elapsed, faults

    for name in sides:  # the page cache and each side's facts cache
        run(name, [])
        run(name, [])
    for label, extra in (("warm full scan, --no-cache", ["--no-cache"]), ("re-scan, warm facts cache", [])):
        times: dict[str, list[float]] = {name: [] for name in sides}
        from_memory: dict[str, list[float]] = {name: [] for name in sides}  # the runs that read nothing from disk
        order: list[tuple[str, float, int]] = []
        for round_ in range(args.runs):
            for name in (("A", "B") if round_ % 2 == 0 else ("B", "A")):
                seconds, faults = run(name, extra)
                times[name].append(seconds)
                if not faults:
                    from_memory[name].append(seconds)
                order.append((name, seconds, faults))
        median = {name: statistics.median(t) for name, t in times.items()}
        cells = "; ".join(f"{name} median {median[name]:.3f} s (min {min(times[name]):.3f})" for name in sides)
        print(f"{label}: {cells}; B / A {median['B'] / median['A']:.2f}")
        if any(len(from_memory[name]) < len(times[name]) for name in sides) and all(from_memory.values()):
            warm = {name: statistics.median(t) for name, t in from_memory.items()}
            cells = "; ".join(f"{name} median {warm[name]:.3f} s ({len(from_memory[name])} of {len(times[name])})"
                              for name in sides)
            print(f"  the runs that read nothing from the disk: {cells}; B / A {warm['B'] / warm['A']:.2f}")
        print("  runs in order: " + " ".join(f"{name} {seconds:.3f}" + (f" ({faults} disk reads)" if faults else "")
                                             for name, seconds, faults in order))


if __name__ == "__main__":
    main()
