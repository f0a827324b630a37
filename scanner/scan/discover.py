"""Find the binaries of a scan target: a folder, a venv, one file, or a wheel/zip.

Binaries are recognised by their magic bytes, never by extension. Files
under a few data extensions (DATA_EXTENSIONS: Python sources and bytecode,
text, C/C++/CUDA sources and headers) are not opened during the walk: they
are noted, and sniffed after all only if some binary of the tree names them
in its imports (:func:`named_skipped`), or (POSIX) if they carry an execute
bit; docs/design.md says why that cannot change a report. Trouble with a
single file (unreadable, vanished, odd name) becomes a FileError and the
walk goes on.
"""
from __future__ import annotations

import lzma
import os
import posixpath
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

from cuda4amd.model import FileError
from cuda4amd.scan.read.engine import open_regular, open_regular_fd, sniff, sniff_file

# What `scan --fix` installed (ZLUDA's files, launchers, the journal): not the application's.
OWN_FOLDER = ".cuda4amd"
#: archives a folder target holds, scanned too (their members under the archive's path)
ARCHIVE_SUFFIXES = (".whl", ".zip")

#: What reading a damaged zip member raises: a bad CRC (BadZipFile), a corrupt
#: deflate/bzip2/LZMA stream (zlib.error, OSError, LZMAError), a cut-off one
#: (EOFError), an encrypted one (RuntimeError), an unknown method (NotImplementedError).
ARCHIVE_ERRORS = (OSError, zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, RuntimeError, ValueError,
                  NotImplementedError)

#: Bytes one archive member may claim (its uncompressed size): zipfile never
#: inflates past the claim, and the largest CUDA library in a wheel is well
#: under 4 GiB (libtorch_cuda.so, ~1.5 GiB); a bigger claim is a per-file error.
MAX_MEMBER_BYTES = 4 << 30

TargetKind = Literal["folder", "venv", "site-packages", "file", "archive"]

#: Names no loader of this tool's resolution maps: Python's import system
#: loads extension modules only under EXTENSION_SUFFIXES (.so, .pyd), the
#: by-name search (read/byname.py) only finds .dll/.so names, and an import
#: table naming one of these is caught by named_skipped. See docs/design.md.
DATA_EXTENSIONS = frozenset((
    "py", "pyc", "pyo", "pyi", "pyx", "pxd", "pxi", "pth", "typed",
    "txt", "md", "rst", "html", "htm", "css", "js", "json", "toml", "yaml", "yml", "cfg", "ini", "csv", "xml",
    "h", "hh", "hpp", "hxx", "cuh", "inl", "c", "cc", "cpp", "cxx", "cu",
))
#: Execute bits: on POSIX an executable file is sniffed whatever its name.
_EXECUTABLE = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


class TargetError(Exception):
    """The scan target itself cannot be used (missing, unreadable, wrong kind)."""


@dataclass(frozen=True)
class Target:
    kind: TargetKind
    path: Path  # on disk
    display: str  # as the user wrote it
    roots: tuple[Path, ...] = ()  # folders walked, for venvs the site-packages


@dataclass(frozen=True)
class FoundBinary:
    path: str  # relative to the target, "/"-separated, printable
    format: str  # "PE" | "ELF"
    size: int
    disk_path: str | None = None  # a file on disk, or
    member: str | None = None  # a member of the target archive


@dataclass
class Discovery:
    target: Target
    binaries: list[FoundBinary] = field(default_factory=list)
    # every other name in the tree, so the graph can resolve libraries that are
    # symlinks or duplicates of a binary: relative path -> relative path of the binary
    aliases: dict[str, str] = field(default_factory=dict)
    errors: list[FileError] = field(default_factory=list)
    files_seen: int = 0
    # files not sniffed for their data extension: casefolded name -> [(disk path or member, relative path)]
    skipped: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # (st_dev, st_ino) of each binary on disk -> its relative path (links and hard links become aliases)
    inodes: dict[tuple[int, int], str] = field(default_factory=dict)
    # disk paths of the files named like wheels and zip archives (folder targets), sorted
    archives: list[str] = field(default_factory=list)


_WINDOWS_DRIVE = re.compile(r"^([A-Za-z]):[\\/](.*)$")


def resolve_target(text: str) -> Target:
    """Turn what the user typed into a Target; Windows-style paths are accepted."""
    path = _locate(text.strip().strip('"'))
    if path.is_dir():
        if (path / "pyvenv.cfg").is_file():
            roots = _venv_site_packages(path)
            return Target("venv", path, text, tuple(roots) or (path,))
        if path.name.lower() == "site-packages" or any(path.glob("*.dist-info")):
            return Target("site-packages", path, text, (path,))
        return Target("folder", path, text, (path,))
    if path.is_file():
        if path.suffix.lower() in (".whl", ".zip"):
            if not _is_zip(path):
                raise TargetError(f"{text}: not a readable {path.suffix.lower()[1:]} archive (empty, truncated "
                                  f"or not a zip file)")
            return Target("archive", path, text)
        return Target("file", path, text)
    raise TargetError(f"{text}: neither a folder nor a file")


def _is_zip(path: Path) -> bool:
    try:
        with open_regular(path) as handle:
            return zipfile.is_zipfile(handle)
    except OSError:
        return False


def _locate(text: str) -> Path:
    candidate = Path(text).expanduser()
    if candidate.exists():
        return candidate
    if os.sep == "/" and ("\\" in text or _WINDOWS_DRIVE.match(text)):  # C:\Apps\Tool and C:/Apps/Tool
        drive = _WINDOWS_DRIVE.match(text)
        if drive:
            # A Windows path on Linux: under WSL, C:\X is /mnt/c/X.
            wsl = Path("/mnt", drive.group(1).lower(), *re.split(r"[\\/]+", drive.group(2)))
            if wsl.exists():
                return wsl
            raise TargetError(
                f"{text}: a Windows path, and {wsl} does not exist here; "
                "pass the folder as this machine sees it"
            )
        unix = Path(*re.split(r"[\\/]+", text)).expanduser()
        if unix.exists():
            return unix
    raise TargetError(f"{text}: no such file or folder")


def _venv_site_packages(venv: Path) -> list[Path]:
    found = [p for p in (venv / "Lib" / "site-packages",) if p.is_dir()]
    for lib in ("lib", "lib64"):
        found += sorted(p for p in (venv / lib).glob("python3*/site-packages") if p.is_dir())
    unique: dict[tuple[int, int], Path] = {}
    for p in found:
        st = p.stat()
        unique.setdefault((st.st_dev, st.st_ino), p)
    return list(unique.values())


def printable(name: str) -> str:
    """A file name as text that any output format can carry: undecodable bytes
    become ``\\xNN`` text (not U+FFFD), so two names that differ only in such
    bytes stay two names (their dependencies and verdicts are not mixed).
    Control characters stay as they are here (JSON and TOML keep the exact
    name); the console and Markdown reports show them escaped
    (cuda4amd.report.escape)."""
    if name.isascii():  # nearly every name: ASCII round-trips unchanged, and this runs once per file walked
        return name
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def discover(target: Target, on_file: Callable[[], None] | None = None, *, follow_links: bool = False) -> Discovery:
    """The binaries of `target`. A link to a folder outside the target is
    reported and not walked unless `follow_links` (a link to / would make a
    scan of one DLL walk the whole machine)."""
    result = Discovery(target)
    if target.kind == "archive":
        _walk_archive(target.path, result, on_file)
    elif target.kind == "file":
        _consider_file(target.path, printable(target.path.name), result)
    else:
        inside = None if follow_links else os.path.realpath(target.path)
        for root in target.roots:
            prefix = printable(os.path.relpath(root, target.path)) if root != target.path else ""
            _walk_folder(root, prefix.replace(os.sep, "/"), result, on_file, inside)
    result.binaries.sort(key=lambda b: b.path)
    result.archives.sort()
    return result


def within(path: str, folder: str) -> bool:
    """Whether the real path of `path` (links resolved) is `folder` (a real path) or inside it."""
    real = os.path.normcase(os.path.realpath(path))
    folder = os.path.normcase(folder)
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


def _walk_folder(root: Path, prefix: str, result: Discovery, on_file, inside: str | None = None) -> None:
    visited_dirs: set[tuple[int, int]] = set()
    seen_files: dict[tuple[int, int], str] = {}
    links: list[tuple[str, str, os.stat_result]] = []
    # data-named files not sniffed, by inode: a link to one is read under the file's own name first
    data_files: dict[tuple[int, int], tuple[str, str, os.stat_result]] = {}
    stack: list[tuple[str, str]] = [(os.fspath(root), prefix)]
    while stack:
        folder, rel = stack.pop()
        try:
            st = os.stat(folder)
            key = (st.st_dev, st.st_ino)
            if key in visited_dirs:
                continue  # a symlink loop or a second way into a folder already walked
            visited_dirs.add(key)
            with os.scandir(folder) as entries:
                listing = sorted(entries, key=lambda e: e.name)
        except OSError as exc:
            result.errors.append(FileError(rel or ".", "discover", _os_message(exc)))
            continue
        for entry in listing:
            child_rel = f"{rel}/{printable(entry.name)}" if rel else printable(entry.name)
            try:
                if entry.is_dir(follow_symlinks=True):
                    if entry.name == OWN_FOLDER:
                        continue
                    if inside is not None and entry.is_symlink() and not within(entry.path, inside):
                        result.errors.append(FileError(
                            child_rel, "discover",
                            f"a link to a folder outside the target ({printable(os.path.realpath(entry.path))}): "
                            f"not followed (scan --follow-links follows it)"))
                        continue
                    stack.append((entry.path, child_rel))
                    continue
                if not entry.is_file(follow_symlinks=True):
                    continue  # sockets, fifos, dangling links
                st = entry.stat(follow_symlinks=True)
            except OSError as exc:
                result.errors.append(FileError(child_rel, "discover", _os_message(exc)))
                continue
            result.files_seen += 1
            if on_file:
                on_file()
            if entry.name.lower().endswith(ARCHIVE_SUFFIXES):
                result.archives.append(entry.path)
            if _is_data_name(entry.name) and not st.st_mode & _EXECUTABLE:
                result.skipped.setdefault(entry.name.casefold(), []).append((entry.path, child_rel))
                if not entry.is_symlink():
                    data_files.setdefault((st.st_dev, st.st_ino), (entry.path, child_rel, st))
            elif entry.is_symlink():
                links.append((entry.path, child_rel, st))
            else:
                _consider_once(entry.path, child_rel, st, seen_files, result)
    # Symlinked files last, so that a library and its soname link are read once,
    # under the real file's name, and the link becomes an alias of it.
    for path, rel, st in links:
        real = data_files.pop((st.st_dev, st.st_ino), None)
        if real is not None:
            _consider_once(*real, seen_files, result)
        _consider_once(path, rel, st, seen_files, result)
    for key, rel in seen_files.items():  # for named_skipped
        result.inodes.setdefault(key, rel)


def _is_data_name(name: str) -> bool:
    return name.rpartition(".")[2].lower() in DATA_EXTENSIONS and "." in name


def named_skipped(result: Discovery, names: set[str]) -> list[FoundBinary]:
    """Sniff the data-named files whose names some binary imports; the binaries among them.

    ``names``: library names as the binaries' import tables hold them
    (compared casefolded, a superset of every platform's matching). Each
    file is considered once; links and hard links of a binary become
    aliases, as in the walk. ``result.binaries`` is extended and stays sorted.
    """
    new: list[FoundBinary] = []
    archive = None
    try:
        for name in sorted({posixpath.basename(n.replace("\\", "/")).casefold() for n in names}):
            for where, rel in result.skipped.pop(name, []):
                if result.target.kind == "archive":
                    archive = archive or zipfile.ZipFile(result.target.path)
                    before = len(result.binaries)
                    _consider_member(archive, archive.getinfo(where), rel, result)
                    new += result.binaries[before:]
                    continue
                try:
                    st = os.stat(where)
                except OSError as exc:
                    result.errors.append(FileError(rel, "discover", _os_message(exc)))
                    continue
                before = len(result.binaries)
                _consider_once(where, rel, st, result.inodes, result)
                new += result.binaries[before:]
    finally:
        if archive is not None:
            archive.close()
    result.binaries.sort(key=lambda b: b.path)
    return sorted(new, key=lambda b: b.path)


def _consider_once(path: str, rel: str, st: os.stat_result, seen: dict, result: Discovery) -> None:
    key = (st.st_dev, st.st_ino)
    if key in seen:
        result.aliases[rel] = seen[key]
    elif _consider_file(path, rel, result, st.st_size):
        seen[key] = rel


def _consider_file(path: str | Path, rel: str, result: Discovery, size: int | None = None) -> bool:
    try:
        fd, st = open_regular_fd(path)  # a FIFO swapped in after the listing is refused, not waited on
        try:
            # the DOS header, and where it points, with plain reads: no file object per file
            head = os.read(fd, 0x40)
            kind = sniff(head)
            if kind is None and head[:2] == b"MZ":  # e_lfanew beyond the first bytes, or a short file
                with os.fdopen(os.dup(fd), "rb", buffering=0) as handle:
                    kind = sniff_file(handle)
            if size is None:
                size = st.st_size
        finally:
            os.close(fd)
    except OSError as exc:
        result.errors.append(FileError(rel, "discover", _os_message(exc)))
        return False
    if kind is None:
        return False
    result.binaries.append(FoundBinary(rel, kind, size, disk_path=os.fspath(path)))
    return True


def _walk_archive(path: Path, result: Discovery, on_file) -> None:
    try:
        archive = zipfile.ZipFile(path)
    except ARCHIVE_ERRORS as exc:
        raise TargetError(f"{path}: not a readable zip/wheel archive ({exc})") from exc
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            result.files_seen += 1
            if on_file:
                on_file()
            rel = printable(info.filename).lstrip("/")
            if stat.S_ISLNK(info.external_attr >> 16):
                continue  # zip symlinks hold a target path, not a binary
            if _is_data_name(posixpath.basename(info.filename)) and not (info.external_attr >> 16) & _EXECUTABLE:
                result.skipped.setdefault(posixpath.basename(info.filename).casefold(), []).append((info.filename, rel))
                continue
            _consider_member(archive, info, rel, result)


def _consider_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, rel: str, result: Discovery) -> None:
    try:
        with archive.open(info) as member:
            kind = sniff_file(member)
    except ARCHIVE_ERRORS as exc:
        result.errors.append(FileError(rel, "discover", f"cannot read archive member: {exc}"))
        return
    if kind is not None and info.file_size > MAX_MEMBER_BYTES:
        result.errors.append(FileError(rel, "discover", f"archive member claims {info.file_size} bytes "
                                       f"uncompressed, more than the {MAX_MEMBER_BYTES >> 30} GiB read "
                                       f"per member: not read"))
    elif kind is not None:
        result.binaries.append(FoundBinary(rel, kind, info.file_size, member=info.filename))


def _os_message(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "vanished during the scan"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return exc.strerror or str(exc)
