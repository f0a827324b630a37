"""Harness behind docs/gpu-truth/parts-device-2026-12-02.txt (docs/performance.md, 2026-12-02); kept as the
provenance of those figures, not a tool: it wraps the pipeline's functions of that day's code.
    PYTHONPATH=SRC python3 walk-main-2026-12-02.py TREE [HOST]
"""
import os, sys, time, gc
gc.set_threshold(200000,30,30)
import cuda4amd.scan.discover as d
MAIN=os.getpid(); acc=[0.0,0]
orig=d._walk_part
def w(*a,**k):
    t=time.perf_counter(); r=orig(*a,**k)
    if os.getpid()==MAIN: acc[0]+=time.perf_counter()-t; acc[1]+=1
    return r
d._walk_part=w
t=d.resolve_target(sys.argv[1])
t0=time.perf_counter(); r=d.discover(t, jobs=None); t1=time.perf_counter()
print(f"discover {1000*(t1-t0):.1f} ms; main's listing {1000*acc[0]:.1f} ms in {acc[1]} folders; {r.files_seen} files")
