"""The read stage over every core: binaries read in worker processes.

    binaries, errors = read_binaries(target_path, found, engine, inspector=..., jobs=4, cache=...)

Workers receive what to read (a path on disk, or the name of a member of the
target archive), never bytes: each maps or unpacks the file itself with
read.item.read_item, so no file's contents cross a process boundary and
memory stays flat. The work is cut into batches, the largest files first,
and handed to a ``ProcessPoolExecutor.map``: the longest reads start early
and the last worker to finish is not stuck with the biggest file. Results
are put back in the order of ``found``, so the output is the same as a
one-process run (``jobs=1``, which never starts a worker).
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
import pickle
import zipfile
from collections.abc import Callable, Iterator, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cuda4amd.model import FileError, ReadOutcome, ScannedBinary
from cuda4amd.scan.read.item import read_item
from cuda4amd.scan.workers import process_context, usable_cores

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

    from cuda4amd.scan.discover import FoundBinary
    from cuda4amd.scan.read.cache import FactCache
    from cuda4amd.scan.read.payload import PayloadInspector

# With jobs=None (one worker per usable core), smaller reads stay in this
# process: starting workers costs more than it saves below these.
AUTO_PARALLEL_FILES = 8
AUTO_PARALLEL_BYTES = 32 * 1024 * 1024

# One task: files up to this many bytes or this many files (a big file goes alone).
BATCH_BYTES = 4 * 1024 * 1024
BATCH_FILES = 16


def read_binaries(
    archive_path: str | None,
    found: Sequence[FoundBinary],
    engine: str,
    advance: Callable[[int], None] = lambda read_bytes: None,
    inspector: PayloadInspector | None = None,
    jobs: int | None = 1,
    cache: FactCache | None = None,
) -> tuple[list[ScannedBinary], list[FileError]]:
    """Read ``found`` (members of ``archive_path`` when given); results in ``found``'s order.

    ``advance(n)`` is told the size of each file as it is read (or found in the cache), for progress by bytes.
    ``jobs``: worker processes (1: read here, no worker; None: one per usable
    core, for reads big enough to gain from it, and with the fast engine). ``cache``: facts of files
    read before, looked up first and filled with what is read now.
    """
    outcomes: list[ReadOutcome | None] = [None] * len(found)
    keys: list[str | None] = [None] * len(found)
    if cache is not None:
        keys = [cache.key(item, archive_path) for item in found]
        outcomes = cache.get_all(keys, found, inspector)  # one lookup for every file
        advance(sum(item.size for item, hit in zip(found, outcomes, strict=True) if hit is not None))
    pending = [index for index, outcome in enumerate(outcomes) if outcome is None]

    workers = _worker_count(jobs, [found[i] for i in pending], engine)
    if workers > 1:
        # imported here: a scan that reads in one process (or from the cache) does not pay for them
        from concurrent.futures.process import BrokenProcessPool

        try:
            for index, outcome in _read_in_workers(archive_path, found, pending, engine, inspector, workers):
                outcomes[index] = _stored(outcome, cache, keys[index], found[index], archive_path, inspector)
                advance(found[index].size)
        except BrokenProcessPool:
            pass  # a worker died (killed for memory, say): what it had not finished is read here
        pending = [i for i in pending if outcomes[i] is None]
    if pending:
        archive = zipfile.ZipFile(archive_path) if archive_path is not None else None
        try:
            for index in pending:
                outcome = read_item(found[index], engine, inspector, archive)
                outcomes[index] = _stored(outcome, cache, keys[index], found[index], archive_path, inspector)
                advance(found[index].size)
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
    if cache is not None and key is not None and outcome.binary is not None and cache.key(item, archive_path) == key:
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


def _read_in_workers(
    archive_path: str | None,
    found: Sequence[FoundBinary],
    pending: Sequence[int],
    engine: str,
    inspector: PayloadInspector | None,
    workers: int,
) -> Iterator[tuple[int, ReadOutcome]]:
    """(index, outcome) pairs, batch by batch, the largest files handed out first."""
    from concurrent.futures import ProcessPoolExecutor

    batches = _batches(sorted(pending, key=lambda i: (-found[i].size, i)), found)
    context = _context()
    # a forked worker inherits the inspector as it is; a fresh interpreter gets it pickled
    setup = inspector if context.get_start_method() == "fork" else _dumps(inspector)
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_start,
                             initargs=(archive_path, engine, setup)) as pool:
        read = pool.map(_worker_read, [[found[i] for i in batch] for batch in batches])
        for batch, outcomes in zip(batches, read, strict=True):
            yield from zip(batch, outcomes, strict=True)


def _batches(order: Sequence[int], found: Sequence[FoundBinary]) -> list[list[int]]:
    """``order`` cut into tasks: a big file alone, small ones together (each task costs a round trip)."""
    batches: list[list[int]] = []
    batch: list[int] = []
    size = 0
    for index in order:
        batch.append(index)
        size += found[index].size
        if size >= BATCH_BYTES or len(batch) >= BATCH_FILES:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    return batches


def _context() -> BaseContext:
    """fork where it is safe and cheap; else a fork server that imports the readers once (each
    worker forks from it with them loaded); else a fresh interpreter."""
    return process_context(("cuda4amd.scan.read.parallel", "cuda4amd.scan.read.payload"))


class _SetupPickler(pickle.Pickler):
    """Pickles read-only mappings (the rules hold some) as plain dicts."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, MappingProxyType):
            return read_only, (dict(obj),)
        return NotImplemented


def read_only(mapping: dict) -> MappingProxyType:
    """A read-only view of ``mapping`` (how _SetupPickler's output rebuilds one)."""
    return MappingProxyType(mapping)


def _dumps(value: object) -> bytes:
    out = io.BytesIO()
    _SetupPickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return out.getvalue()


# Worker processes only: what _worker_start unpacked, for _worker_read.
# The main process never sets it.
_worker_state: dict = {}


def _worker_start(archive_path: str | None, engine: str, setup: PayloadInspector | bytes | None) -> None:
    _worker_state["engine"] = engine
    # bytes made by our parent process (see _dumps), or the parent's own object when forked
    _worker_state["inspector"] = pickle.loads(setup) if isinstance(setup, bytes) else setup
    _worker_state["archive"] = zipfile.ZipFile(archive_path) if archive_path is not None else None


def _worker_read(items: list[FoundBinary]) -> list[ReadOutcome]:
    return [read_item(item, _worker_state["engine"], _worker_state["inspector"], _worker_state["archive"])
            for item in items]
