"""One census task: a pure function of (artifact sha256, ZLUDA release, rules version).

Its result lives at a content address under the census folder, ``reports/<sha[:2]>/<sha>.<release>.<rules>.json``:
the scan report (``cuda4amd.scan/3``), or, for an artifact the scan could not read, a failure record
(``cuda4amd.census-failure/1``) with the reason. Written atomically (a temporary file in the same folder, then
``os.replace``), so a task killed halfway leaves nothing a re-run would take for done.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda4amd import __version__

FAILURE_SCHEMA = "cuda4amd.census-failure/1"
REPORTS = "reports"
#: hex digits of the rules digest kept in a report's name (64 bits: no two rule sets of one project collide)
RULES_DIGITS = 16


@dataclass(frozen=True)
class Task:
    """What a report is a function of; `path` only says where this machine (or the workers) find the bytes."""

    sha256: str
    release: str
    rules_version: str
    path: str
    size: int

    @property
    def key(self) -> str:
        """The task's name on the Dask scheduler: the same work, the same name."""
        return f"census-{self.sha256}-{self.release}-{self.rules_version}"

    def relative(self) -> str:
        """The report's place under the census folder (POSIX form: also the page's link)."""
        return f"{REPORTS}/{self.sha256[:2]}/{self.sha256}.{self.release}.{self.rules_version}.json"


def rules_version(rule_dirs: tuple[Path, ...] = ()) -> str:
    """The digest of what judges: cuda4amd's version and the bytes of every rule file (shipped and `rule_dirs`).
    A change to either is a new rules version, and every report is made again."""
    import cuda4amd.ruledata  # the shipped rules folder as a package (pyproject: cuda4amd.ruledata = "rules")

    digest = hashlib.sha256(f"cuda4amd {__version__}\0".encode())
    for folder in (Path(cuda4amd.ruledata.__file__).parent, *rule_dirs):
        for path in sorted(folder.rglob("*.toml")):
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:RULES_DIGITS]


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".part")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def failure(task: Task, reason: str) -> dict[str, Any]:
    return {"schema": FAILURE_SCHEMA, "artifact": Path(task.path).name, "sha256": task.sha256,
            "zluda": {"release": task.release}, "rules_version": task.rules_version, "reason": reason}


def report_of(task: Task) -> dict[str, Any]:
    """The scan report of the artifact (the library call `cuda4amd scan ARTIFACT --host none` makes), its target
    named by the file's name only: the report is the content's, not this machine's folder's."""
    from cuda4amd.report.document import build
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    # jobs=1: the cluster runs one task per core already; cache off: the census folder is the cache
    result = run_scan(ScanOptions(target=task.path, zluda_release=task.release, host="none", jobs=1, cache=False))
    document = build(result)
    document["target"]["path"] = Path(task.path).name
    return document


def scan_task(task: Task, outdir: str) -> dict[str, Any]:
    """Run one task and write its result; returns {"relative", "failed", "seconds", "cpu_seconds"} (cpu: this
    thread's, so a Dask worker's own threads are not counted). Any exception of the scan is the artifact's failure,
    recorded with its reason: one broken wheel never stops a census."""
    import time

    start, cpu = time.perf_counter(), time.thread_time()
    try:
        document, failed = report_of(task), False
    except Exception as exc:  # the reason goes into the census: a broken artifact is a row, not a crash
        # named by the file's name, as the report's target is: the record is the content's, not this folder's
        reason = f"{type(exc).__name__}: {exc}".replace(task.path, Path(task.path).name)
        document, failed = failure(task, reason), True
    write_atomic(Path(outdir) / task.relative(), json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    return {"relative": task.relative(), "failed": failed, "seconds": time.perf_counter() - start,
            "cpu_seconds": time.thread_time() - cpu}
