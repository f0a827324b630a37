"""The census's tasks on Dask distributed: a LocalCluster of one worker process per usable core, or an existing
cluster (``--scheduler tcp://HOST:8786``). Dask retries a task whose worker died (``distributed.scheduler.
allowed-failures``, 3 by default); a task that still fails is the artifact's failure row. What a report
exists for already is skipped (the census is resumable)."""
from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda4amd.census.plan import Artifact
from cuda4amd.census.task import Task, failure, scan_task, write_atomic


class CensusProgress:
    """What a census tells a display; the default tells nobody."""

    def start(self, tasks: int, total_bytes: int, skipped: int) -> None: ...

    def advance(self, size: int) -> None: ...

    def finish(self) -> None: ...


@dataclass
class Outcome:
    tasks: list[Task] = field(default_factory=list)
    #: tasks whose report was there before this run
    skipped: int = 0
    scanned: int = 0
    failed: int = 0
    seconds: float = 0.0
    #: each scanned task's seconds inside its worker (the scan and the report's write), by task key
    task_seconds: dict[str, float] = field(default_factory=dict)
    #: the CPU seconds of the thread that ran each task (time.thread_time): the wall seconds less the time the
    #: thread waited, for a core or the disk; the two differ when the cores are shared
    task_cpu_seconds: dict[str, float] = field(default_factory=dict)


def usable_cores() -> int:
    """The cores this process may run on (the scheduler's affinity mask, as os.process_cpu_count in 3.13)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def tasks_of(artifacts: Sequence[Artifact], releases: Sequence[str], rules_version: str) -> list[Task]:
    """Every (artifact, release) task, largest artifact first: the longest tasks start first, so that no worker
    is left with a big one at the end while the others idle (longest-processing-time-first scheduling)."""
    ordered = sorted(artifacts, key=lambda a: (-a.size, a.sha256))
    return [Task(a.sha256, r, rules_version, a.path, a.size) for a in ordered for r in releases]


#: Dask settings of a LocalCluster census (local_cluster says why)
QUIET: dict[str, Any] = {
    # None unsets a variable of the nanny's default environment (distributed.nanny._get_env_variables)
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    # the statistical profiler feeds the dashboard, which a census does not start
    "distributed.worker.profile.enabled": False,
    # only measures how long the event loop was blocked, for a warning
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
    # the memory bound's check: a scan's memory grows over seconds, not milliseconds
    "distributed.worker.memory.monitor-interval": "500ms",
}


def worker_memory(workers: int, memory_limit: str | None = None) -> str | float:
    """Each LocalCluster worker's memory bound, as Dask's memory_limit takes it: `memory_limit` when given (bytes
    or "4GB"), else the machine's memory (its cgroup's limit where lower) shared out between the `workers`: a
    fraction <= 1, which Dask multiplies by that memory (distributed.worker_memory.parse_memory_limit). Not Dask's
    "auto", which gives each worker its threads' share of the machine's *cores*: 1/16 of the memory to each of
    `--workers 2` on 16 cores, and more than the machine has to 4 workers on 2 cores."""
    return memory_limit if memory_limit else 1 / max(1, workers)


def local_cluster(workers: int, memory_limit: str | float, settings: Mapping[str, Any] = QUIET) -> Any:
    """A LocalCluster of `workers` single-threaded worker processes, each bounded to `memory_limit`; a worker past
    95 % of it is restarted by its nanny (distributed.worker.memory.terminate), its task run again elsewhere.

    Without MALLOC_TRIM_THRESHOLD_: Dask's nanny sets it to 64 KiB in each worker's environment by default
    (distributed.nanny.pre-spawn-environ, so that freed memory goes back to the system at once), and glibc then
    keeps its mmap threshold fixed at 128 KiB (mallopt(3): setting M_TRIM_THRESHOLD turns off the dynamic
    threshold): every large buffer of a scan (an archive member, an unpacked fat binary) is a fresh mmap, paged
    in, and an munmap. Measured on a 146 MB wheel (cuSPARSE), one scan in one process: 0.52-0.63 s of CPU,
    0.66-0.93 s with the variable (docs/performance.md, "The census"). A value set in the command's own environment still wins.

    Dask's housekeeping slowed down (QUIET): its defaults (a stack sample of the running task every 10 ms, an
    event-loop tick every 20 ms, the memory checked every 100 ms) cost an idle 2-worker cluster 10 % of a core,
    spent on the cores the scans need; with QUIET 1.4 % (docs/performance.md). The workers get the scheduler's
    config (the nanny hands its own to the process it starts). `settings`: Dask config to start it with instead
    (tools/census_bench.py --ab: Dask's defaults, {})."""
    import dask
    from distributed import LocalCluster

    with dask.config.set(dict(settings)):
        # processes, one thread each: a scan is CPU-bound Python, so threads of one process would share one GIL
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                            dashboard_address=None)


def run_census(tasks: list[Task], outdir: Path, *, scheduler: str | None = None, workers: int | None = None,
               serial: bool = False, memory_limit: str | None = None,
               progress: CensusProgress | None = None) -> Outcome:
    """Run what is not done yet of `tasks`, writing under `outdir`. serial: in this process, without Dask (the
    reference a cluster's census must equal); scheduler: the address of a running Dask scheduler; else a
    LocalCluster of `workers` processes (one per usable core by default), each bounded to `memory_limit` (by
    default the machine's memory shared out between them: worker_memory)."""
    progress = progress or CensusProgress()
    start = time.perf_counter()
    outcome = Outcome(tasks=list(tasks))
    todo = [t for t in tasks if not (outdir / t.relative()).is_file()]
    outcome.skipped = len(tasks) - len(todo)
    progress.start(len(todo), sum(t.size for t in todo), outcome.skipped)
    if todo and serial:
        for task in todo:
            _count(outcome, task, scan_task(task, str(outdir)))
            progress.advance(task.size)
    elif todo:
        count = workers or usable_cores()
        _on_dask(todo, outdir, scheduler, count, worker_memory(count, memory_limit), outcome, progress)
    progress.finish()
    outcome.seconds = time.perf_counter() - start
    return outcome


def _count(outcome: Outcome, task: Task, done: dict[str, Any]) -> None:
    outcome.scanned += 1
    outcome.failed += bool(done["failed"])
    outcome.task_seconds[task.key] = float(done["seconds"])
    outcome.task_cpu_seconds[task.key] = float(done.get("cpu_seconds", 0.0))


def _on_dask(todo: list[Task], outdir: Path, scheduler: str | None, workers: int, memory_limit: str | float,
             outcome: Outcome, progress: CensusProgress) -> None:
    from distributed import Client, as_completed

    if scheduler:
        client = Client(scheduler)
        cluster = None
    else:
        cluster = local_cluster(workers, memory_limit)
        client = Client(cluster)
    try:
        # pure=False with an explicit key: the key names the work; Dask must not hash the Task's bytes for one
        futures = {client.submit(scan_task, task, str(outdir), key=task.key, pure=False): task for task in todo}
        for future in as_completed(futures):
            task = futures[future]
            try:
                done = future.result()
            except Exception as exc:  # e.g. KilledWorker: the worker died each time it ran this task (memory?)
                reason = f"{type(exc).__name__}: the task failed on the cluster: {exc}"
                import json

                write_atomic(outdir / task.relative(), json.dumps(failure(task, reason), indent=1) + "\n")
                done = {"failed": True, "seconds": 0.0}
            _count(outcome, task, done)
            progress.advance(task.size)
            future.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
