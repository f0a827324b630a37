"""Harness behind the "where a cold scan waits" figures of docs/performance.md (2026-12-02): fresh
`cuda4amd scan TREE --format json --no-cache` processes, each after `sync; echo 3 > /proc/sys/vm/drop_caches`
(root only), stamping the moments it passes as phases-2026-12-02.py does, and logging every binary the read
stage reads (in whichever process reads it): its size, the seconds and major page faults of its headers
(read_buffer) and of its kernels and by-name loads (inspect). Kept as the provenance of those figures, not a tool.

    python cold-2026-12-02.py PYTHON TREE ROUNDS [--warm] [scan options...]

--warm: no dropping, the page cache as it is (the same figures for a warm run).
COLD_VARIANT=headers-random: each binary's headers and tables read with MADV_RANDOM (no read-around), then the
mapping set back to MADV_NORMAL for the kernel and by-name searches, as the scan has it.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import os, sys, time, resource, json
stamps = {"up": time.time()}
import importlib.abc, importlib.machinery

LOG = os.environ["COLD_FILES"]

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt

def disk_bytes():  # what this process had read from the disk (readahead included), /proc/self/io
    with open("/proc/self/io") as io:
        for line in io:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0

def log(record):
    with open(LOG, "a") as out:  # one short O_APPEND write a record: whole lines from every process
        out.write(json.dumps(record) + "\n")

class Wrap(importlib.abc.MetaPathFinder):
    targets = {"cuda4amd.scan.pipeline", "cuda4amd.scan.read.parallel"}
    def find_spec(self, name, path, target=None):
        if name not in self.targets:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        execute = spec.loader.exec_module
        def exec_module(module):
            execute(module)
            if name == "cuda4amd.scan.pipeline":
                inner = module.run_scan
                def run_scan(*args, **kwargs):
                    stamps["run_scan in"] = time.time()
                    value = inner(*args, **kwargs)
                    stamps["run_scan out"] = time.time()
                    stamps["timings"] = dict(value.timings)
                    return value
                module.run_scan = run_scan
                return
            read_buffer, read_item, mapped = module.read_buffer, module.read_item, module.mapped
            part = {}
            if os.environ.get("COLD_VARIANT") == "headers-random":
                # the headers read with no read-around (MADV_RANDOM), the rest as the scan does
                import contextlib, mmap
                @contextlib.contextmanager
                def random_mapped(path):
                    with mapped(path) as buf:
                        if isinstance(buf, mmap.mmap):
                            buf.madvise(mmap.MADV_RANDOM)
                        yield buf
                def normal_again(buf):
                    if isinstance(buf, mmap.mmap):
                        buf.madvise(mmap.MADV_NORMAL)
                module.mapped = random_mapped
            else:
                def normal_again(buf):
                    pass
            def timed_read_buffer(*args, **kwargs):
                clock, before, disk = time.perf_counter(), faults(), disk_bytes()
                try:
                    return read_buffer(*args, **kwargs)
                finally:
                    normal_again(args[0])
                    part["headers"] = (time.perf_counter() - clock, faults() - before, disk_bytes() - disk)
            def timed_read_item(item, *args, **kwargs):
                part.clear()
                clock, before, start, disk = time.perf_counter(), faults(), time.time(), disk_bytes()
                outcome = read_item(item, *args, **kwargs)
                seconds, majflt, disk = time.perf_counter() - clock, faults() - before, disk_bytes() - disk
                headers = part.get("headers", (0.0, 0, 0))
                log({"pid": os.getpid(), "path": item.path, "size": item.size, "start": start,
                     "seconds": seconds, "faults": majflt, "disk": disk, "headers_s": headers[0],
                     "headers_faults": headers[1], "headers_disk": headers[2]})
                return outcome
            module.read_buffer, module.read_item = timed_read_buffer, timed_read_item
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Wrap())
sys.argv = ["cuda4amd"] + sys.argv[1:]
from cuda4amd.cli import entry_point
stamps["imported"] = time.time()
try:
    entry_point()
except SystemExit:
    stamps["exit"] = time.time()
    stamps["faults"] = faults()
    stamps["children faults"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_majflt
    with open(os.environ["COLD_OUT"], "w") as out:
        out.write(json.dumps(stamps))
    raise
"""


def drop_caches() -> None:
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as knob:
        knob.write("3\n")


def main() -> None:
    python, tree, rounds, *options = sys.argv[1:]
    warm = "--warm" in options
    options = [o for o in options if o != "--warm"]
    folder = tempfile.mkdtemp(prefix="cold-")
    for round_ in range(int(rounds)):
        out, files = os.path.join(folder, f"{round_}.json"), os.path.join(folder, f"{round_}.files")
        if not warm:
            drop_caches()
        before = time.time()
        subprocess.run([python, "-c", CHILD, "scan", tree, "--format", "json", "--no-cache", *options],
                       stdout=subprocess.DEVNULL, env={**os.environ, "COLD_OUT": out, "COLD_FILES": files}, check=False)
        after = time.time()
        stamps = json.load(open(out))
        reads = [json.loads(line) for line in open(files)]
        variant = os.environ.get("COLD_VARIANT", "as the scan is")
        print(f"## round {round_ + 1} ({'warm' if warm else 'after drop_caches'}, {variant}): total {after - before:.3f} s")
        print(f"interpreter up {stamps['up'] - before:.3f} s, cli imported +{stamps['imported'] - stamps['up']:.3f}, "
              f"run_scan in +{stamps['run_scan in'] - stamps['imported']:.3f}, run_scan {stamps['run_scan out'] - stamps['run_scan in']:.3f}, "
              f"after it {after - stamps['run_scan out']:.3f}")
        print("run_scan:", ", ".join(f"{k} {v:.3f}" for k, v in stamps["timings"].items()))
        print(f"major faults: main {stamps['faults']}, children {stamps['children faults']}")
        by_pid: dict[int, list[dict]] = {}
        for r in reads:
            by_pid.setdefault(r["pid"], []).append(r)
        first = min(r["start"] for r in reads)
        last = max(r["start"] + r["seconds"] for r in reads)
        busy = sorted((sum(r["seconds"] for r in rs) for rs in by_pid.values()), reverse=True)
        print(f"read: {len(reads)} files in {len(by_pid)} processes, first start to last end {last - first:.3f} s "
              f"(from run_scan in +{first - stamps['run_scan in']:.3f}); busy per process: max {busy[0]:.3f}, "
              f"median {statistics.median(busy):.3f}, sum {sum(busy):.3f} s")
        total_faults = sum(r["faults"] for r in reads)
        header_faults = sum(r["headers_faults"] for r in reads)
        print(f"faults in reads: {total_faults} (headers {header_faults}); seconds: headers "
              f"{sum(r['headers_s'] for r in reads):.3f}, the rest {sum(r['seconds'] - r['headers_s'] for r in reads):.3f}")
        print(f"read from the disk: {sum(r['disk'] for r in reads) / 2**20:.0f} MiB (headers "
              f"{sum(r['headers_disk'] for r in reads) / 2**20:.0f} MiB) of {sum(r['size'] for r in reads) / 2**20:.0f} MiB of binaries")
        print("slowest reads: seconds, faults (headers), MiB from the disk (headers), MiB, started at +s, path")
        for r in sorted(reads, key=lambda r: -r["seconds"])[:12]:
            print(f"  {r['seconds']:.3f} {r['faults']:6d} ({r['headers_faults']}) {r['disk'] / 2**20:7.1f} "
                  f"({r['headers_disk'] / 2**20:.1f}) {r['size'] / 2**20:8.1f} +{r['start'] - first:.3f} {r['path']}")
        print()


main()
