"""Harness behind the "a command-line scan's timeline" figures of docs/performance.md (2026-12-03): fresh
`cuda4amd scan TREE --format json --no-cache` processes (warm page cache), each stamping on one clock
(time.time) the moments it passes: interpreter up, the command line imported, the walk ahead forked, run_scan
entered, the walk ahead taken (asked, given), the report written, exit; the walk ahead's child stamps its walk,
and every worker each binary it reads. Kept as the provenance of those figures, not a tool.

    python cli-timeline-2026-12-03.py PYTHON TREE ROUNDS [scan options...]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import os, sys, time, json
import importlib.abc, importlib.machinery
MAIN = os.getpid()
LOG = os.environ["TIMELINE_LOG"]
def log(record):
    with open(LOG, "a") as out:  # one short O_APPEND write a record: whole lines from every process
        out.write(json.dumps(record) + "\n")
log({"mark": "up", "at": time.time()})

def stamp(name, inner):
    def timed(*args, **kwargs):
        start = time.time()
        try:
            return inner(*args, **kwargs)
        finally:
            log({"mark": name, "pid": os.getpid(), "main": os.getpid() == MAIN, "at": start, "end": time.time(),
                 **({"path": args[0].path} if name == "read" else {})})
    return timed

class Wrap(importlib.abc.MetaPathFinder):
    targets = {"cuda4amd.scan.pipeline": ("run_scan",), "cuda4amd.scan.read.parallel": ("read_item",),
               "cuda4amd.scan.discover": ("discover",), "cuda4amd.cli.output": ("emit",)}
    def find_spec(self, name, path, target=None):
        if name not in self.targets and name != "cuda4amd.scan.walk_ahead":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        execute = spec.loader.exec_module
        def exec_module(module):
            execute(module)
            if name == "cuda4amd.scan.walk_ahead":
                cls = module.WalkAhead
                start, take = cls.start.__func__, cls.take
                cls.start = classmethod(stamp("walk ahead start", start))
                cls.take = stamp("walk ahead take", take)
                return
            for attr in self.targets[name]:
                setattr(module, attr, stamp(attr if attr != "read_item" else "read", getattr(module, attr)))
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Wrap())
sys.argv = ["cuda4amd"] + sys.argv[1:]
from cuda4amd.cli import entry_point
log({"mark": "imported", "at": time.time()})
try:
    entry_point()
except SystemExit:
    log({"mark": "exit", "at": time.time()})
    raise
"""


def main() -> None:
    python, tree, rounds, *options = sys.argv[1:]
    for round_ in range(int(rounds)):
        path = tempfile.mktemp(prefix="timeline-")
        before = time.time()
        subprocess.run([python, "-c", CHILD, "scan", tree, "--format", "json", "--no-cache", *options],
                       stdout=subprocess.DEVNULL, env={**os.environ, "TIMELINE_LOG": path}, check=False)
        after = time.time()
        records = [json.loads(line) for line in open(path)]
        os.unlink(path)
        t = lambda v: f"+{v - before:.3f}"  # noqa: E731
        marks = {}
        for r in records:
            if r["mark"] not in ("read",) and not (r["mark"] == "discover" and r.get("main") is False):
                marks.setdefault(r["mark"], r)
        walks = [r for r in records if r["mark"] == "discover" and r.get("main") is False]
        reads = [r for r in records if r["mark"] == "read"]
        line = [f"up {t(marks['up']['at'])}", f"imported {t(marks['imported']['at'])}"]
        if "walk ahead start" in marks:
            line.append(f"walk ahead forked {t(marks['walk ahead start']['at'])}-{t(marks['walk ahead start']['end'])}")
        if walks:
            line.append(f"child's walk {t(walks[0]['at'])}-{t(walks[0]['end'])}")
        if "run_scan" in marks:
            line.append(f"run_scan {t(marks['run_scan']['at'])}-{t(marks['run_scan']['end'])}")
        if "walk ahead take" in marks:
            line.append(f"take {t(marks['walk ahead take']['at'])}-{t(marks['walk ahead take']['end'])}")
        elif "discover" in marks:
            line.append(f"walk here {t(marks['discover']['at'])}-{t(marks['discover']['end'])}")
        if reads:
            line.append(f"reads {t(min(r['at'] for r in reads))}-{t(max(r['end'] for r in reads))}")
        if "emit" in marks:
            line.append(f"report {t(marks['emit']['at'])}-{t(marks['emit']['end'])}")
        line.append(f"exit {t(marks['exit']['at'])}; ended {t(after)}")
        print(f"round {round_ + 1}: " + ", ".join(line))


main()
