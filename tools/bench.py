#!/usr/bin/env python3
"""Benchmark `cuda4amd scan` against the speed goals, the way docs/performance.md reports them.

    python tools/bench.py                          # the acceptance wheel sets (downloaded once)
    python tools/bench.py --tree /path/to/site-packages --runs 7
    python tools/bench.py --tree /opt/torch/.venv --lief-runs 0 --cold 3

Each measurement but one is a fresh process (`python -m cuda4amd scan TREE
--format json`), repeated, reported as min / median / max:

  * full scan, warm page cache, facts cache off (`--no-cache`): the default
    `--jobs` (one worker per usable core) and `--jobs 1`;
  * the floor: what any scan of the tree must do, in one fresh process
    (`FLOOR`): walk the tree, sniff each file's magic, read each binary's
    import names with the fast reader; no kernels, by-name strings, cache,
    analysis or report, in the same rounds as the two full scans above (one
    run of each a round). The table gives the full scans' medians over it;
  * `--engine lief` in the same run, and the ratio of the medians;
  * re-scan of the unchanged tree with a warm facts cache (a private cache
    folder, filled by one untimed run);
  * the same re-scan in one process, as `scan --fix` verifies what it
    changed: `run_scan` again after a scan, with the scan's rules, the host
    not probed (fix.apply's re-scan), timed in a process that has made the
    scan before it: no start-up, imports or report (a repeated scan by a
    user is the fresh-process row above);
  * peak memory of the main process and of the whole process tree (RSS
    summed over the processes, and PSS, which counts shared pages once),
    sampled from /proc every 5 ms in one extra run;
  * the PTX stage alone (issue 29): MB/s of PTX text per core over the
    tree's PTX as a scan checks it (`--no-cache --jobs 1`, in one process:
    CPU seconds spent in PtxStage.check, every release; the texts are
    decompressed by it), counted over the distinct texts (sha256) and over
    all it was given (a repeated text costs a hash);
  * cold page cache: each run after `sync; echo 3 > /proc/sys/vm/drop_caches`
    (needs root and a writable /proc/sys; the table says why not otherwise).

Each timed row also says how many page faults of its runs read the disk
(major faults of the scan and its workers, from getrusage): a warm run has
none. Where a warm row has some, pages of the tree were dropped from the
page cache since the run before (a kernel that pages out idle memory does
that, as DAMON's pageout scheme on the development machine), and those
runs' times include waiting for the disk; a row below it then gives the
runs that read nothing from the disk, the warm page cache the goal names.

Every run's report is compared with the first `--jobs 1 --no-cache` report
(all but its `command` field, the command line as typed): the figures only
count when the output is the same.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

CORE = [
    "cupy-cuda12x==14.2.0",
    "ctranslate2==4.8.5",
    "nvidia-cuda-runtime-cu12==12.9.79",
    "nvidia-cufft-cu12==11.4.1.4",
]
# the kernel-heavy cuBLAS wheel (cublasLt64_12.dll alone holds ~3000 fat binary containers)
SETS = {"core": CORE, "core+cublas": [*CORE, "nvidia-cublas-cu12==12.9.2.10"]}

# The goals of issue 13 (seconds, MB, ratio).
GOAL_WARM_2_CORES = 0.8
GOAL_WARM_16_CORES = 1.0
GOAL_COLD_16_CORES = 4.0
GOAL_LIEF_RATIO = 25.0
GOAL_RESCAN = 0.3
GOAL_MAIN_MB = 150
GOAL_TREE_MB = 400
# issue 28: a scan with its default jobs within this many times the floor (FLOOR)
GOAL_FLOOR_RATIO = 2.0
# issue 29: the PTX stage, MB/s of PTX text per core
GOAL_PTX_MB_S = 100.0


@dataclass
class Runs:
    wall: list[float] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    #: per run: page faults that read the disk (major faults) of the scan and its workers
    faults: list[int] = field(default_factory=list)

    def cells(self) -> str:
        if not self.wall:
            return "| | | |"
        return f"| {min(self.wall):.3f} s | {statistics.median(self.wall):.3f} s | {max(self.wall):.3f} s |"

    def disk(self) -> str:
        """The disk-reads cell: a warm run should have none; a run with some waited on the disk
        (a page reclaimed since the run before: a machine that pages out idle page cache, as DAMON can)."""
        if not self.faults:
            return ""
        touched = [count for count in self.faults if count]
        if not touched:
            return "0"
        return f"{sum(touched):,} in {len(touched)} of {len(self.faults)} runs"

    def from_memory(self) -> Runs:
        """The runs that read nothing from the disk: the warm page cache that a warm row means."""
        kept = [i for i, count in enumerate(self.faults) if count == 0]
        return Runs(wall=[self.wall[i] for i in kept], faults=[0] * len(kept))

    @property
    def median(self) -> float:
        return statistics.median(self.wall)


def scan_command(tree: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "cuda4amd", "scan", str(tree), "--format", "json", *options]


def scans(tree: Path, follow_links: bool) -> Callable[..., list[str]]:
    """scan_command for ``tree``, with --follow-links where the tree links to folders outside it."""
    always = ("--follow-links",) if follow_links else ()
    return lambda *options: scan_command(tree, *always, *options)


def met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def warm_row(runs: Runs, goal: float | None) -> str | None:
    """The table row of ``runs``' runs that read nothing from the disk, where only some did."""
    warm = runs.from_memory()
    if not warm.wall or len(warm.wall) == len(runs.wall):
        return None
    judged = f"≤ {goal} s | {met(warm.median <= goal)}" if goal is not None else "|"
    return f"| … of them, the runs that read nothing from the disk | {len(warm.wall)} {warm.cells()} {judged} | 0 |"


def print_if(line: str | None) -> None:
    if line is not None:
        print(line)


def disk_faults() -> int:
    """Major page faults of this process's waited-for children so far (a scan's workers are its own)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_majflt


def run(command: list[str], env: dict[str, str], times: int) -> Runs:
    return interleaved([command], env, times)[0]


def interleaved(commands: list[list[str]], env: dict[str, str], times: int) -> list[Runs]:
    """Each command ``times`` times, one run of each per round: their ratios hold on a machine whose speed
    drifts from minute to minute (docs/performance.md, "Compare builds in the same minutes")."""
    runs = [Runs() for _ in commands]
    for _ in range(times):
        for command, its in zip(commands, runs, strict=True):
            faults = disk_faults()
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, env=env, check=False)
            its.wall.append(time.perf_counter() - start)
            its.faults.append(disk_faults() - faults)
            if done.returncode not in (0, 3, 4):
                raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
            its.outputs.append(done.stdout.decode())
    return runs


def drop_caches() -> str | None:
    """None when the page cache was dropped, else why it could not be."""
    if os.geteuid() != 0:
        return "not root"
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
    except OSError as exc:
        return f"/proc/sys/vm/drop_caches: {exc.strerror or exc}"
    return None


def cold(command: list[str], env: dict[str, str], times: int) -> tuple[Runs, str | None]:
    runs = Runs()
    for _ in range(times):
        why = drop_caches()
        if why is not None:
            return runs, why
        one = run(command, env, 1)
        runs.wall += one.wall
        runs.outputs += one.outputs
        runs.faults += one.faults
    return runs, None


def _descendants(pid: int) -> list[int]:
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        stack += [int(c) for c in children]
    return found


def _status_kb(pid: int, field_name: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pss_kb(pid: int) -> tuple[int, int]:
    """(PSS, its anonymous part: Pss_Anon + Pss_Shmem, where the kernel says) in kB."""
    total = anon = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                total = int(line.split()[1])
            elif line.startswith(("Pss_Anon:", "Pss_Shmem:")):
                anon += int(line.split()[1])
    except OSError:
        pass
    return total, anon


def memory(command: list[str], env: dict[str, str]) -> dict[str, int] | None:
    """Peak MB: main process (VmHWM), process tree (summed RSS, summed PSS and its anonymous part); None without /proc.

    PSS counts the pages of the binaries the readers map (file pages, which
    the kernel drops under pressure without writing anything); its anonymous
    part (Pss_Anon + Pss_Shmem, Linux 5.0+) is the memory the scan allocates."""
    if not Path("/proc/self/smaps_rollup").exists():
        return None
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    main_kb = tree_rss = tree_pss = tree_anon = 0
    workers = 0
    while child.poll() is None:
        pids = _descendants(child.pid)
        workers = max(workers, len(pids) - 1)
        main_kb = max(main_kb, _status_kb(child.pid, "VmHWM"))
        tree_rss = max(tree_rss, sum(_status_kb(p, "VmRSS") for p in pids))
        pss = [_pss_kb(p) for p in pids]
        tree_pss = max(tree_pss, sum(total for total, _ in pss))
        tree_anon = max(tree_anon, sum(anon for _, anon in pss))
        time.sleep(0.005)
    return {"main": main_kb // 1024, "tree_rss": tree_rss // 1024, "tree_pss": tree_pss // 1024,
            "tree_anon": tree_anon // 1024, "workers": workers}


def tree_facts(tree: Path, report: dict, follow_links: bool) -> str:
    """The tree as the scan walked it: links to folders followed only with --follow-links
    (a venv's lib64 -> lib link would count every file twice)."""
    size = files = 0
    for folder, _, names in os.walk(tree, followlinks=follow_links):
        for name in names:
            try:
                size += os.stat(os.path.join(folder, name)).st_size
                files += 1
            except OSError:
                pass
    kinds: dict[str, int] = {}
    for binary in report["binaries"]:
        kinds[binary.get("format", "?")] = kinds.get(binary.get("format", "?"), 0) + 1
    shown = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return (f"{files:,} files, {size / 2**30:.2f} GiB; {len(report['binaries'])} binaries ({shown}); "
            f"verdict {report['verdict']}")


READERS = """
import json, sys, time
from cuda4amd.scan import discover
from cuda4amd.scan.read.engine import mapped, read_buffer
found = discover.discover(discover.resolve_target(sys.argv[1]), follow_links=sys.argv[2] == "1")
paths = [b.disk_path for b in found.binaries if b.disk_path]
spent = {}
for engine in ("fast", "lief"):
    clock = time.perf_counter()
    for path in paths:
        try:
            with mapped(path) as buf:
                read_buffer(buf, engine, path if engine == "lief" else None)
        except Exception:  # noqa: BLE001 - a file either reader refuses counts its time all the same
            pass
    spent[engine] = time.perf_counter() - clock
print(json.dumps({"files": len(paths), **spent}))
"""


FLOOR = """
import sys
from cuda4amd.scan import discover
from cuda4amd.scan.read.engine import MalformedBinary, mapped, read_buffer
# one process: the walk sniffs every file that is not named like data (its magic)
found = discover.discover(discover.resolve_target(sys.argv[1]), follow_links=sys.argv[2] == "1", jobs=1)
names = 0
for binary in found.binaries:
    if binary.disk_path:
        try:
            with mapped(binary.disk_path) as buf:
                names += len(read_buffer(buf, "fast", exports=False).imports)
        except (MalformedBinary, OSError):
            pass
print(names)
"""


def floor_command(tree: Path, follow_links: bool) -> list[str]:
    """The floor of a scan of ``tree`` (FLOOR) as a fresh process, as the scans are timed."""
    return [sys.executable, "-c", FLOOR, str(tree), "1" if follow_links else "0"]


READERS_TIMEOUT = 150  # seconds: lief alone over a 70,000-file venv is slow


IN_PROCESS_RESCAN = """
import gc, json, resource, sys, time
from cuda4amd.cli import GC_THRESHOLD
from cuda4amd.report.document import build
from cuda4amd.rules import load_rules
from cuda4amd.scan.pipeline import ScanOptions, run_scan
gc.set_threshold(*GC_THRESHOLD)  # as the CLI runs a command
rules = load_rules()
# fix.apply._same_scan_again: the options `scan` made (the facts cache on), the host not probed, the scan's rules
# as `scan` makes them
options = ScanOptions(target=sys.argv[1], host="none", follow_links=sys.argv[2] == "1", cache=True)
first = build(run_scan(options, rules=rules))  # the scan that the verification follows
def faults():  # this process's major page faults and those of the workers it has waited for
    return sum(resource.getrusage(who).ru_majflt for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
spent, disk = [], []
for _ in range(int(sys.argv[3])):
    before = faults()
    clock = time.perf_counter()
    result = run_scan(options, rules=rules)
    spent.append(time.perf_counter() - clock)
    disk.append(faults() - before)
print(json.dumps({"seconds": spent, "faults": disk, "same": build(result) == first}))
"""


PTX_STAGE = """
import hashlib, json, sys, time
from cuda4amd.rules import load_rules
from cuda4amd.scan.pipeline import ScanOptions, run_scan
from cuda4amd.scan.read.ptx.stage import PtxStage
seen, spent = {}, [0.0, 0, 0]  # CPU seconds, texts, bytes given
check, check_text = PtxStage.check, PtxStage.check_text
def timed_check(self, buf, offsets):
    clock = time.process_time()
    try:
        return check(self, buf, offsets)
    finally:
        spent[0] += time.process_time() - clock
def counted_text(self, text):
    seen.setdefault(hashlib.sha256(text).digest(), len(text))
    spent[1] += 1
    spent[2] += len(text)
    return check_text(self, text)
PtxStage.check, PtxStage.check_text = timed_check, counted_text
run_scan(ScanOptions(target=sys.argv[1], host="none", follow_links=sys.argv[2] == "1", jobs=1), rules=load_rules())
print(json.dumps({"seconds": spent[0], "texts": spent[1], "bytes": spent[2], "distinct": len(seen),
                  "distinct_bytes": sum(seen.values())}))
"""


def ptx_stage(tree: Path, env: dict[str, str], follow_links: bool) -> dict | None:
    """The PTX stage of one `--no-cache --jobs 1` scan, in one process (PTX_STAGE): its CPU seconds
    (decompression and the texts' sha256 included) and the PTX text it was given; None when the scan
    fails."""
    done = subprocess.run([sys.executable, "-c", PTX_STAGE, str(tree), "1" if follow_links else "0"],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def ptx_row(state: dict | None) -> str:
    if state is None:
        return "| PTX stage | not measured: the scan failed | | | | | | |"
    if not state["bytes"] or state["seconds"] <= 0:
        return "| PTX stage: no PTX in the tree | | | | | | | |"
    distinct = state["distinct_bytes"] / 1e6 / state["seconds"]
    given = state["bytes"] / 1e6 / state["seconds"]
    return (f"| PTX stage, one process, `--no-cache --jobs 1`: {state['distinct']} distinct texts, "
            f"{state['distinct_bytes'] / 1e6:.1f} MB ({state['texts']} texts, {state['bytes'] / 1e6:.1f} MB given), "
            f"{state['seconds']:.2f} s CPU: MB/s per core, distinct (given) | 1 | | {distinct:.0f} ({given:.0f}) | "
            f"| ≥ {GOAL_PTX_MB_S:.0f} | {met(distinct >= GOAL_PTX_MB_S)} | |")


def rescan_in_process(tree: Path, env: dict[str, str], follow_links: bool, times: int) -> tuple[Runs, bool]:
    """(the re-scans' seconds, whether the last one's report equals the scan's before them)."""
    done = subprocess.run([sys.executable, "-c", IN_PROCESS_RESCAN, str(tree), "1" if follow_links else "0",
                           str(times)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the in-process re-scan failed ({done.returncode}):\n{done.stderr[-2000:]}")
    state = json.loads(done.stdout)
    return Runs(wall=state["seconds"], faults=state["faults"]), state["same"]


def readers(tree: Path, env: dict[str, str], follow_links: bool) -> dict | None:
    """The two readers alone (import tables, symbols; no kernels, by-name strings, discovery or
    analysis, which do not depend on --engine): seconds over every binary of the tree, one process."""
    try:
        done = subprocess.run([sys.executable, "-c", READERS, str(tree), "1" if follow_links else "0"],
                              capture_output=True, text=True, env=env, timeout=READERS_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        return None
    return json.loads(done.stdout)


BYTECODE = """
import importlib.util, os, pathlib, sys, cuda4amd
package = pathlib.Path(cuda4amd.__file__).parent
sources = sorted(package.rglob("*.py"))
def fresh(source):
    compiled = pathlib.Path(importlib.util.cache_from_source(str(source)))
    return compiled.exists() and compiled.stat().st_mtime >= source.stat().st_mtime
print(json.dumps({"package": str(package), "modules": len(sources), "compiled": sum(map(fresh, sources)),
                  "writes": not sys.flags.dont_write_bytecode}))
"""


def bytecode(env: dict[str, str]) -> str:
    """Whether the cuda4amd the runs import has its modules' bytecode. Without it, where Python may not
    write it (PYTHONDONTWRITEBYTECODE, set on the device machine; a read-only install), every run compiles
    the sources again: 0.25 s of each scan there. pip compiles them when it installs the package."""
    done = subprocess.run([sys.executable, "-c", "import json" + BYTECODE], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return f"bytecode: not checked ({done.stderr.strip().splitlines()[-1:]})"
    state = json.loads(done.stdout)
    line = f"bytecode: {state['compiled']} of {state['modules']} modules of {state['package']} compiled"
    if state["compiled"] < state["modules"] and not state["writes"]:
        line += (" and Python may not write the rest (PYTHONDONTWRITEBYTECODE): every run compiles them, "
                 "unlike an installed package (`python -m compileall` the package first)")
    return line


def startup(env: dict[str, str], runs: int = 7) -> str:
    """The interpreter's own start-up, which every fresh-process figure holds: `python -c pass` with
    and without its site (`-S`). The site's .pth files run code at every start (an editable install's
    finder, a venv's redirectors, a sandbox's certificate hook): 27 ms of every scan on the development
    machine's global Python against 2-3 ms in a fresh venv (docs/performance.md, 2026-12-03)."""
    def median_ms(*flags: str) -> float:
        times = []
        for _ in range(runs):
            clock = time.perf_counter()
            subprocess.run([sys.executable, *flags, "-c", "pass"], env=env, check=False)
            times.append(time.perf_counter() - clock)
        return 1000 * statistics.median(times)

    with_site, bare = median_ms(), median_ms("-S")
    return (f"interpreter start-up: {with_site:.0f} ms (`python -c pass`, median of {runs}); "
            f"{bare:.0f} ms without its site (`-S`): the site's .pth files and imports {with_site - bare:.0f} ms")


def measure(tree: Path, runs: int, lief_runs: int, cold_runs: int, follow_links: bool = False) -> None:
    command = scans(tree, follow_links)
    cache_dir = Path(tempfile.mkdtemp(prefix="cuda4amd-bench-facts-"))
    env = {**os.environ, "CUDA4AMD_FACTS_CACHE": str(cache_dir)}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

    reference = run(command("--jobs", "1", "--no-cache"), env, 1)  # also warms the page cache
    expected = reference.outputs[0]
    report = json.loads(expected)
    # the floor in the same rounds as the scans it is compared with
    parallel, serial, floor = interleaved([command("--no-cache"), command("--jobs", "1", "--no-cache"),
                                           floor_command(tree, follow_links)], env, runs)
    # as many workers as the fast runs (lief's default is one process: it holds whole files)
    lief = run(command("--no-cache", "--engine", "lief", "--jobs", str(cores)), env, lief_runs)
    run(command(), env, 1)  # fills the facts cache
    rescan = run(command(), env, runs)
    verify_rescan, verify_same = rescan_in_process(tree, env, follow_links, runs)
    peak = memory(command("--no-cache"), env)
    alone = readers(tree, env, follow_links) if lief_runs else None
    ptx = ptx_stage(tree, env, follow_links)
    cold_runs_done, cold_why = cold(command("--no-cache"), env, cold_runs)

    def comparable(text: str, *fields: str) -> dict:
        document = json.loads(text)
        for name in ("command", *fields):  # the command line as typed differs between the runs by design
            document.pop(name, None)
        return document

    reference_document = comparable(expected)
    same = verify_same and all(comparable(out) == reference_document for r in (parallel, serial, rescan, cold_runs_done)
                               for out in r.outputs)
    # the report names the reader it used
    lief_same = all(comparable(out, "engine") == comparable(expected, "engine") for out in lief.outputs)
    warm_goal = GOAL_WARM_16_CORES if cores >= 16 else GOAL_WARM_2_CORES

    print(f"tree: {tree}")
    print(f"{tree_facts(tree, report, follow_links)}")
    print(f"machine: {platform.machine()}, {cores} usable cores, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(bytecode(env))
    print(startup(env))
    print()
    print("| measurement | runs | min | median | max | goal | met | disk reads |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print(f"| full scan, warm, `--no-cache` (jobs = {cores}) | {runs} {parallel.cells()} ≤ {warm_goal} s | "
          f"{met(parallel.median <= warm_goal)} | {parallel.disk()} |")
    print_if(warm_row(parallel, warm_goal))
    print(f"| full scan, warm, `--no-cache --jobs 1` | {runs} {serial.cells()} | | {serial.disk()} |")
    print_if(warm_row(serial, None))
    print(f"| floor: walk + magic + import names, one process (tools/bench.py FLOOR) | {runs} {floor.cells()} | | "
          f"{floor.disk()} |")
    print(f"| full scan ÷ floor (medians): jobs = {cores}, jobs 1 | | | {parallel.median / floor.median:.2f}x, "
          f"{serial.median / floor.median:.2f}x | | ≤ {GOAL_FLOOR_RATIO:.0f}x | "
          f"{met(parallel.median <= GOAL_FLOOR_RATIO * floor.median)} | |")
    if lief.wall:
        ratio = lief.median / parallel.median
        print(f"| full scan, warm, `--no-cache --engine lief --jobs {cores}` | {lief_runs} {lief.cells()} | | "
              f"{lief.disk()} |")
        print(f"| lief ÷ fast (medians, same run) | | | {ratio:.1f}x | | ≥ {GOAL_LIEF_RATIO:.0f}x | "
              f"{met(ratio >= GOAL_LIEF_RATIO)} | |")
    if alone is not None and alone["fast"] > 0:
        print(f"| the readers alone, one process, {alone['files']} binaries: fast {alone['fast']:.3f} s, "
              f"lief {alone['lief']:.3f} s | 1 | | {alone['lief'] / alone['fast']:.1f}x | | | | |")
    print(ptx_row(ptx))
    print(f"| re-scan, unchanged tree, warm facts cache | {runs} {rescan.cells()} ≤ {GOAL_RESCAN} s | "
          f"{met(rescan.median <= GOAL_RESCAN)} | {rescan.disk()} |")
    print_if(warm_row(rescan, GOAL_RESCAN))
    print(f"| the same in one process, as `--fix` verification re-scans (`run_scan`, host not probed) | {runs} "
          f"{verify_rescan.cells()} ≤ {GOAL_RESCAN} s | {met(verify_rescan.median <= GOAL_RESCAN)} | "
          f"{verify_rescan.disk()} |")
    print_if(warm_row(verify_rescan, GOAL_RESCAN))
    if cold_runs_done.wall:
        goal = f"≤ {GOAL_COLD_16_CORES} s" if cores >= 16 else ""
        print(f"| full scan, cold page cache, `--no-cache` | {len(cold_runs_done.wall)} {cold_runs_done.cells()} "
              f"{goal} | "
              f"{met(cold_runs_done.median <= GOAL_COLD_16_CORES) if cores >= 16 else ''} | {cold_runs_done.disk()} |")
    elif cold_runs:
        print(f"| full scan, cold page cache | not measured: {cold_why} | | | | | | |")
    if peak is not None:
        print(f"| peak memory, main process (VmHWM) | 1 | | {peak['main']} MB | | ≤ {GOAL_MAIN_MB} MB | "
              f"{met(peak['main'] <= GOAL_MAIN_MB)} | |")
        print(f"| peak memory, process tree ({peak['workers']} workers), summed PSS | 1 | | {peak['tree_pss']} MB | | "
              f"≤ {GOAL_TREE_MB} MB | {met(peak['tree_pss'] <= GOAL_TREE_MB)} | |")
        print(f"| peak memory, process tree, anonymous part of PSS (mapped file pages left out) | 1 | | "
              f"{peak['tree_anon']} MB | | | | |")
        print(f"| peak memory, process tree, summed RSS (shared pages counted per process) | 1 | | "
              f"{peak['tree_rss']} MB | | | | |")
    print()
    print("disk reads: page faults that read the disk (major faults, the scan and its workers), summed over the runs "
          "that had any; a warm run has none")
    print(f"output identical to `--jobs 1 --no-cache` in every fast run: {'yes' if same else 'NO'} (the in-process "
          f"re-scans: the same report as the scan before them); lief runs: "
          f"{'identical but for the engine field' if lief_same else 'differ'}")
    print()
    shutil.rmtree(cache_dir)
    if not same:
        raise SystemExit("outputs differ between runs: the figures above do not count")


def wheel_set_tree(packages: list[str], workdir: Path) -> Path:
    from wheelcache import unpacked

    tree = workdir / "tree"
    tree.mkdir()
    for spec in packages:
        (tree / spec.split("==")[0]).symlink_to(unpacked(spec), target_is_directory=True)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="repetitions of each fast measurement (default 5)")
    parser.add_argument("--lief-runs", type=int, default=1, help="repetitions with --engine lief (default 1; 0: skip)")
    parser.add_argument("--cold", type=int, default=2, metavar="N", help="cold-page-cache runs (default 2; 0: skip)")
    parser.add_argument("--tree", type=Path, action="append", help="a folder, venv or wheel to measure (repeatable)")
    parser.add_argument("--set", choices=sorted(SETS), action="append",
                        help="acceptance wheel set(s) (default: all, when no --tree)")
    args = parser.parse_args()
    for tree in args.tree or []:
        measure(tree, args.runs, args.lief_runs, args.cold)
    if args.tree and not args.set:
        return
    for name in args.set or SETS:
        with tempfile.TemporaryDirectory(prefix="cuda4amd-bench-") as workdir:
            print(f"## {name}: {', '.join(SETS[name])}")
            print()
            # the tree's folders are links to the unpacked wheels, outside it: --follow-links walks them
            measure(wheel_set_tree(SETS[name], Path(workdir)), args.runs, args.lief_runs, args.cold, follow_links=True)


if __name__ == "__main__":
    main()
