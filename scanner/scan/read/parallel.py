"""The read stage over every core: binaries read in worker processes.

    binaries, errors = read_binaries(target_path, found, engine, inspector=..., jobs=4, cache=...)

Workers receive what to read (a path on disk, or the name of a member of the
target archive), never bytes: each maps or unpacks the file itself, so no
file's contents cross a process boundary and memory stays flat. Large files
are handed out first, so the longest reads start early and the last worker
to finish is not stuck with the biggest file. Results are put back in the
order of ``found`` whatever order the workers finish in, so the output is
the same as a one-process run (``jobs=1``, which never starts a worker).
Results come back pickled, as each model class pickles itself: its class
and field values, rebuilt by one call of its __init__ (cuda4amd.model), so
the tens of thousands of objects of a big tree unpickle cheaply here.

A forked worker inherits the inspector (rules and release); a worker that
starts a fresh interpreter gets it pickled once here, with a pickler that
also carries read-only mappings (``MappingProxyType``), and unpickles it
once: these bytes go from this process to its own children only.
"""
from __future__ import annotations

import io
import os
import pickle
import shutil
import tempfile
import zipfile
from contextlib import contextmanager, nullcontext
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from cuda4amd.model import FileError, ReadOutcome, ScannedBinary
from cuda4amd.scan.discover import ARCHIVE_ERRORS, FoundBinary
from cuda4amd.scan.read.engine import MalformedBinary, mapped, read_buffer
from cuda4amd.scan.workers import process_context, usable_cores

if TYPE_CHECKING:
    import mmap
    from concurrent.futures import Future, ProcessPoolExecutor

    from cuda4amd.scan.read.cache import FactCache
    from cuda4amd.scan.read.payload import PayloadInspector

# Archive members up to this size are read from memory; larger ones are
# spooled to a temporary file so memory stays flat whatever the member's size.
IN_MEMORY_MEMBER_LIMIT = 64 * 1024 * 1024

# With jobs=None (one worker per usable core), smaller reads stay in this
# process: starting workers costs more than it saves below these.
AUTO_PARALLEL_FILES = 8
AUTO_PARALLEL_BYTES = 32 * 1024 * 1024

# Tasks in flight per worker: enough to keep each busy, few enough that the
# results waiting to be collected stay small.
TASKS_PER_WORKER = 4
# One task: files up to this many bytes or this many files (a big file goes alone).
BATCH_BYTES = 4 * 1024 * 1024
BATCH_FILES = 16


def read_item(
    item: FoundBinary,
    engine: str,
    inspector: PayloadInspector | None,
    archive: zipfile.ZipFile | None,
) -> ReadOutcome:
    """Read one binary and, with an inspector, its kernels and by-name loads."""
    errors: list[FileError] = []
    try:
        with _buffer(archive, item) as (buf, path):
            # export names: no later stage uses them (see model.BinaryInfo)
            info = read_buffer(buf, engine, path if engine == "lief" else None, exports=False)
            binary = ScannedBinary(item.path, info, item.size)
            if inspector is not None:
                payload = inspector.inspect(item.path, buf, info)
                binary.kernels, binary.by_name = payload.kernels, payload.by_name
                binary.driver_names, binary.calls_cuda = payload.driver_names, payload.calls_cuda
                errors.extend(payload.errors)
    except MalformedBinary as exc:
        return ReadOutcome(None, (FileError(item.path, "read", str(exc)),))
    except FileNotFoundError:
        return ReadOutcome(None, (FileError(item.path, "read", "vanished during the scan"),))
    except OSError as exc:
        return ReadOutcome(None, (FileError(item.path, "read", exc.strerror or str(exc)),))
    except ARCHIVE_ERRORS as exc:  # after OSError above: a corrupt member
        return ReadOutcome(None, (FileError(item.path, "read", f"cannot read archive member: {exc}"),))
    return ReadOutcome(binary, tuple(errors))


@contextmanager
def _buffer(archive: zipfile.ZipFile | None, item: FoundBinary) -> Iterator[tuple[bytes | mmap.mmap, str | None]]:
    """(buffer, path on disk) of a binary: a file's map, or an archive member's bytes.

    Members up to IN_MEMORY_MEMBER_LIMIT are read into memory; larger ones are
    spooled to a temporary file and mapped, so memory stays flat.
    """
    if item.member is None or archive is None:
        assert item.disk_path is not None  # discovery gives every file outside an archive its path
        with mapped(item.disk_path) as buf:
            yield buf, item.disk_path
        return
    if item.size <= IN_MEMORY_MEMBER_LIMIT:
        yield archive.read(item.member), None
        return
    handle, spool = tempfile.mkstemp(prefix="cuda4amd-", suffix=".bin")
    try:
        with os.fdopen(handle, "wb") as out, archive.open(item.member) as member:
            shutil.copyfileobj(member, out, 1024 * 1024)
        with mapped(spool) as buf:
            yield buf, spool
    finally:
        os.unlink(spool)


def read_binaries(
    archive_path: str | None,
    found: Sequence[FoundBinary],
    engine: str,
    advance: Callable[[], None] = lambda: None,
    inspector: PayloadInspector | None = None,
    jobs: int | None = 1,
    cache: FactCache | None = None,
    meanwhile: Callable[[], object] | None = None,
    pool: ReadPool | None = None,
) -> tuple[list[ScannedBinary], list[FileError]]:
    """Read ``found`` (members of ``archive_path`` when given); results in ``found``'s order.

    ``jobs``: worker processes (1: read here, no worker; None: one per usable
    core, for reads big enough to gain from it, and with the fast engine). ``cache``: facts of files
    read before, looked up first and filled with what is read now. ``meanwhile``:
    called once while the workers read, if any do (this process would only wait).
    ``pool``: workers started for this read already (a scan's walk may have used them).
    """
    outcomes: list[ReadOutcome | None] = [None] * len(found)
    keys: list[str | None] = [None] * len(found)
    if cache is not None:
        keys = [cache.key(item, archive_path) for item in found]
        outcomes = cache.get_all(keys, found, inspector)  # one lookup for every file
        for _ in range(sum(hit is not None for hit in outcomes)):
            advance()
    pending = [index for index, outcome in enumerate(outcomes) if outcome is None]

    workers = _worker_count(jobs, [found[i] for i in pending], engine)
    if workers > 1:
        # imported here: a scan that reads in one process (or from the cache) does not pay for them
        from concurrent.futures.process import BrokenProcessPool

        try:
            for index, outcome in _read_in_workers(archive_path, found, pending, engine, inspector, workers,
                                                   meanwhile, pool):
                outcomes[index] = _stored(outcome, cache, keys[index], found[index], archive_path, inspector)
                advance()
        except BrokenProcessPool:
            pass  # a worker died (killed for memory, say): what it had not finished is read here
        pending = [i for i in pending if outcomes[i] is None]
    if pending:
        archive = zipfile.ZipFile(archive_path) if archive_path is not None else None
        try:
            for index in pending:
                outcome = read_item(found[index], engine, inspector, archive)
                outcomes[index] = _stored(outcome, cache, keys[index], found[index], archive_path, inspector)
                advance()
        finally:
            if archive is not None:
                archive.close()
    if cache is not None:
        cache.commit()

    binaries: list[ScannedBinary] = []
    errors: list[FileError] = []
    for done in outcomes:
        assert done is not None
        errors.extend(done.errors)
        if done.binary is not None:
            binaries.append(done.binary)
    return binaries, errors


def _stored(outcome: ReadOutcome, cache: FactCache | None, key: str | None, item: FoundBinary,
            archive_path: str | None, inspector: PayloadInspector | None) -> ReadOutcome:
    """``outcome``, recorded in the cache when the file did not change while it was read."""
    if cache is not None and key is not None and outcome.binary is not None:
        if cache.key(item, archive_path) == key:
            cache.put(key, outcome, item, inspector)
    return outcome


def _worker_count(jobs: int | None, pending: Sequence[FoundBinary], engine: str) -> int:
    if jobs is None:
        if len(pending) < AUTO_PARALLEL_FILES or sum(i.size for i in pending) < AUTO_PARALLEL_BYTES:
            return 1
        if engine == "lief":
            return 1  # lief holds each whole file (about twice its size): only an explicit --jobs multiplies that
        jobs = usable_cores()
    return max(1, min(jobs, len(pending)))


class ReadPool:
    """Worker processes set up for reading (engine, rules, archive), started on
    first use: a scan's walk and its read stage share them, so the workers are
    forked, and shut down, once."""

    def __init__(self, archive_path: str | None, engine: str, inspector: PayloadInspector | None,
                 workers: int) -> None:
        self.archive_path, self.engine, self.inspector, self.workers = archive_path, engine, inspector, workers
        self._executor: ProcessPoolExecutor | None = None

    def executor(self) -> ProcessPoolExecutor:
        if self._executor is None:
            from concurrent.futures import ProcessPoolExecutor

            context = _context()
            # a forked worker inherits the inspector as it is; a fresh interpreter gets it pickled
            setup = self.inspector if context.get_start_method() == "fork" else _dumps(self.inspector)
            self._executor = ProcessPoolExecutor(self.workers, mp_context=context, initializer=_worker_start,
                                                 initargs=(self.archive_path, self.engine, setup))
        return self._executor

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

    def __enter__(self) -> ReadPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_in_workers(
    archive_path: str | None,
    found: Sequence[FoundBinary],
    pending: Sequence[int],
    engine: str,
    inspector: PayloadInspector | None,
    workers: int,
    meanwhile: Callable[[], object] | None = None,
    shared: ReadPool | None = None,
) -> Iterator[tuple[int, ReadOutcome]]:
    """(index, outcome) pairs as workers finish them, the largest files handed out first."""
    from concurrent.futures import FIRST_COMPLETED, wait

    batches = iter(_batches(sorted(pending, key=lambda i: (-found[i].size, i)), found))
    # a shared pool stays open for whoever shares it; one of our own is shut down here
    with nullcontext(shared) if shared is not None else ReadPool(archive_path, engine, inspector, workers) as pool:
        executor = pool.executor()
        window = pool.workers * TASKS_PER_WORKER
        running: dict[Future[list[ReadOutcome]], list[int]] = {}

        def submit() -> bool:
            batch = next(batches, None)
            if batch is not None:
                running[executor.submit(_worker_read, [found[i] for i in batch])] = batch
            return batch is not None

        for _ in range(window):
            submit()
        if meanwhile is not None:
            # everything is handed out first: while this process is busy it hands out
            # nothing, and the workers would run dry (the results wait, pickled, in the pipe)
            while submit():
                pass
            meanwhile()
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                batch = running.pop(future)
                yield from zip(batch, future.result())
                submit()


def _batches(order: Sequence[int], found: Sequence[FoundBinary]) -> Iterator[list[int]]:
    """``order`` cut into tasks: a big file alone, small ones together (each task costs a round trip)."""
    batch: list[int] = []
    size = 0
    for index in order:
        batch.append(index)
        size += found[index].size
        if size >= BATCH_BYTES or len(batch) >= BATCH_FILES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _context():
    """fork where it is safe and cheap; else a fork server that imports the readers once (each
    worker forks from it with them loaded); else a fresh interpreter."""
    return process_context(("cuda4amd.scan.read.parallel", "cuda4amd.scan.read.payload"))


class _SetupPickler(pickle.Pickler):
    """Pickles read-only mappings (the rules hold some) as plain dicts."""

    def reducer_override(self, obj):
        if isinstance(obj, MappingProxyType):
            return read_only, (dict(obj),)
        return NotImplemented


def read_only(mapping: dict) -> MappingProxyType:
    """A read-only view of ``mapping`` (how _SetupPickler's output rebuilds one)."""
    return MappingProxyType(mapping)


def _dumps(value) -> bytes:
    out = io.BytesIO()
    _SetupPickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return out.getvalue()


# Worker processes only: what _worker_start unpacked, for _worker_read.
# The main process never sets it.
_worker_state: dict = {}


def _worker_start(archive_path: str | None, engine: str, setup) -> None:
    _worker_state["engine"] = engine
    # bytes made by our parent process (see _dumps), or the parent's own object when forked
    _worker_state["inspector"] = pickle.loads(setup) if isinstance(setup, bytes) else setup  # noqa: S301
    _worker_state["archive"] = zipfile.ZipFile(archive_path) if archive_path is not None else None


def _worker_read(items: list[FoundBinary]) -> list[ReadOutcome]:
    return [read_item(item, _worker_state["engine"], _worker_state["inspector"], _worker_state["archive"])
            for item in items]
