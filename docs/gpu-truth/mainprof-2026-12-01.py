"""Measurement harness behind analysis-device-2026-12-01-*.txt and startup-device-2026-12-01-1805-no-bytecode.txt
(kept as the provenance of those figures, not a tool: it wraps the pipeline's functions of that day's code).

    PYTHONPATH=SRC python3 mainprof-2026-12-01.py TREE           # fresh processes: start-up, imports, warm scans
    PYTHONPATH=SRC python3 mainprof-2026-12-01.py TREE inproc    # in-process: analysis per function, cProfile

The main process's serial parts of a warm scan on the device: start-up and imports in fresh processes, the
analysis functions timed in-process (without and with the facts cache), and a cProfile of the main process.
"""
import functools, os, sys, time, subprocess, statistics, cProfile, pstats, io, gc
TREE = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "all"
if mode == "inproc":
    gc.set_threshold(200_000, 30, 30)
    import cuda4amd.scan.pipeline as pl
    from cuda4amd.scan.pipeline import ScanOptions, run_scan
    from cuda4amd.report.document import build
    from cuda4amd.report import render
    names = ["resolve_edges", "binary_identities", "in_tree_identities", "classify_edges", "unseen_loaders", "decide",
             "package_verdicts", "_locate_loads", "owners_of", "_reach", "host_gaps", "_archives_in"]
    acc = {}
    for n in names:
        f = getattr(pl, n)
        def w(*a, __f=f, __n=n, **k):
            t = time.perf_counter()
            try: return __f(*a, **k)
            finally: acc[__n] = acc.get(__n, 0) + time.perf_counter() - t
        setattr(pl, n, w)
    for cache in (False, True):
        opts = ScanOptions(target=TREE, cache=cache)
        run_scan(opts)
        for i in range(3):
            acc.clear(); t = time.perf_counter(); r = run_scan(opts); t1 = time.perf_counter()
            d = build(r); text = render("json", d); t2 = time.perf_counter()
            print("cache" if cache else "warm ", f"run_scan {t1-t:.3f} build+render {t2-t1:.3f}",
                  {k: round(v, 3) for k, v in r.timings.items()},
                  {k: round(v * 1000, 1) for k, v in sorted(acc.items(), key=lambda kv: -kv[1])}, flush=True)
    opts = ScanOptions(target=TREE, cache=False)
    pr = cProfile.Profile(); pr.enable(); r = run_scan(opts); d = build(r); text = render("json", d); pr.disable()
    s = io.StringIO(); st = pstats.Stats(pr, stream=s); st.sort_stats("tottime").print_stats(45); st.sort_stats("cumulative").print_stats(70)
    print(s.getvalue())
    sys.exit(0)
py = sys.executable
env = dict(os.environ)
def timed(cmd, n):
    out = []
    for _ in range(n):
        t = time.perf_counter(); p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); out.append(time.perf_counter() - t)
    return out
print("python -c pass", [round(x, 3) for x in timed([py, "-c", "pass"], 5)])
print("python -S -c pass", [round(x, 3) for x in timed([py, "-S", "-c", "pass"], 5)])
print("imports", [round(x, 3) for x in timed([py, "-c", "import cuda4amd.cli, cuda4amd.cli.scan, cuda4amd.scan.pipeline, cuda4amd.report.json_format, cuda4amd.report.document"], 5)])
print("scan --help", [round(x, 3) for x in timed([py, "-m", "cuda4amd", "scan", "--help"], 5)])
warm = timed([py, "-m", "cuda4amd", "scan", TREE, "--format", "json", "--no-cache"], 6)
print("warm --no-cache", [round(x, 3) for x in warm], "median", round(statistics.median(warm[1:]), 3))
p = subprocess.run([py, "-X", "importtime", "-c", "import cuda4amd.cli, cuda4amd.cli.scan, cuda4amd.scan.pipeline, cuda4amd.report.json_format, cuda4amd.report.document"], env=env, capture_output=True, text=True)
rows = []
for line in p.stderr.splitlines()[1:]:
    a, b, c = line.split("|")
    rows.append((int(a.replace("import time:", "")), int(b), c.rstrip()))
print("import self total ms", sum(r[0] for r in rows) / 1000)
for r in sorted(rows, reverse=True)[:30]:
    print(f"{r[0]/1000:7.1f} {r[1]/1000:7.1f} {r[2]}")
dc = subprocess.run([py, "-c", """
import time, dataclasses
orig = dataclasses._process_class
tot = [0.0, 0]
def pc(*a, **k):
    t = time.perf_counter()
    try: return orig(*a, **k)
    finally: tot[0] += time.perf_counter() - t; tot[1] += 1
dataclasses._process_class = pc
t = time.perf_counter()
import cuda4amd.cli, cuda4amd.cli.scan, cuda4amd.scan.pipeline, cuda4amd.report.json_format, cuda4amd.report.document
print(f"imports {time.perf_counter()-t:.3f} s, of which dataclass processing {tot[0]:.3f} s ({tot[1]} classes)")
"""], env=env, capture_output=True, text=True)
print(dc.stdout, dc.stderr[-2000:])
