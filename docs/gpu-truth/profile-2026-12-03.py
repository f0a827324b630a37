"""Harness behind the "where the main process's time goes" figures of docs/performance.md (2026-12-03): one
`cuda4amd scan TREE --format json [options]` in this process under cProfile (the main process only: the
workers it forks are not profiled), its report thrown away; prints the functions with the most own time and
the most time below them. Kept as the provenance of those figures, not a tool.

    python profile-2026-12-03.py TREE [scan options...]
"""
import cProfile
import io
import os
import pstats
import sys
import time

tree, *options = sys.argv[1:]
sys.argv = ["cuda4amd", "scan", tree, "--format", "json", "-o", os.devnull, *options]
profile = cProfile.Profile()
clock = time.perf_counter()
profile.enable()
try:
    from cuda4amd.cli import entry_point

    entry_point()
except SystemExit:
    pass
finally:
    profile.disable()
print(f"# {' '.join(sys.argv)}: {time.perf_counter() - clock:.3f} s under the profiler")
for order, count in (("tottime", 45), ("cumulative", 70)):
    text = io.StringIO()
    pstats.Stats(profile, stream=text).strip_dirs().sort_stats(order).print_stats(count)
    print(f"## by {order}")
    print("\n".join(line for line in text.getvalue().splitlines()[6:] if line.strip()))
