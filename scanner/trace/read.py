"""Read a ZLUDA trace folder or a zip / tar of one, as zluda_trace writes it.

The format, from vosen/ZLUDA at v5, v6-preview.69 (87531d39), v6 and
v7-preview.9 (the same in each; line numbers at v6):

* ``ZLUDA_LOG_DIR`` gets one folder per run, named after the program, then
  ``NAME_1``, ``NAME_2``, ... (zluda_trace/src/lib.rs:1325-1345,
  ``create_trace_directory``). On Windows ``zluda.exe --zluda-trace`` uses
  ``%TEMP%\\zluda`` (docs/src/troubleshooting.md, "Windows").
* In it, ``log.txt`` (zluda_trace/src/log.rs:45): one line per call,
  ``NAME(ARGS) -> STATUS`` (log.rs:82-99, ``write_call``; ``(...)`` when the
  arguments could not be formatted, ``UNKNOWN`` when no status was recorded),
  nested calls and notes indented by 4 spaces per level (log.rs:168). A
  call is written when the outermost call returns, so a process that crashed or
  hung inside a call has no line for that call. ARGS are ``name: value``
  pairs (format/src/format_generated.rs, ``write_<function>``): handles and
  pointers as ``0x…``, strings quoted, out-parameters already filled in.
  STATUS is the library's own name: ``CUDA_SUCCESS`` (format_generated.rs:23874),
  ``CUBLAS_STATUS_SUCCESS``, ``CUSPARSE_STATUS_SUCCESS``, ``CUDNN_STATUS_SUCCESS``,
  ``CUFFT_SUCCESS``, ``NVML_SUCCESS`` (format_generated_<lib>.rs). The stderr
  copy has ``[ZLUDA_TRACE] `` before each line (log.rs:16); it is accepted too.
* Notes under a call (log.rs:343-431, ``Display for ErrorEntry``), among them
  ``Saved module to FILE``, ``Error parsing module, log has been written to
  FILE`` and ``No function NAME in the underlying library``.
* The modules a program loaded: ``module_NNNN.KIND`` or
  ``module_NNNN_SS[_TT].KIND`` with KIND ``ptx``, ``elf``, ... and, for PTX that
  ZLUDA's parser rejects, ``module_…log`` with one error per line
  (zluda_trace/src/trace.rs:317-379, ``DumpWriter``).

Every file is untrusted: sizes are capped, nothing is extracted, and a line
that does not parse is kept as text. log.txt is read as a stream and parsed
into at most MAX_ENTRIES entries of at most MAX_KEPT_BYTES of text (issue 31:
a 64 KB zip of 32 MiB of short lines became 1.49 GB of entries); the lines
past that are counted, not kept (TraceRun.cut). A side file that cannot be
read is named in TraceRun.unreadable; the rest of the trace is still read.
"""
from __future__ import annotations

import contextlib
import io
import re
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from cuda4amd.scan.read.engine import open_regular

__all__ = ["LOG_NAME", "MODULE_FILE", "Entry", "TraceError", "TraceRun", "open_trace", "parse_log", "ptx_header"]

LOG_NAME = "log.txt"
LOG_PREFIX = "[ZLUDA_TRACE] "
INDENT = 4
MAX_LOG_BYTES = 256 << 20
MAX_SIDE_FILE_BYTES = 4 << 20
MAX_MEMBERS = 200_000
#: entries kept of one log.txt, and the bytes of their text; a longer line is cut at MAX_LINE_BYTES
MAX_ENTRIES = 200_000
MAX_KEPT_BYTES = 64 << 20
MAX_LINE_BYTES = 16 << 10
MODULE_FILE = re.compile(r"^module_(\d{4})(?:_(\d{2}))?(?:_(\d{2}))?\.([A-Za-z0-9]+)$")
CALL = re.compile(r"^(?P<name>[^\s(]+)(?P<args>\(.*\)) -> (?P<status>\S+)$")


class TraceError(Exception):
    """The path is no trace, or cannot be read."""


@dataclass(slots=True)
class Entry:
    """One line of log.txt: a call (name, args, status) or a note under one."""

    line: int
    depth: int
    text: str
    name: str | None = None  # None: a note
    args: str = ""
    status: str | None = None
    children: list[Entry] = field(default_factory=list)

    @property
    def is_call(self) -> bool:
        return self.name is not None

    def arg(self, key: str) -> str | None:
        """The value of argument `key` (as written: ``0x…``, a number, a quoted string)."""
        match = re.search(r"(?:\(|, )" + re.escape(key) + r": (\"(?:[^\"\\]|\\.)*\"|[^,()]+)", self.args)
        return match.group(1).strip() if match else None


@dataclass
class TraceRun:
    """One program run's trace folder."""

    name: str  # the folder's name (the program's, maybe with _N)
    where: str  # the folder inside the given path
    calls: list[Entry]  # top-level entries, in order
    files: dict[str, int]  # other files in the folder -> size
    side: dict[str, str]  # small text files read (module_*.log) -> text
    lines: int = 0
    unparsed: int = 0  # lines that are no call: notes under calls, or text zluda_trace did not write
    cut: int = 0  # lines of log.txt past MAX_ENTRIES / MAX_KEPT_BYTES / MAX_LOG_BYTES: counted, not read
    unreadable: dict[str, str] = field(default_factory=dict)  # side file -> why it was not read

    def walk(self) -> Iterator[Entry]:
        stack = list(reversed(self.calls))
        while stack:
            e = stack.pop()
            yield e
            stack.extend(reversed(e.children))


@dataclass
class ParsedLog:
    """What parse_stream kept of a log.txt."""

    roots: list[Entry]
    lines: int  # non-blank lines parsed
    unparsed: int
    cut: int  # lines counted past the caps, not parsed


def parse_log(text: str) -> tuple[list[Entry], int, int]:
    """(top-level entries, lines, lines that were no call) of a log.txt text."""
    parsed = parse_stream(io.BytesIO(text.encode("utf-8", "surrogatepass")))
    return parsed.roots, parsed.lines, parsed.unparsed


def parse_stream(handle: BinaryIO, *, max_entries: int = MAX_ENTRIES, max_kept: int = MAX_KEPT_BYTES,
                 max_bytes: int = MAX_LOG_BYTES) -> ParsedLog:
    """log.txt read from `handle` a block at a time: at most `max_entries` entries holding at most
    `max_kept` bytes of text are built; the lines after them are only counted."""
    roots: list[Entry] = []
    stack: list[Entry] = []
    count = unparsed = kept = 0
    lines = _Lines(handle, max_bytes)
    for number, raw in lines:
        if count >= max_entries or kept >= max_kept:
            return ParsedLog(roots, count, unparsed, 1 + lines.count_rest())
        line = raw.decode("utf-8", "replace").rstrip("\r\x00")
        if line.startswith(LOG_PREFIX):
            line = line[len(LOG_PREFIX):]
        if not line.strip():
            continue
        count += 1
        kept += len(raw)
        body = line.lstrip(" ")
        depth = (len(line) - len(body)) // INDENT
        entry = Entry(line=number, depth=depth, text=body)
        match = CALL.match(body)
        if match:
            entry.name, entry.args, entry.status = match.group("name"), match.group("args"), match.group("status")
        else:
            unparsed += 1
        while stack and stack[-1].depth >= depth:
            stack.pop()
        (stack[-1].children if stack else roots).append(entry)
        stack.append(entry)
    return ParsedLog(roots, count, unparsed, 0)


class _Lines:
    """The lines of a stream, each cut at MAX_LINE_BYTES, at most `max_bytes` read; `count_rest` counts
    what is left without making a line of it (bytes.count over each block)."""

    def __init__(self, handle: BinaryIO, max_bytes: int) -> None:
        self.handle, self.left = handle, max_bytes
        self.pending: list[bytes] = []  # lines of the current block not given out yet
        self.rest = b""

    def _block(self) -> bytes:
        block = self.handle.read(min(1 << 20, self.left)) if self.left > 0 else b""
        self.left -= len(block)
        return block

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        number, skipping = 0, False  # skipping: in the tail of a line longer than MAX_LINE_BYTES
        while True:
            block = self._block()
            if not block:
                break
            self.pending = (self.rest + block).split(b"\n")
            self.rest = self.pending.pop()
            self.pending.reverse()
            while self.pending:
                part = self.pending.pop()
                if skipping:
                    skipping = False
                    continue
                number += 1
                yield number, part[:MAX_LINE_BYTES]
            if len(self.rest) > MAX_LINE_BYTES:
                if not skipping:
                    number += 1
                    yield number, self.rest[:MAX_LINE_BYTES]
                self.rest, skipping = b"", True
        if self.rest and not skipping:
            rest, self.rest = self.rest, b""
            yield number + 1, rest

    def count_rest(self) -> int:
        """The lines not given out yet (the read stops at `max_bytes` all the same)."""
        count = len(self.pending)
        self.pending = []
        ends = self.rest.count(b"\n")
        tail = bool(self.rest) and not self.rest.endswith(b"\n")
        while block := self._block():
            ends += block.count(b"\n")
            tail = not block.endswith(b"\n")
        return count + ends + int(tail)


class _Source:
    """Files of a folder, zip or tar, by POSIX path relative to its root. A context manager:
    entering lists the files (and opens the archive), leaving closes the archive."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sizes: dict[str, int] = {}
        self._zip: zipfile.ZipFile | None = None
        self._tar: tarfile.TarFile | None = None
        self._members: dict[str, tarfile.TarInfo] = {}
        self._zip_names: dict[str, zipfile.ZipInfo] = {}

    def __enter__(self) -> _Source:
        path = self.path
        if path.is_dir():
            for p in path.rglob("*"):
                if len(self.sizes) >= MAX_MEMBERS:
                    break
                if p.is_file() and not p.is_symlink():
                    self.sizes[p.relative_to(path).as_posix()] = p.stat().st_size
        elif zipfile.is_zipfile(path):
            try:
                self._zip = zipfile.ZipFile(path)
                for info in self._zip.infolist()[:MAX_MEMBERS]:
                    if not info.is_dir():
                        self.sizes[_clean(info.filename)] = info.file_size
                        self._zip_names.setdefault(_clean(info.filename), info)
            except (zipfile.BadZipFile, OSError, ValueError) as exc:
                self.close()
                raise TraceError(f"{path}: not a readable zip: {exc}") from None
        elif path.is_file() and _is_tar(path):
            try:
                self._tar = tarfile.open(path)
                for member in self._tar.getmembers()[:MAX_MEMBERS]:
                    if member.isfile():
                        name = _clean(member.name)
                        self.sizes[name] = member.size
                        self._members[name] = member
            except (tarfile.TarError, OSError, EOFError) as exc:
                self.close()
                raise TraceError(f"{path}: not a readable tar archive: {exc}") from None
        elif path.is_file() and path.name == LOG_NAME:
            self.path = path.parent
            self.sizes = {p.name: p.stat().st_size for p in path.parent.iterdir() if p.is_file()}
        else:
            raise TraceError(f"{path}: not a ZLUDA trace (a folder, a .zip or .tar of one, or a {LOG_NAME})")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for archive in (self._zip, self._tar):
            if archive is not None:
                archive.close()
        self._zip = self._tar = None

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[BinaryIO]:
        """The file `name` as a stream; TraceError when it cannot be opened or read."""
        try:
            if self._zip is not None:
                with self._zip.open(self._zip_names[name]) as handle:
                    yield handle  # type: ignore[misc]
            elif self._tar is not None:
                member = self._tar.extractfile(self._members[name])
                yield member if member is not None else io.BytesIO()  # type: ignore[misc]
            else:
                # regular files only, opened non-blocking: a FIFO or device swapped in after the listing is refused
                with open_regular(self.path.joinpath(*name.split("/"))) as fh:
                    yield fh
        except (OSError, KeyError, zipfile.BadZipFile, tarfile.TarError, EOFError, RuntimeError, ValueError) as exc:
            raise TraceError(f"{name}: cannot read: {exc}") from None

    def read(self, name: str, limit: int) -> bytes:
        if self.sizes.get(name, 0) > limit:
            raise TraceError(f"{name}: {self.sizes[name]} bytes, more than the {limit} read")
        with self.open(name) as handle:
            try:
                data = _read_up_to(handle, limit + 1)
            except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError, ValueError) as exc:
                raise TraceError(f"{name}: cannot read: {exc}") from None
        if len(data) > limit:
            raise TraceError(f"{name}: more than the {limit} bytes read")
        return data


def _read_up_to(handle: BinaryIO, size: int) -> bytes:
    """Up to `size` bytes (an unbuffered read may return fewer than asked before the end)."""
    chunks, left = [], size
    while left > 0:
        block = handle.read(min(left, 1 << 20))
        if not block:
            break
        chunks.append(block)
        left -= len(block)
    return b"".join(chunks)


def _clean(name: str) -> str:
    return PurePosixPath(name.replace("\\", "/")).as_posix().lstrip("/")


def _is_tar(path: Path) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


def open_trace(path: str | Path) -> list[TraceRun]:
    """Every run folder (a folder holding log.txt) in `path`, in name order."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file or folder")
    with _Source(path) as source:
        logs = sorted(n for n in source.sizes if PurePosixPath(n).name == LOG_NAME)
        if not logs:
            raise TraceError(f"{path}: no {LOG_NAME} in it: not a ZLUDA trace folder (run the program with "
                             f"ZLUDA_LOG_DIR set, or `zluda.exe --zluda-trace` on Windows)")
        runs = [_read_run(source, log, path) for log in logs]
    return runs


def _read_run(source: _Source, log: str, path: Path) -> TraceRun:
    """One run folder: its log.txt streamed (a log that cannot be read refuses the trace), its side files
    each on its own (one that cannot be read is named in `unreadable`, the rest still read)."""
    folder = str(PurePosixPath(log).parent)
    prefix = "" if folder == "." else folder + "/"
    with source.open(log) as handle:
        try:
            parsed = parse_stream(handle)
        except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError, ValueError) as exc:
            raise TraceError(f"{log}: cannot read: {exc}") from None
    files = {n[len(prefix):]: s for n, s in source.sizes.items()
             if n.startswith(prefix) and "/" not in n[len(prefix):] and n != log}
    side: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    for name, size in _side_files(files):
        try:
            if name.endswith(".log"):
                side[name] = source.read(prefix + name, MAX_SIDE_FILE_BYTES).decode("utf-8", "replace")
            else:
                head = source.read(prefix + name, MAX_SIDE_FILE_BYTES) if size <= MAX_SIDE_FILE_BYTES else b""
                side[name] = head[:4096].decode("utf-8", "replace")
        except TraceError as exc:
            unreadable[name] = str(exc)
    run_name = PurePosixPath(folder).name if folder != "." else path.stem
    return TraceRun(name=run_name, where=folder, calls=parsed.roots, files=files, side=side, lines=parsed.lines,
                    unparsed=parsed.unparsed, cut=parsed.cut, unreadable=unreadable)


def _side_files(files: dict[str, int]) -> Iterable[tuple[str, int]]:
    """The module_*.log (small enough) and module_*.ptx files of a run folder."""
    for name, size in files.items():
        if MODULE_FILE.match(name) and ((name.endswith(".log") and size <= MAX_SIDE_FILE_BYTES)
                                        or name.endswith(".ptx")):
            yield name, size


def ptx_header(text: str) -> dict[str, str]:
    """The .version and .target of a PTX text's head."""
    out = {}
    for key in ("version", "target"):
        match = re.search(r"^\s*\." + key + r"\s+([^\s/]+(?:\s*,\s*[^\s/]+)*)", text, re.M)
        if match:
            out[key] = match.group(1)
    return out

