"""Harness behind docs/gpu-truth/parts-device-2026-12-02.txt (docs/performance.md, 2026-12-02); kept as the
provenance of those figures, not a tool: it wraps the pipeline's functions of that day's code.
    PYTHONPATH=SRC python3 analysis-steps-2026-12-02.py TREE HOST
"""
import gc, time, sys
gc.set_threshold(200000,30,30)
import cuda4amd.scan.pipeline as p
from cuda4amd.scan.pipeline import ScanOptions, run_scan
names=['owners_of','_reach','resolve_edges','binary_identities','in_tree_identities','classify_edges','host_gaps','unseen_loaders','decide','package_verdicts','_locate_loads','_reached_from']
tot={}
for n in names:
    f=getattr(p,n)
    def w(*a,_f=f,_n=n,**k):
        t=time.perf_counter(); r=_f(*a,**k); tot[_n]=tot.get(_n,0)+time.perf_counter()-t; return r
    setattr(p,n,w)
gcs=[]
def cb(phase, info):
    if phase=='start': gcs.append([info['generation'], time.perf_counter()])
    else: gcs[-1][1]=time.perf_counter()-gcs[-1][1]
gc.callbacks.append(cb)
r=run_scan(ScanOptions(target=sys.argv[1], cache=False, host=sys.argv[2]))
print({k:round(1000*v,1) for k,v in r.timings.items()}); print('analyse', round(1000*r.timings['analyse'],1), {k:round(v*1000,1) for k,v in tot.items()}, 'gc', [(g, round(1000*t,1)) for g,t in gcs if t>0.002])
