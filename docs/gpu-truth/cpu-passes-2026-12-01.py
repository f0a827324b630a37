"""Harness behind the "CPU seconds" figures of docs/performance.md (2026-12-01, 22:09): every binary of a
tree read in one process, largest first, three passes, each pass's CPU time (user + sys), minor and major
page faults. A first pass dearer than the later ones would be per-process warm-up that workers pay.
Kept as the provenance of those figures, not a tool: it calls the read stage's per-file function directly.

    PYTHONPATH=SRC python3 cpu-passes-2026-12-01.py TREE
"""
import resource, sys
import cuda4amd.scan.read.parallel as par
from cuda4amd.scan import discover as D
from cuda4amd.rules import load_rules
from cuda4amd.scan.read.payload import PayloadInspector
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime, r.ru_minflt, r.ru_majflt
rules = load_rules(); insp = PayloadInspector(rules, rules.release(rules.default_release))
found = D.discover(D.resolve_target(sys.argv[1])).binaries
found.sort(key=lambda b: -b.size)
out = []
for rep in range(3):
    c0, f0, m0 = cpu()
    for item in found: par.read_item(item, "fast", insp, None)
    c1, f1, m1 = cpu()
    out.append(f"{c1-c0:.3f}s/{f1-f0}mf/{m1-m0}MF")
print("  ".join(out))
