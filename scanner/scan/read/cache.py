"""A per-user cache of what the read stage found in each file.

A file's facts (its BinaryInfo, kernels, by-name references, the driver functions it names and the per-file
errors of reading them) are a function of its bytes, the reader, the engine, the rules that classify library
names, and the kernel-scan mode (which the scan derives again from the facts on every hit). So an entry is one
file per binary, named by the SHA-256 of

  * cuda4amd's version and FACTS_FORMAT (raised whenever what the readers find, or the entry's form, changes);
  * the engine (lief's version with it) and a canonical hash of the rules' families, unknown-CUDA patterns and
    system groups, and the run-time name rules (rules.names: templates, fragments, version templates, loader
    functions);
  * the file: its path on disk (or the archive's path and the member's name), size, mtime_ns, ctime_ns, device
    and inode.

An entry is the SHA-256 of its body, then the body: a pickle (protocol 5) of the tuple (key, kernel-scan mode,
info, kernels, by_name, driver_names, calls_cuda, errors), the model classes pickling themselves as their class
and field values (cuda4amd.model). Pickle, not JSON with a codec per fact type: the model round-trips as it is,
and unpickling is C (a warm re-scan is no slower than with the sqlite cache it replaced: docs/design.md). It is
safe here only because of who can write the folder: it is private (userdirs.private_folder: the user's, 0700,
writable by no one else, not a link; ssh's rule) and so is each entry (userdirs.read_private: a regular file of
the user's, writable by no one else, at most ENTRY_LIMIT bytes, opened without following a link or waiting on a
FIFO).
Whoever can write such a file is the user, who could as well edit their shell's start-up files. Even so the
unpickler builds only the fact classes (FactsUnpickler), and the digest keeps a damaged entry from reaching it: an
entry that fails any check is ignored and the file read again, never an error. A cache folder that cannot be made
or written is dropped for the run.

Location: ``$CUDA4AMD_FACTS_CACHE``, else ``facts`` in the per-user cache that the ZLUDA downloads use too
(:func:`cuda4amd.userdirs.cache_dir`: ``$CUDA4AMD_CACHE``, else platformdirs' user cache folder,
``%LOCALAPPDATA%\\cuda4amd``, ``$XDG_CACHE_HOME/cuda4amd`` or ``~/.cache/cuda4amd``, ``~/Library/Caches/cuda4amd``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import pickle
import re
import stat
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda4amd import __version__
from cuda4amd.model import (
    BinaryInfo,
    DriverNames,
    FatbinEntry,
    FileError,
    ImportedLibrary,
    KernelReport,
    NameReference,
    ReadOutcome,
    ScannedBinary,
    Section,
)
from cuda4amd.userdirs import SEAL_BYTES, facts_dir, private_folder, read_sealed, write_sealed

if TYPE_CHECKING:
    from cuda4amd.scan.discover import FoundBinary
    from cuda4amd.scan.read.payload import PayloadInspector

#: the form of the entries and what the readers put in them: raise it when either changes (5: one file per binary)
#: 6: kernels carry ZLUDA's PTX check (model.KernelReport.ptx_*); 7: + ptx_unregistered_*; 8: fat binaries
#: followed through the loader's map where a section header disagrees (scan/read/loadmap.py); 9: the PTX check
#: keys statements by their head as written (a refusal's construct, and counts where digit-different heads decide apart)
FACTS_FORMAT = 9
#: an entry's name: its key and this
SUFFIX = ".facts"
#: the largest entry read or written: the biggest measured is 40 KB (libnccl.so.2 of nvidia-nccl-cu12 2.19.3; 30 KB
#: in a site-packages of 411 binaries); a binary whose facts need more is read every time
ENTRY_LIMIT = 16 * 1024 * 1024
#: entries not written for this long go when a scan writes the cache (a hit does not rewrite its entry)
KEEP_SECONDS = 30 * 24 * 3600
#: what the sqlite cache before FACTS_FORMAT 5 left in the folder: removed with the stale entries
LEGACY = ("facts.sqlite3", "facts.key")
#: the only classes an entry holds (cuda4amd.model): the unpickler builds nothing else
FACT_TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    BinaryInfo, ImportedLibrary, Section, KernelReport, FatbinEntry, NameReference, DriverNames)}
#: what a damaged or foreign entry can raise while it is unpickled: it is then ignored
DECODE_ERRORS = (pickle.UnpicklingError, ValueError, TypeError, KeyError, AttributeError, IndexError, EOFError,
                 RecursionError, MemoryError)

#: where the facts cache lives (see the module docstring)
facts_folder = facts_dir


class FactsUnpickler(pickle.Unpickler):
    """An unpickler that builds the fact classes and built-in values only: a pickle naming any other class or
    function (``os.system``, say) is refused before anything runs."""

    def find_class(self, module: str, name: str) -> Any:
        cls = FACT_TYPES.get(name)
        if module != BinaryInfo.__module__ or cls is None:
            raise pickle.UnpicklingError(f"not a fact: {module}.{name}")
        return cls


def canonical(value: Any) -> Any:
    """A JSON-able form of rules data that is the same in every process (sets sorted, patterns as text)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__] + [[f.name, canonical(getattr(value, f.name))]
                                         for f in dataclasses.fields(value) if f.compare]
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, dict):
        return sorted(([canonical(k), canonical(v)] for k, v in value.items()),
                      key=lambda kv: json.dumps(kv, sort_keys=True))
    if isinstance(value, re.Pattern):
        return ["re", value.pattern, value.flags]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return [type(value).__name__, str(value)]


def scan_context(engine: str, inspector: PayloadInspector | None) -> str:
    """What besides a file's bytes its facts depend on: cuda4amd's version, the format, engine, classifying rules."""
    rules = None
    if inspector is not None:
        names = inspector.names.name_rules  # how loaders assemble names (rules.names): by-name facts depend on it
        rules = canonical((inspector.rules.families, inspector.rules.unknown, inspector.rules.system,
                           names.templates, names.fragments, names.versioners, names.loader_functions,
                           _ptx_rules_digest(inspector.rules.kernel_dirs)))
    if engine == "lief":
        import lief

        engine = f"lief {getattr(lief, '__version__', '?')}"
    text = json.dumps([__version__, FACTS_FORMAT, engine, rules], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _ptx_rules_digest(folders: Sequence[Path]) -> str:
    """The SHA-256 of the PTX rule files (ptx-*.toml) of every kernels folder: the PTX check of each release is
    a fact of the file (scan/read/ptx), so an edited or added rule file is another key."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(Path(folder).glob("ptx-*.toml")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def kernel_mode(item: FoundBinary, info: BinaryInfo, inspector: PayloadInspector | None) -> str:
    if inspector is None:
        return "no-payload"
    return inspector.kernel_scan(item.path, info) or "skip"


class FactCache:
    """Facts of files read before. Use :meth:`open`; every failure turns the cache off, never the scan."""

    def __init__(self, folder: Path, context: str) -> None:
        self.folder: Path | None = folder
        self.context = context
        self.written = 0
        self.hits = 0
        self.misses = 0

    @classmethod
    def open(cls, engine: str, inspector: PayloadInspector | None, folder: Path | None = None) -> FactCache | None:
        try:
            private = private_folder(folder or facts_folder())
        except RuntimeError:  # no home folder to put the cache in (Path.home)
            return None
        return cls(private, scan_context(engine, inspector)) if private is not None else None

    def key(self, item: FoundBinary, archive_path: str | None) -> str | None:
        """The entry key of ``item`` as it is on disk now; None if it cannot be stat'ed."""
        disk = archive_path if item.member is not None else item.disk_path
        if disk is None:
            return None
        try:
            st = os.stat(disk)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None  # a FIFO or device swapped in: never answered from the cache (the read refuses it)
        # repr of str, int and None: one text per value, the same in every process (surrogates escaped)
        where = (disk, item.member, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_dev, st.st_ino)
        return hashlib.sha256(f"{self.context} {where!r}".encode("utf-8", "surrogateescape")).hexdigest()

    def get(self, key: str | None, item: FoundBinary, inspector: PayloadInspector | None) -> ReadOutcome | None:
        """The recorded outcome of ``item`` under ``key``; None when there is none to use."""
        if key is None or self.folder is None:
            return None
        outcome = None
        body = read_sealed(self.folder / f"{key}{SUFFIX}", ENTRY_LIMIT)  # None when damaged: noticed by its digest
        if body is not None:
            with suppress(*DECODE_ERRORS):  # a damaged entry: the file is read again, and written anew
                outcome = _decoded(body, key, item, inspector)
        if outcome is None:
            self.misses += 1
        else:
            self.hits += 1
        return outcome

    def get_all(self, keys: Sequence[str | None], items: Sequence[FoundBinary],
                inspector: PayloadInspector | None) -> list[ReadOutcome | None]:
        """:meth:`get` for each (key, item) pair."""
        return [self.get(key, item, inspector) for key, item in zip(keys, items, strict=True)]

    def put(self, key: str, outcome: ReadOutcome, item: FoundBinary, inspector: PayloadInspector | None) -> None:
        """Record ``outcome`` of ``item`` (read now) under ``key``; a folder that cannot be written turns the
        cache off."""
        binary = outcome.binary
        if binary is None or self.folder is None:
            return
        record = (key, kernel_mode(item, binary.info, inspector), binary.info, binary.kernels, binary.by_name,
                  binary.driver_names, binary.calls_cuda, tuple((e.stage, e.message) for e in outcome.errors))
        try:
            body = pickle.dumps(record, protocol=5)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
            return  # a value no reader returns (a class of its own): this file is read again next time
        if len(body) + SEAL_BYTES > ENTRY_LIMIT:
            return
        try:
            write_sealed(self.folder / f"{key}{SUFFIX}", body)
        except OSError:
            self.folder = None  # a full disk, a folder made read-only: no more tries this run
            return
        self.written += 1

    def commit(self) -> None:
        """After a run that wrote entries: remove those not written for KEEP_SECONDS (and what the sqlite cache
        before FACTS_FORMAT 5 left)."""
        if self.folder is None or not self.written:
            return
        cutoff = time.time() - KEEP_SECONDS
        with suppress(OSError), os.scandir(self.folder) as listing:  # what is not pruned now is another time
            for found in listing:
                # entries, and the temporary files of writes that were killed (userdirs.write_private)
                ours = found.name.endswith(SUFFIX) or (found.name.startswith(".") and found.name.endswith(".tmp"))
                with suppress(OSError):
                    if found.name in LEGACY or (ours and found.stat(follow_symlinks=False).st_mtime < cutoff):
                        os.unlink(found.path)
        self.written = 0

    def close(self) -> None:
        self.folder = None


def _decoded(body: memoryview, key: str, item: FoundBinary, inspector: PayloadInspector | None) -> ReadOutcome | None:
    """The outcome an entry's body holds for ``item``; None when it is not this key's, or was read for another
    kernel-scan mode (the rules judge this name differently now). Raises one of DECODE_ERRORS when damaged."""
    record = FactsUnpickler(io.BytesIO(body)).load()
    if type(record) is not tuple or len(record) != 8 or record[0] != key or type(record[2]) is not BinaryInfo:
        return None
    _, mode, info, kernels, by_name, driver_names, calls_cuda, errors = record
    if mode != kernel_mode(item, info, inspector):
        return None
    binary = ScannedBinary(item.path, info, item.size, kernels=kernels, by_name=by_name,
                           driver_names=driver_names, calls_cuda=calls_cuda)
    return ReadOutcome(binary, tuple(FileError(item.path, stage, message) for stage, message in errors))
