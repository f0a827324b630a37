"""Harness behind the decode-against-unpickle figures of docs/performance.md (2026-12-01, 21:59): a tree's
facts read from a warm facts cache (FactCache.get_all: seals, marshal, checks, building the facts) against
pickle.loads of the same outcomes, which is what the main process would pay if workers decoded the records
and sent them back. Kept as the provenance of those figures, not a tool.

    CUDA4AMD_FACTS_CACHE=DIR PYTHONPATH=SRC python3 decode-vs-pickle-2026-12-01.py TREE   (after a scan of TREE)
"""
import pickle, sys, time
from cuda4amd.rules import load_rules
from cuda4amd.scan import discover as D
from cuda4amd.scan.read.cache import FactCache
from cuda4amd.scan.read.payload import PayloadInspector
rules = load_rules(); insp = PayloadInspector(rules, rules.release(rules.default_release))
found = D.discover(D.resolve_target(sys.argv[1])).binaries
cache = FactCache.open("fast", insp)
keys = [cache.key(i, None) for i in found]
for _ in range(3):
    t = time.perf_counter(); outs = cache.get_all(keys, found, insp); td = time.perf_counter() - t
    blob = pickle.dumps(outs, protocol=pickle.HIGHEST_PROTOCOL)
    t = time.perf_counter(); back = pickle.loads(blob); tp = time.perf_counter() - t
    print(f"{sum(o is not None for o in outs)} hits: decode {td:.3f} s, unpickle {tp:.3f} s ({len(blob)/2**20:.1f} MiB), same {back == outs}")
