"""A per-user cache of what the read stage found in each file.

A file's facts (its BinaryInfo, kernels, by-name references, the driver functions it
names and the per-file errors of reading them) are a pure function of its bytes, the reader's code,
the engine, the rules that classify library names, and the kernel-scan mode
(which the scan derives again from the facts on every hit). So a record is
keyed by

  * the reader version: a hash of the record format (RECORD_FORMAT: records
    of an older format are never looked up, and go after KEEP_SECONDS) and
    of the reader's sources (this folder, with
    the sniffer and the per-file caps, cuda4amd/model.py, and the rules
    loader, validation kit and run-time rules whose matchers classify and
    assemble names) — any change
    to that code invalidates everything. The kernel-scan mode that
    scan/classify.py picks is checked on every hit instead (below);
  * the engine and a canonical hash of the rules' families, unknown-CUDA
    patterns and system groups, and the run-time name rules (rules.names:
    templates, fragments, version templates, loader functions);
  * the file: its path on disk (or the archive's path and the member's
    name), size, mtime_ns, ctime_ns, device and inode.

Records are marshal data (never pickle) in one sqlite3 database, each sealed
with an HMAC-SHA256 under a random key kept beside it (mode 0600) and
carrying its own key inside the sealed bytes. marshal only ever reads a
record whose seal matches (it is not meant for bytes from others), and what
it returns is then checked against the facts' field types before anything
is built from it: a record that fails the seal, does not parse, has a field
of the wrong type or the wrong number of fields is ignored and read again; a
cache that cannot be opened or written is dropped for the run. None of that
is an error of the scan. The seal detects corruption and records written by
anyone who cannot read the key file; a writer who can read it (the user
themselves) is trusted like the user's own files.

A record is the tuple (format, key, kernel-scan mode, info, kernels,
by_name, driver_names, calls_cuda, errors). A fact is the tuple of its field values in
field order; a tuple of facts (a binary's imports, sections, fat binary
entries, by-name references) is kept by columns, one tuple per field holding
that field of every item, so each column is type-checked at once and the
items are built by one ``map`` over the columns: a warm re-scan decodes tens
of thousands of them. A scan looks up all its files at once (one SELECT per
KEYS_PER_QUERY keys).

Location: ``$CUDA4AMD_FACTS_CACHE``, else ``facts`` in the per-user cache
that the ZLUDA downloads use too (:func:`cuda4amd.userdirs.cache_dir`:
``$CUDA4AMD_CACHE``, else platformdirs' user cache folder,
``%LOCALAPPDATA%\\cuda4amd``, ``$XDG_CACHE_HOME/cuda4amd`` or
``~/.cache/cuda4amd``, ``~/Library/Caches/cuda4amd``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import marshal
import operator
import os
import re
import sqlite3
import stat
import time
import types
import typing
from collections import deque
from functools import cache
from itertools import chain, repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

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
from cuda4amd.userdirs import facts_dir

if TYPE_CHECKING:
    from cuda4amd.scan.discover import FoundBinary
    from cuda4amd.scan.read.payload import PayloadInspector

DATABASE = "facts.sqlite3"
SECRET = "facts.key"
RECORD_FORMAT = 4  # 2: driver_names; 3: marshal, tuples of facts by columns; 4: calls_cuda
#: marshal's format of the records (every later Python reads it)
MARSHAL_VERSION = 4
#: keys looked up per SELECT: SQLite before 3.32 takes at most 999 parameters
KEYS_PER_QUERY = 900
#: page size of a new database (SQLite's default is 4096): half the time to fetch a scan's records
PAGE_BYTES = 16384
#: Records not rewritten for this long are dropped when the cache is written.
KEEP_SECONDS = 30 * 24 * 3600


class BadRecord(ValueError):
    """A cache record that is not what this code writes."""


# The only classes a record holds; each is rebuilt from exactly its fields, in order.
FACT_TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    BinaryInfo, ImportedLibrary, Section, KernelReport, FatbinEntry, NameReference, DriverNames)}

#: the parts of a record, in order
RECORD_FIELDS = ("format", "key", "mode", "info", "kernels", "by_name", "driver_names", "calls_cuda", "errors")
#: what a damaged or foreign record can raise while it is decoded: it is then ignored
DECODE_ERRORS = (BadRecord, ValueError, TypeError, KeyError, EOFError, RecursionError)


#: where the facts cache lives (see the module docstring)
facts_folder = facts_dir


def reader_version() -> str:
    """A hash of the reader's source files: the facts' recipe."""
    digest = hashlib.sha256(f"record {RECORD_FORMAT}".encode())
    here = Path(__file__).resolve().parent
    package = here.parents[1]
    # the readers, the data they return, and the rules code that classifies the names they find
    rules = [package / "rules" / f"{name}.py" for name in ("ruleset", "families", "system", "releases")]
    sources = sorted(here.glob("*.py")) + [package / "model.py", *rules,
                                           package / "rules" / "validate.py", package / "rules" / "runtime.py"]
    if len(sources) < 6:
        raise ValueError("the reader's sources are not installed: no cache")  # cannot tell versions apart
    for source in sources:
        digest.update(source.name.encode() + b"\0")
        digest.update(source.read_bytes())
    return digest.hexdigest()


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
        return sorted(([canonical(k), canonical(v)] for k, v in value.items()), key=lambda kv: json.dumps(kv, sort_keys=True))
    if isinstance(value, re.Pattern):
        return ["re", value.pattern, value.flags]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return [type(value).__name__, str(value)]


def scan_context(engine: str, inspector: PayloadInspector | None) -> str:
    """What besides a file's bytes its facts depend on: reader code, engine, classifying rules."""
    rules = None
    if inspector is not None:
        names = inspector.names.name_rules  # how loaders assemble names (rules.names): by-name facts depend on it
        rules = canonical((inspector.rules.families, inspector.rules.unknown, inspector.rules.system,
                           names.templates, names.fragments, names.versioners, names.loader_functions))
    if engine == "lief":
        import lief

        engine = f"lief {getattr(lief, '__version__', '?')}"
    text = json.dumps([reader_version(), engine, rules], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def kernel_mode(item: FoundBinary, info: BinaryInfo, inspector: PayloadInspector | None) -> str:
    if inspector is None:
        return "no-payload"
    return inspector.kernel_scan(item.path, info) or "skip"


class FactCache:
    """Facts of files read before. Use :meth:`open`; every failure turns the cache off, never the scan."""

    def __init__(self, db: sqlite3.Connection, secret: bytes, context: str) -> None:
        self.db = db
        self.secret = secret
        self.context = context
        self.writes: list[tuple[str, bytes, bytes, int]] = []
        self.hits = 0
        self.misses = 0

    @classmethod
    def open(cls, engine: str, inspector: PayloadInspector | None, folder: Path | None = None) -> FactCache | None:
        folder = folder or facts_folder()
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            secret = _secret(folder / SECRET)
            db = sqlite3.connect(os.fspath(folder / DATABASE), timeout=2.0, isolation_level=None)
            try:
                # a new database's page size (an existing one keeps its own): a record of a big library spans
                # many pages, each one read of the file
                db.execute(f"PRAGMA page_size = {PAGE_BYTES}")
                db.execute("CREATE TABLE IF NOT EXISTS facts (key TEXT PRIMARY KEY, record BLOB NOT NULL, "
                           "seal BLOB NOT NULL, written INTEGER NOT NULL)")
            except sqlite3.DatabaseError:
                db.close()
                raise
            return cls(db, secret, scan_context(engine, inspector))
        except (OSError, sqlite3.Error, ValueError):
            return None

    def key(self, item: FoundBinary, archive_path: str | None) -> str | None:
        """The record key of ``item`` as it is on disk now; None if it cannot be stat'ed."""
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
        """The recorded outcome of ``item`` under ``key``; None when there is none to trust."""
        return self.get_all([key], [item], inspector)[0]

    def get_all(self, keys: Sequence[str | None], items: Sequence[FoundBinary],
                inspector: PayloadInspector | None) -> list[ReadOutcome | None]:
        """:meth:`get` for each (key, item) pair: the records fetched together, each decoded as it arrives."""
        places: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            if key is not None:
                places.setdefault(key, []).append(index)
        outcomes: list[ReadOutcome | None] = [None] * len(keys)
        for key, record, seal in self._records(list(places)):
            for index in places.get(key, ()):
                try:
                    outcomes[index] = self._decode(key, record, seal, items[index], inspector)
                except DECODE_ERRORS:
                    pass  # read again, and written anew
        found = sum(outcome is not None for outcome in outcomes)
        self.hits += found
        self.misses += sum(map(len, places.values())) - found
        return outcomes

    def put(self, key: str, outcome: ReadOutcome, item: FoundBinary, inspector: PayloadInspector | None) -> None:
        binary = outcome.binary
        if binary is None or self.db is None:
            return
        record = (RECORD_FORMAT, key, kernel_mode(item, binary.info, inspector),
                  _encoder(BinaryInfo)(binary.info), _encoder(KernelReport | None)(binary.kernels),
                  _encoder(tuple[NameReference, ...])(binary.by_name),
                  _encoder(DriverNames | None)(binary.driver_names), binary.calls_cuda,
                  tuple((e.stage, e.message) for e in outcome.errors))
        try:
            text = marshal.dumps(record, MARSHAL_VERSION)
        except ValueError:
            return  # a value marshal cannot write (no reader returns one): this file is read again next time
        self.writes.append((key, text, self._seal(text), int(time.time())))

    def commit(self) -> None:
        """Write what was read this run (one transaction); stale records go."""
        if self.db is None or not self.writes:
            return
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                self.db.executemany("INSERT OR REPLACE INTO facts VALUES (?, ?, ?, ?)", self.writes)
                self.db.execute("DELETE FROM facts WHERE written < ?", (int(time.time()) - KEEP_SECONDS,))
        except sqlite3.Error:
            self.close()
        self.writes = []

    def close(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            except sqlite3.Error:
                pass
        self.db = None  # type: ignore[assignment]

    def _records(self, keys: list[str]) -> Iterator[tuple[Any, Any, Any]]:
        """(key, record, seal) of those of ``keys`` in the database, a query per KEYS_PER_QUERY keys; where the
        database fails, the cache is off and no more come."""
        if self.db is None:
            return
        try:
            for start in range(0, len(keys), KEYS_PER_QUERY):
                chunk = keys[start:start + KEYS_PER_QUERY]
                marks = ",".join("?" * len(chunk))  # placeholders only: the keys are bound, never spliced in
                yield from self.db.execute(f"SELECT key, record, seal FROM facts WHERE key IN ({marks})", chunk)
        except sqlite3.Error:
            self.close()

    def _seal(self, text: bytes) -> bytes:
        return hmac.digest(self.secret, text, "sha256")

    def _decode(self, key: str, text: Any, seal: Any, item: FoundBinary,
                inspector: PayloadInspector | None) -> ReadOutcome | None:
        if type(text) is not bytes or type(seal) is not bytes:
            raise BadRecord("not a record and a seal")  # sqlite keeps what was stored: text, a number
        if not hmac.compare_digest(self._seal(text), seal):
            raise BadRecord("seal does not match")
        record = marshal.loads(text)  # our own bytes (the seal says so); checked below before use
        if type(record) is not tuple or len(record) != len(RECORD_FIELDS):
            raise BadRecord("not a facts record")
        record_format, record_key, mode, info, kernels, by_name, driver_names, calls_cuda, errors = record
        if type(record_format) is not int or record_format != RECORD_FORMAT or record_key != key:
            raise BadRecord("another record's key")
        info = _decode(info, BinaryInfo)
        if mode != kernel_mode(item, info, inspector):
            return None  # read for another kernel-scan mode (the rules judge this name differently now)
        binary = ScannedBinary(item.path, info, item.size, kernels=_decode(kernels, KernelReport | None),
                               by_name=_decode(by_name, tuple[NameReference, ...]),
                               driver_names=_decode(driver_names, DriverNames | None),
                               calls_cuda=_decode(calls_cuda, bool | None))
        return ReadOutcome(binary, tuple(FileError(item.path, stage, message)
                                         for stage, message in _decode(errors, tuple[tuple[str, str], ...])))


def _secret(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        secret = path.read_bytes()
        if len(secret) != 32:
            raise ValueError(f"{path}: not a facts cache key") from None
        return secret
    secret = os.urandom(32)
    with os.fdopen(fd, "wb") as out:
        out.write(secret)
    return secret


def _same(value: Any) -> Any:
    return value


@cache
def _encoder(hint: Any) -> Callable[[Any], Any]:
    """Facts of type ``hint`` as marshal values, the form :func:`_decoder` reads (see the module docstring)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = _encoder(next(o for o in typing.get_args(hint) if o is not type(None)))
        return _same if inner is _same else lambda v: None if v is None else inner(v)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            if _is_fact(args[0]):
                return _columns_encoder(args[0])
            item = _encoder(args[0])
            return _same if item is _same else lambda v: tuple(map(item, v))
        parts = tuple(_encoder(a) for a in args)
        return _same if all(p is _same for p in parts) else lambda v: tuple(p(x) for p, x in zip(parts, v))
    if _is_fact(hint):
        fields = tuple((operator.attrgetter(name), _encoder(field_hint)) for name, field_hint in _hints(hint).items())
        return lambda v: tuple(encode(get(v)) for get, encode in fields)
    return _same  # str, int, bool, Literal


def _columns_encoder(cls: type) -> Callable[[Any], Any]:
    """A tuple of ``cls`` as one tuple per field, each holding that field of every item."""
    fields = tuple((operator.attrgetter(name), _encoder(field_hint)) for name, field_hint in _hints(cls).items())

    def columns(items: Any) -> tuple:
        return tuple(tuple(map(get, items)) if encode is _same else tuple(map(encode, map(get, items)))
                     for get, encode in fields)
    return columns


def _decode(value: Any, hint: Any) -> Any:
    """``value`` (what marshal read) as an instance of the type ``hint``, or BadRecord."""
    return _decoder(hint)(value)


@cache
def _decoder(hint: Any) -> Callable[[Any], Any]:
    """A checking decoder for one type, built once (records hold many thousands of values)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if len(options) == 2 and type(None) in options:
            inner = _decoder(next(o for o in options if o is not type(None)))
            return lambda v: None if v is None else inner(v)
        raise BadRecord(f"no rule for {hint}")
    if origin is typing.Literal:
        allowed = frozenset(typing.get_args(hint))
        return lambda v: v if type(v) is str and v in allowed else _bad(v, hint)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            if args[0] in (str, int):
                only = {args[0]}
                # one C-level pass over the types (a binary exports tens of thousands of names)
                return lambda v: v if type(v) is tuple and set(map(type, v)) <= only else _bad(v, hint)
            if _is_fact(args[0]):
                return _columns_decoder(args[0])
            item = _decoder(args[0])
            return lambda v: tuple(map(item, v)) if type(v) is tuple else _bad(v, hint)
        parts = tuple(_decoder(a) for a in args)
        return lambda v: (tuple(p(x) for p, x in zip(parts, v)) if type(v) is tuple and len(v) == len(parts)
                          else _bad(v, hint))
    if hint in (str, int, bool):
        return lambda v: v if type(v) is hint else _bad(v, hint)
    if _is_fact(hint):
        field_hints = tuple(_hints(hint).values())
        signatures = _scalar_signatures(field_hints)
        if signatures is not None:
            return lambda v: hint(*v) if type(v) is tuple and tuple(map(type, v)) in signatures else _bad(v, hint)
        fields = tuple(_decoder(h) for h in field_hints)
        count = len(fields)
        return lambda v: (hint(*[f(x) for f, x in zip(fields, v)]) if type(v) is tuple and len(v) == count
                          else _bad(v, hint))
    raise BadRecord(f"no rule for {hint}")


def _columns_decoder(cls: type) -> Callable[[Any], Any]:
    """Reads :func:`_columns_encoder`'s form: every column checked (most in one C-level pass), then the items
    built from them by :func:`_builder`."""
    columns = tuple(_column_decoder(field_hint) for field_hint in _hints(cls).values())
    count = len(columns)
    build = _builder(cls)
    hint = tuple[cls, ...]  # type: ignore[valid-type]

    def decode(v: Any) -> tuple:
        if type(v) is not tuple or len(v) != count or set(map(type, v)) != {tuple} or len(set(map(len, v))) != 1:
            _bad(v, hint)
        return build([column(values) for column, values in zip(columns, v)])
    return decode


def _column_decoder(hint: Any) -> Callable[[tuple], Any]:
    """A decoder of one column (a tuple) of values of type ``hint``."""
    origin = typing.get_origin(hint)
    options = typing.get_args(hint) if origin in (typing.Union, types.UnionType) else (hint,)
    if all(o in (str, int, bool, type(None)) for o in options):
        allowed = frozenset(options)
        return lambda col: col if set(map(type, col)) <= allowed else _bad(col, hint)
    if origin is typing.Literal:
        values = frozenset(typing.get_args(hint))
        return lambda col: col if set(map(type, col)) <= {str} and set(col) <= values else _bad(col, hint)
    args = typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis and args[0] in (str, int):
        # tuples of names (an import's symbols): all of the column's values checked in one pass
        only = {args[0]}
        return lambda col: (col if set(map(type, col)) <= {tuple} and set(map(type, chain.from_iterable(col))) <= only
                            else _bad(col, hint))
    item = _decoder(hint)
    return lambda col: tuple(map(item, col))


def _builder(cls: type) -> Callable[[list[tuple]], tuple]:
    """The items of ``cls`` whose field values are ``columns`` (one tuple per field): ``tuple(map(cls, *columns))``,
    for a slotted class without a Python-level call per item.

    The __init__ that dataclasses writes for a frozen slotted class only stores each argument in its slot through
    object.__setattr__ (FatbinEntry has no __post_init__ and no field left out of __init__), so the same is done a
    column at a time, by C-level maps of the slot descriptors: a kernel-heavy library holds thousands of entries.
    Other classes are built by their __init__ (their items keep the compact attribute storage it gives them).
    """
    plain_init = cls.__new__ is object.__new__ and not hasattr(cls, "__post_init__") and all(
        f.init for f in dataclasses.fields(cls))
    if "__slots__" not in vars(cls) or not plain_init:
        return lambda columns: tuple(map(cls, *columns))
    new = object.__new__
    stores = tuple(vars(cls)[name].__set__ for name in _hints(cls))

    def build(columns: list[tuple]) -> tuple:
        items: tuple = tuple(map(new, repeat(cls, len(columns[0]))))
        for store, column in zip(stores, columns):
            deque(map(store, items, column), maxlen=0)
        return items
    return build


def _is_fact(hint: Any) -> bool:
    return isinstance(hint, type) and hint in FACT_TYPES.values()


def _scalar_signatures(hints: tuple[Any, ...]) -> frozenset[tuple[type, ...]] | None:
    """Every tuple of value types a dataclass of plain str/int/bool (or optional) fields may hold; else None."""
    import itertools

    choices = []
    for hint in hints:
        options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        if not all(o in (str, int, bool, type(None)) for o in options):
            return None
        choices.append(options)
    return frozenset(itertools.product(*choices))


def _bad(value: Any, hint: Any) -> Any:
    raise BadRecord(f"{value!r:.60} is not a {hint}")


@cache
def _hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}
