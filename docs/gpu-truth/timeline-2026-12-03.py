"""Harness behind the "a warm scan's timeline on 16 cores" figures of docs/performance.md (2026-12-03): scans
TREE in this process (`run_scan`, `--no-cache`, host none, the default jobs) ROUNDS times and stamps, on one
clock (time.time), what the main process and every worker do: the main process's listing of the top
folders, the workers' start, each walk task and each read (pid, start, end), the replay of the walk, the
read stage's end and the analysis; then prints the timeline. Kept as the provenance of those figures, not a
tool.

    python timeline-2026-12-03.py TREE ROUNDS [JOBS]
"""
import json
import os
import statistics
import sys
import tempfile
import time

from cuda4amd.scan import discover as discovery
from cuda4amd.scan import pipeline
from cuda4amd.scan.read import parallel

LOG = tempfile.mktemp(prefix="timeline-")
MAIN = os.getpid()
marks: dict[str, float] = {}


def log(record: dict) -> None:
    with open(LOG, "a") as out:  # one short O_APPEND write a record: whole lines from every process
        out.write(json.dumps(record) + "\n")


def wrap(module, name, kind):
    inner = getattr(module, name)

    def timed(*args, **kwargs):
        start = time.time()
        try:
            return inner(*args, **kwargs)
        finally:
            end = time.time()
            if os.getpid() == MAIN:
                marks.setdefault(kind + " first", start)
                marks[kind + " last"] = end
                marks[kind + " total"] = marks.get(kind + " total", 0.0) + end - start
            else:
                extra = {"path": args[0].path, "size": args[0].size} if kind == "read" else {"tasks": len(args[0])}
                log({"pid": os.getpid(), "kind": kind, "start": start, "end": end, **extra})

    # pickled by reference (a walk task names its function): as the module's attribute it replaces
    timed.__module__, timed.__qualname__ = module.__name__, name
    setattr(module, name, timed)


wrap(discovery, "_walk_part", "listing")
wrap(discovery, "_walk_parts", "walk")
wrap(discovery, "_replay", "replay")
wrap(parallel, "read_item", "read")
# the main process's own steps around the read stage
for module, name in ((pipeline, "read_all"), (pipeline, "find_distributions"), (pipeline, "_releases_parsed"),
                     (discovery, "named_skipped"), (pipeline, "_archives_in"), (pipeline, "_scan_archive")):
    wrap(module, name, name)
results = parallel._read_in_workers


def timed_results(*args, **kwargs):
    for item in results(*args, **kwargs):
        marks.setdefault("result first", time.time())
        marks["result last"] = time.time()
        yield item


parallel._read_in_workers = timed_results
executor = parallel.ReadPool.executor


def timed_executor(self):
    fresh = self._executor is None
    start = time.time()
    value = executor(self)
    if fresh:
        marks["pool made"] = (start, time.time())
    return value


parallel.ReadPool.executor = timed_executor
close = parallel.ReadPool.close


def timed_close(self):
    start = time.time()
    close(self)
    marks.setdefault("pool closed", (start, time.time()))


parallel.ReadPool.close = timed_close


def main() -> None:
    tree, rounds = sys.argv[1], int(sys.argv[2])
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else None
    for round_ in range(rounds):
        marks.clear()
        open(LOG, "w").close()
        start = time.time()
        result = pipeline.run_scan(pipeline.ScanOptions(target=tree, host="none", cache=False, jobs=jobs))
        end = time.time()
        records = [json.loads(line) for line in open(LOG)]
        walks = [r for r in records if r["kind"] == "walk"]
        reads = [r for r in records if r["kind"] == "read"]
        t = lambda v: f"+{v - start:.3f}"  # noqa: E731
        print(f"## round {round_ + 1}: run_scan {end - start:.3f} s; timings "
              + ", ".join(f"{k} {v:.3f}" for k, v in result.timings.items()))
        print(f"main's listing: {t(marks.get('listing first', start))} to {t(marks.get('listing last', start))} "
              f"({marks.get('listing total', 0):.3f} s in it)")
        if "pool made" in marks:
            print(f"pool made: {t(marks['pool made'][0])} to {t(marks['pool made'][1])}")
        if walks:
            busy = {}
            for r in walks:
                busy[r["pid"]] = busy.get(r["pid"], 0) + r["end"] - r["start"]
            print(f"walk tasks: {len(walks)} in {len(busy)} workers, first start {t(min(r['start'] for r in walks))}, "
                  f"last end {t(max(r['end'] for r in walks))}; busy per worker max {max(busy.values()):.3f}, "
                  f"median {statistics.median(busy.values()):.3f}, sum {sum(busy.values()):.3f} s")
        if "pool closed" in marks:
            print(f"pool shut down: {t(marks['pool closed'][0])} to {t(marks['pool closed'][1])}")
        print(f"replay: {t(marks.get('replay first', start))} to {t(marks.get('replay last', start))}")
        if reads:
            busy, first_start, last_end = {}, {}, {}
            for r in reads:
                busy[r["pid"]] = busy.get(r["pid"], 0) + r["end"] - r["start"]
                first_start[r["pid"]] = min(first_start.get(r["pid"], r["start"]), r["start"])
                last_end[r["pid"]] = max(last_end.get(r["pid"], r["end"]), r["end"])
            print(f"reads: {len(reads)} in {len(busy)} workers, first start {t(min(first_start.values()))}, "
                  f"last end {t(max(last_end.values()))}; busy per worker max {max(busy.values()):.3f}, median "
                  f"{statistics.median(busy.values()):.3f}, sum {sum(busy.values()):.3f} s; workers' last ends "
                  + " ".join(sorted(t(v) for v in last_end.values())))
            print("longest reads: seconds, MiB, start, pid, path")
            for r in sorted(reads, key=lambda r: r["start"] - r["end"])[:10]:
                print(f"  {r['end'] - r['start']:.3f} {r['size'] / 2**20:8.1f} {t(r['start'])} {r['pid']} {r['path']}")
        for name in ("result", "read_all", "find_distributions", "_releases_parsed", "named_skipped",
                     "_archives_in", "_scan_archive"):
            if name + " first" in marks:
                print(f"{name} (main): first {t(marks[name + ' first'])}, last {t(marks[name + ' last'])}"
                      + (f", {marks[name + ' total']:.3f} s in it" if name + " total" in marks else ""))
        print()
    os.unlink(LOG)


main()
