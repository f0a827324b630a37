#!/usr/bin/env python3
"""Benchmark `cuda4amd census` (docs/performance.md, "The census"): the same tasks serially in one process and on
a Dask LocalCluster, then the census resumed.

    python tools/census_bench.py                      # the real CUDA wheels of the default folders
    python tools/census_bench.py WHEEL_OR_FOLDER... --workers 2 --zluda-release v6
    python tools/census_bench.py --log benchmarks/census-2026-12-06.json   # the figures as JSON too
    python tools/census_bench.py --ab                 # + the census's Dask settings against Dask's defaults

What is timed, each in this process, through the library calls the command makes (cuda4amd.cli.census):

  * plan: specs → artifacts, each file hashed (sha256);
  * serial: run_census(..., serial=True) + the outputs (matrix, page): every task in this process;
  * cluster: the same tasks, a fresh census folder, on a LocalCluster of --workers processes (its start and
    close included), + the outputs;
  * resumed: plan + run_census + outputs again on the cluster's folder, where every report exists.

What the speed-up is made of, so that a run on shared cores can be read:

  * task-time ratio: the sum of the cluster's task seconds (each measured inside its worker) over the serial
    ones', wall and CPU (the task thread's time.thread_time): 1.0 when running `workers` scans at once costs
    each nothing; a wall ratio above the CPU ratio is time the workers waited for a core;
  * Dask's own cost per task: (workers * cluster wall - the sum of the cluster's task seconds) / tasks: the
    cluster's start and close, the scheduling, the results' trips and the workers idle at the end;
  * overhead per task beyond the scan: (workers * cluster wall - the sum of the serial task seconds) / tasks:
    both of the above (per artifact: times the releases);
  * the speed-up projected for free cores: the serial task CPU seconds over (the cluster's task CPU seconds /
    workers + the cluster wall not spent in tasks, cluster wall - task seconds / workers): what the speed-up
    would be if no task had waited for a core, Dask's start, scheduling and tail kept as measured (an estimate:
    the lead's idle-core run is the measurement);
  * what other processes took: the machine's busy CPU seconds (/proc/stat) during a run less the census's own
    (this process and the workers' tasks), beside all the cores' seconds of that run;
  * the machine's own scaling: a pure-Python loop alone and `workers` copies at once in processes, before and
    after the runs (1.0: the cores were free; 2.0 on 2 workers: another load took one core).

--ab: the same tasks twice more, each on a LocalCluster started beforehand (its start not timed): Dask's default
settings first ("ab defaults"), then the census's (cuda4amd.census.run.QUIET, "ab quiet"); on shared cores,
repeat the bench to see the spread.

Memory: each worker's bound (run_census's default, cuda4amd.census.run.worker_memory) and the largest worker's
peak RSS (getrusage of the reaped children), beside the serial process's own peak.
The cluster's start (a LocalCluster started and closed once, alone) is reported apart. Every cluster report is
compared byte for byte with the serial one. Only wheels with a CUDA binary (the serial report's
summary.cuda_binaries > 0) count as "real CUDA wheels".
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import re
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cuda4amd.census.outputs import census_matrix, write_outputs
from cuda4amd.census.plan import plan
from cuda4amd.census.run import QUIET, local_cluster, run_census, tasks_of, usable_cores, worker_memory
from cuda4amd.census.task import rules_version
from cuda4amd.rules import load_rules

#: where this project's machines keep real CUDA wheels: the acceptance tests' cache and a local PyPI mirror
DEFAULT_FOLDERS = (Path.home() / ".cache/cuda4amd/wheels", Path("/opt/pypi-more/files"))
#: wheel names of CUDA-carrying projects in those folders (the rest are filtered out before the plan)
CUDA_NAMES = re.compile(r"^(nvidia_|cupy_cuda|jax_cuda|ctranslate2-|torch-|torchvision-)", re.IGNORECASE)


def default_wheels() -> list[str]:
    return sorted(str(p) for folder in DEFAULT_FOLDERS if folder.is_dir() for p in folder.glob("*.whl")
                  if CUDA_NAMES.match(p.name))


def _reports(outdir: Path) -> dict[str, bytes]:
    return {p.relative_to(outdir).as_posix(): p.read_bytes() for p in sorted((outdir / "reports").rglob("*.json"))}


def machine_busy() -> float:
    """CPU seconds every core of the machine has spent busy (/proc/stat: all but idle and iowait); 0 elsewhere."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _census(specs: list[str], releases: list[str], out: Path, **kwargs: Any) -> dict[str, Any]:
    busy, own = machine_busy(), time.process_time()
    start = time.perf_counter()
    planned = plan(specs)
    planned_at = time.perf_counter()
    tasks = tasks_of(planned.artifacts, releases, rules_version())
    outcome = run_census(tasks, out, **kwargs)
    ran_at = time.perf_counter()
    # the machine's busy CPU seconds during the plan and the run less this census's: this process's (the serial
    # tasks, or the client and the LocalCluster's scheduler and nannies) and the workers' tasks; what is left is
    # other processes' (and the workers' own threads and start, about a second)
    workers = 0.0 if kwargs.get("serial") else sum(outcome.task_cpu_seconds.values())
    others = machine_busy() - busy - (time.process_time() - own) - workers
    write_outputs(census_matrix(tasks, out, planned.problems), tasks, out)
    end = time.perf_counter()
    return {"plan_s": planned_at - start, "run_s": ran_at - planned_at, "outputs_s": end - ran_at,
            "total_s": end - start, "tasks": len(tasks), "scanned": outcome.scanned, "skipped": outcome.skipped,
            "failed": outcome.failed, "task_seconds": sum(outcome.task_seconds.values()),
            "task_cpu_seconds": sum(outcome.task_cpu_seconds.values()),
            "other_processes_cpu_s": max(0.0, others), "machine_cpu_s": (ran_at - start) * usable_cores(),
            "artifacts": [{"name": a.name, "bytes": a.size} for a in planned.artifacts]}


def _cluster_start(workers: int) -> float:
    from distributed import Client

    start = time.perf_counter()
    with local_cluster(workers, worker_memory(workers)) as cluster, Client(cluster):
        pass
    return time.perf_counter() - start


#: iterations of the calibration loop (about a second of one core)
SPIN = 10_000_000


def _spin(_: int = 0) -> float:
    start = time.perf_counter()
    total = 0
    for i in range(SPIN):
        total += i
    return time.perf_counter() - start


def machine_scaling(workers: int) -> float:
    """The mean time of `workers` copies of a pure-Python loop run at once, in processes, over its time alone."""
    alone = _spin()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(_spin, range(workers))  # the processes started (and imported) before the timed round
        together = pool.map(_spin, range(workers))
    return sum(together) / len(together) / alone


def _ab(specs: list[str], releases: list[str], root: Path, workers: int) -> dict[str, Any]:
    """The census on a LocalCluster with Dask's default settings, then with the census's (QUIET)."""
    from distributed import Client

    runs = {}
    for name, settings in (("ab defaults", {}), ("ab quiet", QUIET)):
        # Dask's nanny writes its pre-spawn environment into this process's (distributed.nanny.WorkerProcess):
        # put it back, or the next cluster's workers would inherit MALLOC_TRIM_THRESHOLD_
        saved = dict(os.environ)
        try:
            with local_cluster(workers, worker_memory(workers), settings) as cluster, Client(cluster):
                address = cluster.scheduler_address
                runs[name] = _census(specs, releases, root / name.replace(" ", "-"), scheduler=address)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("specs", nargs="*", help="wheels or folders (default: the CUDA wheels of DEFAULT_FOLDERS)")
    parser.add_argument("--workers", type=int, default=usable_cores())
    parser.add_argument("--zluda-release", action="append", dest="releases",
                        help="repeatable (default: every shipped release, as the command)")
    parser.add_argument("--log", type=Path, help="write the figures as JSON here (benchmarks/ holds raw logs)")
    parser.add_argument("--ab", action="store_true", help="also run the cluster with Dask's default settings")
    args = parser.parse_args()
    specs = args.specs or default_wheels()
    releases = args.releases or list(load_rules().release_tags)
    scaling_before = machine_scaling(args.workers)
    with tempfile.TemporaryDirectory(prefix="census-bench-") as folder:
        root = Path(folder)
        serial = _census(specs, releases, root / "serial", serial=True)
        serial_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
        cluster = _census(specs, releases, root / "dask", workers=args.workers)
        # the workers are this process's reaped children once the cluster closed (the calibration's pool too,
        # whose processes stay small)
        worker_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        resumed = _census(specs, releases, root / "dask", workers=args.workers)
        equal = _reports(root / "serial") == _reports(root / "dask")
        cuda = sum(1 for p in (root / "serial" / "reports").rglob(f"*.{releases[0]}.*.json")
                   if json.loads(p.read_text()).get("summary", {}).get("cuda_binaries", 0) > 0)
        ab = _ab(specs, releases, root, args.workers) if args.ab else {}
    start_s = _cluster_start(args.workers)
    scaling_after = machine_scaling(args.workers)
    from distributed.system import MEMORY_LIMIT

    n = serial["tasks"]
    total_bytes = sum(a["bytes"] for a in serial["artifacts"])
    figures = {
        "machine": f"{platform.node()} {usable_cores()} usable cores, load {os.getloadavg()[0]:.2f}",
        "python": sys.version.split()[0], "workers": args.workers, "releases": releases,
        "wheels": len(serial["artifacts"]), "cuda_wheels": cuda, "bytes": total_bytes, "tasks": n,
        "serial": serial, "cluster": cluster, "resumed": resumed, "reports_equal": equal, **ab,
        "speedup": serial["run_s"] / cluster["run_s"],
        "speedup_total": serial["total_s"] / cluster["total_s"],
        "overhead_per_task_s": (args.workers * cluster["run_s"] - serial["task_seconds"]) / n,
        "overhead_per_artifact_s": (args.workers * cluster["run_s"] - serial["task_seconds"]) / n * len(releases),
        "dask_cost_per_task_s": (args.workers * cluster["run_s"] - cluster["task_seconds"]) / n,
        "task_time_ratio": cluster["task_seconds"] / serial["task_seconds"],
        "task_cpu_ratio": cluster["task_cpu_seconds"] / serial["task_cpu_seconds"],
        "speedup_projected_free_cores": serial["task_cpu_seconds"] / (
            cluster["task_cpu_seconds"] / args.workers + cluster["run_s"] - cluster["task_seconds"] / args.workers),
        "machine_scaling": [scaling_before, scaling_after],
        "worker_memory_limit_bytes": int(float(worker_memory(args.workers)) * MEMORY_LIMIT),
        "worker_peak_rss_bytes": worker_peak, "serial_peak_rss_bytes": serial_peak,
        "serial_loop_overhead_per_task_s": (serial["run_s"] - serial["task_seconds"]) / n,
        "cluster_start_s": start_s,
        "resumed_share": resumed["total_s"] / cluster["total_s"],
        "scan_rate_mb_s_per_worker": total_bytes * len(releases) / serial["task_seconds"] / 1e6,
        # per CPU second: the rate of a core the scan has to itself
        "scan_rate_mb_per_cpu_s": total_bytes * len(releases) / serial["task_cpu_seconds"] / 1e6,
    }
    if args.log:
        args.log.parent.mkdir(parents=True, exist_ok=True)
        args.log.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"{figures['wheels']} wheels ({cuda} with CUDA binaries), {total_bytes / 1e9:.2f} GB, "
          f"{len(releases)} releases = {n} tasks; {args.workers} workers; {figures['machine']}")
    print("| run | plan s | run s | outputs s | total s |\n|---|---|---|---|---|")
    for name in ("serial", "cluster", "resumed", *ab):
        r = figures[name]
        print(f"| {name} | {r['plan_s']:.2f} | {r['run_s']:.2f} | {r['outputs_s']:.2f} | {r['total_s']:.2f} |")
    print(f"speed-up (run) {figures['speedup']:.2f}x, (total) {figures['speedup_total']:.2f}x; overhead per task "
          f"beyond the scan {figures['overhead_per_task_s']:.3f} s (cluster start alone {start_s:.2f} s); "
          f"serial loop overhead {figures['serial_loop_overhead_per_task_s']:.4f} s/task; resumed "
          f"{100 * figures['resumed_share']:.1f} % of the cluster run; scan rate "
          f"{figures['scan_rate_mb_s_per_worker']:.0f} MB/s per worker ({figures['scan_rate_mb_per_cpu_s']:.0f} MB per "
          f"CPU second); reports equal: {equal}")
    print(f"task-time ratio (cluster / serial) {figures['task_time_ratio']:.2f} wall, {figures['task_cpu_ratio']:.2f} "
          f"CPU; Dask's own cost {figures['dask_cost_per_task_s']:.3f} s/task; overhead per artifact "
          f"{figures['overhead_per_artifact_s']:.3f} s ({len(releases)} releases); speed-up projected for free "
          f"cores {figures['speedup_projected_free_cores']:.2f}x; other processes took "
          f"{serial['other_processes_cpu_s']:.0f} of {serial['machine_cpu_s']:.0f} CPU s during the serial run, "
          f"{cluster['other_processes_cpu_s']:.0f} of {cluster['machine_cpu_s']:.0f} during the cluster's; machine scaling "
          f"{scaling_before:.2f} before, {scaling_after:.2f} after (1.00: free cores)")
    print(f"memory: each worker bounded to {figures['worker_memory_limit_bytes'] / 2**30:.1f} GiB, the largest "
          f"worker's peak RSS {worker_peak / 2**30:.2f} GiB (the serial process's {serial_peak / 2**30:.2f} GiB)")
    for name, r in ab.items():
        print(f"{name}: run {r['run_s']:.2f} s, task seconds {r['task_seconds']:.1f} wall, {r['task_cpu_seconds']:.1f} "
              f"CPU (serial {serial['task_seconds']:.1f} wall, {serial['task_cpu_seconds']:.1f} CPU)")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
