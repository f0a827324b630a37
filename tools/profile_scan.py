#!/usr/bin/env python3
"""Where a scan's main process spends its time: one `cuda4amd scan` under cProfile.

    python tools/profile_scan.py [--top N] TREE [-- SCAN OPTIONS...]
    python tools/profile_scan.py /opt/torch/.venv -- --no-cache

Runs `cuda4amd scan TREE --format json -o /dev/null [options]` in this process, through the console
script's entry point, under cProfile, and prints the N functions with the most own time and the N
with the most time below them (docs/performance.md, "Method"). Only the main process is profiled:
the workers it forks are not, and the times are the profiler's, slower than a plain run's.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time


def profile_scan(tree: str, scan_options: list[str]) -> tuple[cProfile.Profile, float, list[str]]:
    """The profile of one command-line scan, its seconds under the profiler and the command line it ran."""
    command = ["cuda4amd", "scan", tree, "--format", "json", "-o", os.devnull, *scan_options]
    profile = cProfile.Profile()
    saved_argv = sys.argv
    sys.argv = command
    clock = time.perf_counter()
    profile.enable()
    try:
        from cuda4amd.cli import entry_point

        entry_point()
    except SystemExit:  # the command's exit status; the scan's own output says what it found
        pass
    finally:
        profile.disable()
        sys.argv = saved_argv
    return profile, time.perf_counter() - clock, command


def listing(profile: cProfile.Profile, order: str, count: int) -> list[str]:
    """The profile's top `count` rows by `order` ("tottime" or "cumulative"), without pstats' preamble."""
    text = io.StringIO()
    pstats.Stats(profile, stream=text).strip_dirs().sort_stats(order).print_stats(count)
    rows = text.getvalue().splitlines()
    header = next(index for index, line in enumerate(rows) if line.lstrip().startswith("ncalls"))
    return [line for line in rows[header:] if line.strip()]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, scan_options = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tree", help="the folder, venv or wheel to scan")
    parser.add_argument("--top", type=int, default=45, help="rows of each listing (default 45)")
    args = parser.parse_args(ours)
    profile, seconds, command = profile_scan(args.tree, scan_options)
    print(f"# {' '.join(command)}: {seconds:.3f} s under the profiler")
    for order in ("tottime", "cumulative"):
        print(f"## by {order}")
        print("\n".join(listing(profile, order, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
