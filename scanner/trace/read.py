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
that does not parse is kept as text.
"""
from __future__ import annotations

import re
import tarfile
import zipfile
from collections.abc import Iterator
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
MODULE_FILE = re.compile(r"^module_(\d{4})(?:_(\d{2}))?(?:_(\d{2}))?\.([A-Za-z0-9]+)$")
CALL = re.compile(r"^(?P<name>[^\s(]+)(?P<args>\(.*\)) -> (?P<status>\S+)$")


class TraceError(Exception):
    """The path is no trace, or cannot be read."""


@dataclass
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

    def walk(self) -> Iterator[Entry]:
        stack = list(reversed(self.calls))
        while stack:
            e = stack.pop()
            yield e
            stack.extend(reversed(e.children))


def parse_log(text: str) -> tuple[list[Entry], int, int]:
    """(top-level entries, lines, lines that were no call) of a log.txt text."""
    roots: list[Entry] = []
    stack: list[Entry] = []
    count = unparsed = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r\x00")
        if line.startswith(LOG_PREFIX):
            line = line[len(LOG_PREFIX):]
        if not line.strip():
            continue
        count += 1
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
    return roots, count, unparsed


class _Source:
    """Files of a folder, zip or tar, by POSIX path relative to its root. A context manager:
    entering lists the files (and opens the archive), leaving closes the archive."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sizes: dict[str, int] = {}
        self._zip: zipfile.ZipFile | None = None
        self._tar: tarfile.TarFile | None = None
        self._members: dict[str, tarfile.TarInfo] = {}

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

    def read(self, name: str, limit: int) -> bytes:
        if self.sizes.get(name, 0) > limit:
            raise TraceError(f"{name}: {self.sizes[name]} bytes, more than the {limit} read")
        try:
            if self._zip is not None:
                with self._zip.open(self._zip_name(name)) as handle:
                    data = handle.read(limit + 1)
            elif self._tar is not None:
                member = self._tar.extractfile(self._members[name])
                data = member.read(limit + 1) if member else b""
            else:
                # regular files only, opened non-blocking: a FIFO or device swapped in after the listing is refused
                with open_regular(self.path.joinpath(*name.split("/"))) as fh:
                    data = _read_up_to(fh, limit + 1)
        except (OSError, KeyError, zipfile.BadZipFile, tarfile.TarError, EOFError, RuntimeError) as exc:
            raise TraceError(f"{name}: cannot read: {exc}") from None
        if len(data) > limit:
            raise TraceError(f"{name}: more than the {limit} bytes read")
        return data

    def _zip_name(self, name: str) -> str:
        assert self._zip is not None
        for info in self._zip.infolist():
            if _clean(info.filename) == name:
                return info.filename
        raise KeyError(name)


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
        runs = []
        for log in logs:
            folder = str(PurePosixPath(log).parent)
            prefix = "" if folder == "." else folder + "/"
            data = source.read(log, MAX_LOG_BYTES)
            calls, count, unparsed = parse_log(data.decode("utf-8", "replace"))
            files = {n[len(prefix):]: s for n, s in source.sizes.items()
                     if n.startswith(prefix) and "/" not in n[len(prefix):] and n != log}
            side = {}
            for name, size in files.items():
                if name.endswith(".log") and MODULE_FILE.match(name) and size <= MAX_SIDE_FILE_BYTES:
                    side[name] = source.read(prefix + name, MAX_SIDE_FILE_BYTES).decode("utf-8", "replace")
                elif name.endswith(".ptx") and MODULE_FILE.match(name):
                    head = source.read(prefix + name, MAX_SIDE_FILE_BYTES) if size <= MAX_SIDE_FILE_BYTES else b""
                    side[name] = head[:4096].decode("utf-8", "replace")
            run_name = PurePosixPath(folder).name if folder != "." else path.stem
            runs.append(TraceRun(name=run_name, where=folder, calls=calls, files=files, side=side, lines=count,
                                 unparsed=unparsed))
    return runs


def ptx_header(text: str) -> dict[str, str]:
    """The .version and .target of a PTX text's head."""
    out = {}
    for key in ("version", "target"):
        match = re.search(r"^\s*\." + key + r"\s+([^\s/]+(?:\s*,\s*[^\s/]+)*)", text, re.M)
        if match:
            out[key] = match.group(1)
    return out

