"""Measurement harness behind timeline-device-2026-12-01-1651.txt and the read-ahead / walk-split /
split-search logs of 2026-12-01 (kept as the provenance of those figures, not a tool: it wraps the
pipeline's private functions of that day's code to time them).

    PYTHONPATH=SRC python3 timeline-2026-12-01.py TREE [RUNS] [HOST]

Scans TREE in-process RUNS times (--no-cache, default jobs) and prints, per run, the main
process's calls with their start and end (CLOCK_MONOTONIC, relative to the run's start) and each
worker's walk and read tasks (written by the workers to TL_DIR, default /tmp/tl). TL_JOBS,
TL_SPLIT and TL_FPT override --jobs, discover.SPLIT_LEVELS and discover.FOLDERS_PER_TASK.
"""
import functools, os, sys, time, glob, json
TL = os.environ.get("TL_DIR", "/tmp/tl")
os.makedirs(TL, exist_ok=True)
marks = []
def wrap(mod, name, label=None, worker=False):
    f = getattr(mod, name)
    label = label or name
    @functools.wraps(f)
    def w(*a, **k):
        t = time.perf_counter()
        r = None
        try:
            r = f(*a, **k)
            return r
        finally:
            e = time.perf_counter()
            if worker and os.getpid() != MAIN:
                if label == "walk":
                    info = f"{sum(p[2] for p in r) if r else 0} {a[0][0][1] if a[0] else '-'}"
                else:
                    info = f"{sum(i.size for i in a[0]) >> 20} {max(a[0], key=lambda i: i.size).path}"
                with open(f"{TL}/{os.getpid()}", "a") as h:
                    h.write(f"{label} {t} {e} {info}\n")
            else:
                marks.append((label, t, e))
    setattr(mod, name, w if not isinstance(mod, type) else w)
MAIN = os.getpid()
import cuda4amd.scan.discover as d, cuda4amd.scan.read.parallel as par, cuda4amd.scan.pipeline as pl
import cuda4amd.scan.distributions as dist
wrap(d, "_walk_parts", "walk", worker=True)
wrap(par, "_worker_read", "read", worker=True)
wrap(d, "_walk_part", "walk_part_main")
wrap(d, "_replay")
if hasattr(d, "_in_walk_order"): wrap(d, "_in_walk_order")
wrap(pl.discovery, "discover"); wrap(pl.discovery, "named_skipped")
if hasattr(par, "ReadAhead"):
    wrap(par.ReadAhead, "claim", "ahead.claim")
for n in ["read_all", "find_distributions", "owner_map", "resolve_edges", "binary_identities", "classify_edges",
          "unseen_loaders", "decide", "package_verdicts", "_locate_loads", "host_gaps", "_releases_parsed", "_host", "_reach", "in_tree_identities"]:
    if hasattr(pl, n): wrap(pl, n)
orig_close = par.ReadPool.close
def close(self):
    t = time.perf_counter(); orig_close(self); marks.append(("pool.close", t, time.perf_counter()))
par.ReadPool.close = close
orig_exec = par.ReadPool.executor
def executor(self):
    t = time.perf_counter(); first = self._executor is None; r = orig_exec(self)
    if first: marks.append(("pool.create", t, time.perf_counter()))
    return r
par.ReadPool.executor = executor
from cuda4amd.scan.pipeline import ScanOptions, run_scan
import gc
if not os.environ.get('TL_GC'): gc.set_threshold(200_000, 30, 30)
from cuda4amd.report.document import build
from cuda4amd.report import render
if os.environ.get("TL_SPLIT"): d.SPLIT_LEVELS = int(os.environ["TL_SPLIT"])
if os.environ.get("TL_FPT"): d.FOLDERS_PER_TASK = int(os.environ["TL_FPT"])
target = sys.argv[1]; runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
host = sys.argv[3] if len(sys.argv) > 3 else "auto"
opts = ScanOptions(target=target, host=host, cache=False, jobs=int(os.environ["TL_JOBS"]) if os.environ.get("TL_JOBS") else None)
for run in range(runs):
    for f in glob.glob(f"{TL}/*"): os.unlink(f)
    marks.clear()
    t0 = time.perf_counter(); r = run_scan(opts); t1 = time.perf_counter()
    doc = build(r); t2 = time.perf_counter(); text = render("json", doc); t3 = time.perf_counter()
    print(f"\n== run {run}: run_scan {t1-t0:.3f} build {t2-t1:.3f} render {t3-t2:.3f}  timings {({k: round(v, 3) for k, v in r.timings.items()})}")
    agg = {}
    for label, s, e in marks:
        if label in ("walk_part_main",):
            a = agg.setdefault(label, [s, e, 0.0, 0]); a[1] = e; a[2] += e - s; a[3] += 1; continue
        print(f"  main {label:22s} {s-t0:7.3f} → {e-t0:7.3f}  ({e-s:.3f})")
    for label, (s, e, tot, n) in agg.items():
        print(f"  main {label:22s} {s-t0:7.3f} → {e-t0:7.3f}  ({tot:.3f} in {n} calls)")
    workers = {}
    for f in glob.glob(f"{TL}/*"):
        for line in open(f):
            label, s, e, n, what = line.split(maxsplit=4); workers.setdefault(os.path.basename(f), []).append((label, float(s) - t0, float(e) - t0, n, what.strip()))
    if workers:
        starts = [min(iv[1] for iv in v) for v in workers.values()]
        ends = [max(iv[2] for iv in v) for v in workers.values()]
        walk = [iv for v in workers.values() for iv in v if iv[0] == "walk"]
        read = [iv for v in workers.values() for iv in v if iv[0] == "read"]
        def span(ivs): return (min(i[1] for i in ivs), max(i[2] for i in ivs), sum(i[2] - i[1] for i in ivs)) if ivs else (0, 0, 0)
        ws, we, wt = span(walk); rs, re_, rt = span(read)
        print(f"  workers {len(workers)}: first task {min(starts):.3f}, last end {max(ends):.3f}")
        print(f"  walk tasks {len(walk)}: {ws:.3f} → {we:.3f}, busy {wt:.3f} s summed")
        print(f"  read tasks {len(read)}: {rs:.3f} → {re_:.3f}, busy {rt:.3f} s summed; longest {max((i[2]-i[1] for i in read), default=0):.3f}")
        for iv in sorted(walk, key=lambda iv: iv[1] - iv[2])[:4]:
            print(f"    long walk task {iv[1]:.3f} → {iv[2]:.3f} ({iv[2]-iv[1]:.3f}) files {iv[3]} first {iv[4][:60]}")
        print(f"    walk task starts: {' '.join(f'{x:.2f}' for x in sorted(i[1] for i in walk)[::10])}")
        for iv in sorted(read, key=lambda iv: iv[1] - iv[2])[:3]:
            print(f"    long read task {iv[1]:.3f} → {iv[2]:.3f} ({iv[2]-iv[1]:.3f}) MiB {iv[3]} largest {iv[4][-50:]}")
        ends_sorted = sorted(ends)
        print(f"  worker read ends: {' '.join(f'{x:.2f}' for x in ends_sorted)}")
