"""Harness behind parts-device-2026-12-01-2048.txt: the serial reading of every binary of a tree, twice in one
process, the second pass timed, with the time spent in each reader part (payload's and parallel's calls
wrapped with timers). Kept as the provenance of those figures, not a tool: it wraps private names of that day's code.

    PYTHONPATH=SRC python3 parts-2026-12-01.py TREE
"""
import sys, time, cProfile, pstats, io, functools
import cuda4amd.scan.read.payload as P, cuda4amd.scan.read.parallel as par
from cuda4amd.scan import discover as D
from cuda4amd.rules import load_rules
from cuda4amd.scan.read.payload import PayloadInspector
tot = {}
def wrap(mod, name):
    f = getattr(mod, name)
    @functools.wraps(f)
    def w(*a, **k):
        t = time.perf_counter()
        try: return f(*a, **k)
        finally: tot[name] = tot.get(name, 0) + time.perf_counter() - t
    setattr(mod, name, w)
for n in ["analyse_kernels", "find_library_names", "find_driver_names", "loader_disagreements", "Magics"]:
    if hasattr(P, n): wrap(P, n)
wrap(par, "read_buffer")
rules = load_rules(); insp = PayloadInspector(rules, rules.release(rules.default_release))
orig_called = type(insp.cuda_symbols).called_by
def called_by(self, syms):
    t = time.perf_counter()
    try: return orig_called(self, syms)
    finally: tot["called_by"] = tot.get("called_by", 0) + time.perf_counter() - t
type(insp.cuda_symbols).called_by = called_by
found = D.discover(D.resolve_target(sys.argv[1])).binaries
for rep in range(2):
    tot.clear(); t = time.perf_counter()
    for item in found: par.read_item(item, "fast", insp, None)
    total = time.perf_counter() - t
print(f"serial read {total:.3f} s; parts:", {k: round(v, 3) for k, v in sorted(tot.items(), key=lambda x: -x[1])})
