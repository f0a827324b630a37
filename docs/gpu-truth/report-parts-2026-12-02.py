"""Harness behind docs/gpu-truth/parts-device-2026-12-02.txt (docs/performance.md, 2026-12-02); kept as the
provenance of those figures, not a tool: it wraps the pipeline's functions of that day's code.
    PYTHONPATH=SRC python3 report-parts-2026-12-02.py TREE [HOST]
"""
import gc, sys, time, io
gc.set_threshold(200000, 30, 30)
from cuda4amd.scan.pipeline import ScanOptions, run_scan
from cuda4amd.report.document import build
from cuda4amd.report.redact import Redactor
from cuda4amd.report import json_format
for round in range(3):
    r = run_scan(ScanOptions(target=sys.argv[1], cache=True))
    t0 = time.perf_counter(); d = build(r); t1 = time.perf_counter()
    red = Redactor(target_root=r.target.path); s = red.document(d); t2 = time.perf_counter()
    text = json_format.render(s); t3 = time.perf_counter()
    print(f"build {1000*(t1-t0):.1f} redact {1000*(t2-t1):.1f} render {1000*(t3-t2):.1f} ms, {len(text)} chars; analyse {1000*r.timings['analyse']:.1f}")
