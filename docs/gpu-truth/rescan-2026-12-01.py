"""Harness behind rescan-device-2026-12-01-2158.txt: a scan, then three in-process re-scans (the facts cache
warm, the host not probed, as `scan --fix` verification re-scans), each with its ScanResult.timings.
Kept as the provenance of those figures, not a tool.

    CUDA4AMD_FACTS_CACHE=DIR PYTHONPATH=SRC python3 rescan-2026-12-01.py TREE
"""
import gc, sys, time
from cuda4amd.cli import GC_ALLOCATIONS
from cuda4amd.rules import load_rules
from cuda4amd.scan.pipeline import ScanOptions, run_scan
gc.set_threshold(GC_ALLOCATIONS, 30, 30)
rules = load_rules()
options = ScanOptions(target=sys.argv[1], host="none", cache=True)
run_scan(options, rules=rules)
for _ in range(3):
    t = time.perf_counter(); r = run_scan(options, rules=rules)
    print(round(time.perf_counter() - t, 3), {k: round(v, 3) for k, v in r.timings.items()})
