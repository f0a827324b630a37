"""The census's tasks on Dask distributed: a LocalCluster of one worker process per usable core, or an existing
cluster (``--scheduler tcp://HOST:8786``). Dask retries a task whose worker died (``distributed.scheduler.
allowed-failures``, 3 by default); a task that still fails is the artifact's failure row. What a report
exists for already is skipped (the census is resumable)."""
from __future__ import annotations

import os
import time
from collections.abc import Sequence
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
    #: seconds each scanned task took inside its worker (the scan and the report's write)
    task_seconds: list[float] = field(default_factory=list)


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


def run_census(tasks: list[Task], outdir: Path, *, scheduler: str | None = None, workers: int | None = None,
               serial: bool = False, memory_limit: str = "auto",
               progress: CensusProgress | None = None) -> Outcome:
    """Run what is not done yet of `tasks`, writing under `outdir`. serial: in this process, without Dask (the
    reference a cluster's census must equal); scheduler: the address of a running Dask scheduler; else a
    LocalCluster of `workers` processes (one per usable core by default), each with `memory_limit` (Dask's
    "auto": the machine's memory shared out equally; a worker past 95 % of it is restarted by its nanny)."""
    progress = progress or CensusProgress()
    start = time.perf_counter()
    outcome = Outcome(tasks=list(tasks))
    todo = [t for t in tasks if not (outdir / t.relative()).is_file()]
    outcome.skipped = len(tasks) - len(todo)
    progress.start(len(todo), sum(t.size for t in todo), outcome.skipped)
    if todo and serial:
        for task in todo:
            _count(outcome, scan_task(task, str(outdir)))
            progress.advance(task.size)
    elif todo:
        _on_dask(todo, outdir, scheduler, workers or usable_cores(), memory_limit, outcome, progress)
    progress.finish()
    outcome.seconds = time.perf_counter() - start
    return outcome


def _count(outcome: Outcome, done: dict[str, Any]) -> None:
    outcome.scanned += 1
    outcome.failed += bool(done["failed"])
    outcome.task_seconds.append(float(done["seconds"]))


def _on_dask(todo: list[Task], outdir: Path, scheduler: str | None, workers: int, memory_limit: str,
             outcome: Outcome, progress: CensusProgress) -> None:
    from distributed import Client, LocalCluster, as_completed

    if scheduler:
        client = Client(scheduler)
        cluster = None
    else:
        # processes, one thread each: a scan is CPU-bound Python, so threads of one process would share one GIL
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                               dashboard_address=None)
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
            _count(outcome, done)
            progress.advance(task.size)
            future.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
