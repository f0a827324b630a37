"""Harness behind docs/gpu-truth/parts-device-2026-12-02.txt (docs/performance.md, 2026-12-02); kept as the
provenance of those figures, not a tool: it wraps the pipeline's functions of that day's code.
    PYTHONPATH=SRC python3 analysis-faults-2026-12-02.py TREE [HOST]
"""
import gc, time, sys, resource
gc.set_threshold(200000,30,30)
import cuda4amd.scan.pipeline as p
from cuda4amd.scan.pipeline import ScanOptions, run_scan
marks={}
f0=p.owners_of
def first(*a,**k):
    marks['t0']=time.perf_counter(); marks['f0']=resource.getrusage(resource.RUSAGE_SELF).ru_minflt; return f0(*a,**k)
p.owners_of=first
f1=p._locate_loads
def last(*a,**k):
    r=f1(*a,**k); marks['t1']=time.perf_counter(); marks['f1']=resource.getrusage(resource.RUSAGE_SELF).ru_minflt; return r
p._locate_loads=last
start=resource.getrusage(resource.RUSAGE_SELF).ru_minflt
r=run_scan(ScanOptions(target=sys.argv[1], cache=False, host=sys.argv[2]))
thp=open('/sys/kernel/mm/transparent_hugepage/enabled').read().strip()
print(f"analysis {1000*(marks['t1']-marks['t0']):.1f} ms, minor faults in it {marks['f1']-marks['f0']}, whole scan {marks['f1']-start}; VmRSS", [l for l in open('/proc/self/status') if l.startswith(('VmRSS','VmHWM','AnonHugePages'))], thp)
