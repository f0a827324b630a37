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

import array
import errno
import lzma
import os
import posixpath
import re
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cuda4amd.model import FileError
from cuda4amd.scan.read.engine import open_regular, open_regular_fd, sniff, sniff_file

# What `scan --fix` installed (ZLUDA's files, launchers, the journal): not the application's.
OWN_FOLDER = ".cuda4amd"
#: archives a folder target holds, scanned too (their members under the archive's path)
ARCHIVE_SUFFIXES = (".whl", ".zip")
_ARCHIVE_EXTENSIONS = frozenset(suffix[1:] for suffix in ARCHIVE_SUFFIXES)

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
    # (st_dev, st_ino) of each binary on disk -> its relative path (links and hard links become aliases)
    inodes: dict[tuple[int, int], str] = field(default_factory=dict)
    # disk paths of the files named like wheels and zip archives (folder targets), sorted
    archives: list[str] = field(default_factory=list)
    # the data-named files as the walk noted them, not yet in `skipped` (see there)
    unindexed: list[DataFiles] = field(default_factory=list, repr=False)
    indexed: dict[str, list[tuple[str, str]]] = field(default_factory=dict, repr=False)
    taken: set[str] = field(default_factory=set, repr=False)  # casefolded names take_skipped gave out

    @property
    def skipped(self) -> dict[str, list[tuple[str, str]]]:
        """Files not sniffed for their data extension (and not taken): casefolded
        name -> [(disk path or member, relative path)], in walk order.

        Indexed on first use only: a venv holds 60,000 of them, and a scan asks
        for a few names (take_skipped), so a walk hands them over packed."""
        for data in self.unindexed:
            _index_data_files(data, self.indexed, self.taken)
        self.unindexed.clear()
        return self.indexed

    def take_skipped(self, names: set[str]) -> dict[str, list[tuple[str, str]]]:
        """The skipped files under these casefolded names, taken out of `skipped`
        (each is considered once), without indexing the others."""
        names = names - self.taken
        self.taken |= names
        taken = {name: self.indexed.pop(name) for name in names if name in self.indexed}
        for data in self.unindexed:
            for name, path, rel in data.named(names):
                taken.setdefault(name, []).append((path, rel))
        return taken


_WINDOWS_DRIVE = re.compile(r"^([A-Za-z]):[\\/](.*)$")


def resolve_target(text: str) -> Target:
    """Turn what the user typed into a Target; Windows-style paths are accepted."""
    if not text.strip().strip('"'):
        # an empty argument (`scan ""`, an unset shell variable) would otherwise be the current folder
        raise TargetError("the target is empty: name a folder, a file or an archive")
    try:
        return _target_at(_locate(text.strip().strip('"')), text)
    except PermissionError:
        raise TargetError(f"{text}: permission denied") from None


def _target_at(path: Path, text: str) -> Target:
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
    if _is_link_loop(candidate):
        raise TargetError(f"{text}: symbolic link loop")
    raise TargetError(f"{text}: no such file or folder")


def _is_link_loop(path: Path) -> bool:
    """Whether resolving `path` fails with ELOOP (Path.exists says False for a loop, as for a missing file)."""
    try:
        os.stat(path)
    except OSError as error:
        return error.errno == errno.ELOOP
    return False


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


def discover(target: Target, on_file: Callable[[], None] | None = None, *, follow_links: bool = False,
             jobs: int | None = 1) -> Discovery:
    """The binaries of `target`. A link to a folder outside the target is
    reported and not walked unless `follow_links` (a link to / would make a
    scan of one DLL walk the whole machine). ``jobs``: processes that walk a
    big folder's subfolders (None: one per usable core; 1: this process
    only); the result is the same either way. ``on_file`` is called for
    each file walked, before it is sniffed (one-process walks only)."""
    result = Discovery(target)
    if target.kind == "archive":
        _walk_archive(target.path, result, on_file)
    elif target.kind == "file":
        _consider_file(target.path, printable(target.path.name), result)
    else:
        inside = None if follow_links else os.path.realpath(target.path)
        workers = 1 if on_file is not None else walk_processes(jobs)
        for root in target.roots:
            prefix = printable(os.path.relpath(root, target.path)) if root != target.path else ""
            parts = _walk_tree(os.fspath(root), prefix.replace(os.sep, "/"), inside, on_file, workers)
            _replay(parts, result)
    result.binaries.sort(key=lambda b: b.path)
    result.archives.sort()
    return result


def within(path: str, folder: str) -> bool:
    """Whether the real path of `path` (links resolved) is `folder` (a real path) or inside it."""
    real = os.path.normcase(os.path.realpath(path))
    folder = os.path.normcase(folder)
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


# What walking a folder meets, in walk order, as plain tuples (a worker
# sends them back); the first item says which:
#   (_ERROR, rel, message)
#   (_ARCHIVE, path)
#   (_LINK, path, rel, size, dev, ino)                               a link to a file: considered last
#   (_FILE, path, rel, size, dev, ino, kind or None, error or None)  sniffed
# The data-named files (most of a tree) go apart, in DataFiles.
_ERROR, _ARCHIVE, _LINK, _FILE = range(4)


@dataclass(frozen=True)
class DataFiles:
    """The data-named files of one walked subtree, in walk order, packed: a
    tuple per file would cost the main process more to unpickle and index than
    the walk itself (70,000 files in a big venv)."""

    names: str  # their names, NUL-separated (no file name holds a NUL)
    folder_of: array.array  # per file: its folder's index in `folders`
    stats: array.array | list[int]  # per file: size, st_dev, st_ino
    links: bytes  # per file: 1 if it is a symbolic link
    folders: tuple[tuple[str, str], ...]  # (disk path, relative path) of each folder, both ending in a separator

    def named(self, casefolded: set[str]) -> Iterator[tuple[str, str, str]]:
        """(casefolded name, disk path, relative path) of the files with these names, in walk order."""
        if not casefolded or not self.folder_of:
            return
        # casefolding maps each character on its own (NUL to NUL): the whole string at once, in C
        folded = self.names.casefold().split("\0")
        hits = [index for index, name in enumerate(folded) if name in casefolded]
        if not hits:
            return
        raw_names = self.names.split("\0")
        for index in hits:
            yield folded[index], *self._where(index, raw_names[index])

    def entries(self) -> Iterator[tuple[str, str, str, int]]:
        """(name, disk path, relative path, index) of each file, in walk order."""
        if not self.folder_of:
            return
        for index, name in enumerate(self.names.split("\0")):
            yield name, *self._where(index, name), index

    def _where(self, index: int, name: str) -> tuple[str, str]:
        """(disk path, relative path) of file ``index``, named ``name``."""
        path, rel = self.folders[self.folder_of[index]]
        return path + name, rel + printable(name)


def _packed(values: list[int]) -> array.array | list[int]:
    """``values`` as an array of unsigned 64-bit ints (cheap to send), or as
    they are where one does not fit (Windows file IDs may have 128 bits)."""
    try:
        return array.array("Q", values)
    except OverflowError:
        return values


def _index_data_files(data: DataFiles, index: dict[str, list[tuple[str, str]]], taken: set[str]) -> None:
    for name, path, rel, _ in data.entries():
        casefolded = name.casefold()
        if casefolded in taken:
            continue
        where = index.get(casefolded)
        if where is None:
            index[casefolded] = [(path, rel)]
        else:
            where.append((path, rel))

#: One walked subtree: (the (dev, ino) of every folder entered, its events,
#: files seen, when its subfolders were left for later those subfolders as
#: (path, rel) in listing order, and its data-named files).
_Part = tuple[list[tuple[int, int]], list[tuple], int, list[tuple[str, str]], "DataFiles"]
#: A folder to walk in a split walk: (path, rel, index of the part that listed it, the folders above it).
_Folder = tuple[str, str, int, frozenset[tuple[int, int]]]

#: A parallel walk lists this many levels of folders here, then hands each
#: folder below them, with all it holds, to a worker ...
SPLIT_LEVELS = 2
#: ... if those levels held at least this many entries: in a smaller tree
#: starting workers costs more than the walk.
PARALLEL_WALK_ENTRIES = 200
#: With jobs=None, fewer usable cores than this walk in one process: on 2
#: cores two walkers were measured slower than one (docs/performance.md).
AUTO_WALK_CORES = 4
#: Folders per task handed to a worker (each task costs a round trip).
FOLDERS_PER_TASK = 8


def walk_processes(jobs: int | None) -> int:
    """Processes for a walk (1: this process alone). Only where workers fork: a fresh interpreter per
    worker costs more than it saves, and on Windows the listing already
    carries what a file's stat says (os.scandir), so the walk is cheap there."""
    from cuda4amd.scan.workers import forks, usable_cores

    workers = usable_cores() if jobs is None else jobs
    if workers <= 1 or (jobs is None and workers < AUTO_WALK_CORES) or not forks():
        return 1
    return workers


def _walk_part(folder: str, rel: str, inside: str | None, on_file: Callable[[], None] | None = None,
               descend: bool = True, ancestors: frozenset[tuple[int, int]] = frozenset()) -> _Part:
    """Walk ``folder`` (with everything below it, unless not ``descend``) as a one-process walk does.
    ``ancestors``: the folders above it, entered already (a link back to one is not followed).

    This loop runs once per file of the tree (70,000 in a big venv), so it
    keeps to what os.DirEntry already knows: no call per file but its stat
    (its execute bit and inode decide what it is) and, for the few files not
    named like data, the sniff.
    """
    visited: list[tuple[int, int]] = []
    entered: set[tuple[int, int]] = set(ancestors)
    events: list[tuple] = []
    emit = events.append
    later: list[tuple[str, str]] = []
    sniffed: dict[tuple[int, int], tuple[str | None, str | None]] = {}  # hard links: one sniff
    data_extensions = DATA_EXTENSIONS
    executable = _EXECUTABLE
    files_seen = 0
    data_names: list[str] = []
    data_folder: list[int] = []
    data_stats: list[int] = []
    data_links = bytearray()
    data_folders: list[tuple[str, str]] = []
    stack: list[tuple[str, str]] = [(folder, rel)]
    while stack:
        folder, rel = stack.pop()
        listing = _listing(folder, rel, entered, visited, emit)
        if listing is None:
            continue
        base = rel + "/" if rel else ""
        folder_index = -1
        for entry in listing:
            name = entry.name
            try:
                if entry.is_dir():  # follows a link, as a walk into a linked folder should
                    if name == OWN_FOLDER:
                        continue
                    child_rel = base + printable(name)
                    if inside is not None and entry.is_symlink() and not within(entry.path, inside):
                        emit((_ERROR, child_rel,
                              f"a link to a folder outside the target ({printable(os.path.realpath(entry.path))}): "
                              f"not followed (scan --follow-links follows it)"))
                        continue
                    (stack if descend else later).append((entry.path, child_rel))
                    continue
                if not entry.is_file():
                    continue  # sockets, fifos, dangling links
                st = entry.stat()
            except OSError as exc:
                emit((_ERROR, base + printable(name), _os_message(exc)))
                continue
            files_seen += 1
            if on_file:
                on_file()
            dot = name.rfind(".")
            extension = name[dot + 1:].lower() if dot >= 0 else ""
            if extension in _ARCHIVE_EXTENSIONS:
                emit((_ARCHIVE, entry.path))
            if extension in data_extensions and not st.st_mode & executable:
                if folder_index < 0:
                    folder_index = len(data_folders)
                    data_folders.append((os.path.join(folder, ""), base))
                data_names.append(name)
                data_folder.append(folder_index)
                data_stats += (st.st_size, st.st_dev, st.st_ino)
                data_links.append(entry.is_symlink())
            elif entry.is_symlink():
                emit((_LINK, entry.path, base + printable(name), st.st_size, st.st_dev, st.st_ino))
            else:
                key = (st.st_dev, st.st_ino)
                outcome = sniffed.get(key)
                if outcome is None:
                    outcome = sniffed[key] = _sniff_path(entry.path)
                emit((_FILE, entry.path, base + printable(name), st.st_size, st.st_dev, st.st_ino, *outcome))
    data = DataFiles("\0".join(data_names), array.array("L", data_folder), _packed(data_stats),
                     bytes(data_links), tuple(data_folders))
    return visited, events, files_seen, later, data


def _listing(folder: str, rel: str, entered: set[tuple[int, int]], visited: list[tuple[int, int]],
             emit: Callable[[tuple], None]) -> list[os.DirEntry] | None:
    """The entries of ``folder`` by name, the folder noted as entered; None where it was entered
    already (a symlink loop, or a second way into a folder already walked) or cannot be listed
    (an error event)."""
    try:
        st = os.stat(folder)
        key = (st.st_dev, st.st_ino)
        if key in entered:
            return None
        entered.add(key)
        visited.append(key)
        with os.scandir(folder) as entries:
            return sorted(entries, key=_entry_name)
    except OSError as exc:
        emit((_ERROR, rel or ".", _os_message(exc)))
        return None


def _walk_tree(root: str, prefix: str, inside: str | None, on_file: Callable[[], None] | None,
               workers: int) -> list[_Part]:
    """The walk of ``root`` as parts, in the order a one-process walk meets them.

    With workers, the first SPLIT_LEVELS levels are listed here and each
    folder below them is walked whole by a worker. A one-process walk meets
    a folder's own entries first, then its subfolders last-listed first (it
    pops them off a stack), each with everything below it: the parts are put
    in that order. Each part skips a folder it already entered, as the
    one-process walk does; if two parts entered the same folder (a link to a
    folder elsewhere in the tree), which one walks it depends on the order,
    so the tree is walked again in one process.
    """
    if workers <= 1:
        return [_walk_part(root, prefix, inside, on_file)]
    # per level: (part, index of the part of the level above that listed its folder)
    levels: list[list[tuple[_Part, int]]] = []
    frontier: list[_Folder] = [(root, prefix, -1, frozenset())]
    entries = 0
    for _ in range(SPLIT_LEVELS):
        level: list[tuple[_Part, int]] = []
        below: list[_Folder] = []
        for folder, rel, parent, ancestors in frontier:
            part = _walk_part(folder, rel, inside, descend=False, ancestors=ancestors)
            entries += len(part[1]) + len(part[3]) + len(part[4].folder_of)
            chain = ancestors | frozenset(part[0])
            below += [(path, sub, len(level), chain) for path, sub in part[3]]
            level.append((part, parent))
        levels.append(level)
        frontier = below
    if not frontier:
        return _in_walk_order(levels, [])
    if entries < PARALLEL_WALK_ENTRIES:
        return [_walk_part(root, prefix, inside)]
    tasks = [frontier[i:i + FOLDERS_PER_TASK] for i in range(0, len(frontier), FOLDERS_PER_TASK)]
    from concurrent.futures import ProcessPoolExecutor

    from cuda4amd.scan.workers import process_context

    with ProcessPoolExecutor(min(workers, len(tasks)), mp_context=process_context()) as pool:
        walked = [part for parts in pool.map(_walk_parts, tasks, [inside] * len(tasks)) for part in parts]
    parts = _in_walk_order(levels, [(part, folder[2]) for part, folder in zip(walked, frontier, strict=True)])
    # A folder above a part was entered before it in a one-process walk too
    # (the part skips it, as that walk does); any other folder entered by two
    # parts is entered by whichever that walk meets first: walk it that way.
    folders = [key for part in parts for key in part[0]]
    if len(set(folders)) != len(folders):
        return [_walk_part(root, prefix, inside)]
    return parts


def _walk_parts(folders: list[_Folder], inside: str | None) -> list[_Part]:
    """A worker's task: whole subtrees."""
    return [_walk_part(folder, rel, inside, ancestors=ancestors) for folder, rel, _, ancestors in folders]


def _in_walk_order(levels: list[list[tuple[_Part, int]]], last: list[tuple[_Part, int]]) -> list[_Part]:
    """Parts of a split walk in one-process walk order: a folder's part, then
    its subfolders' last-listed first, each followed by what is below it."""
    rows = [*levels, last]
    children: list[dict[int, list[int]]] = []
    for below in rows[1:]:
        by_parent: dict[int, list[int]] = {}
        for index, (_, parent) in enumerate(below):
            by_parent.setdefault(parent, []).append(index)
        children.append(by_parent)
    ordered: list[_Part] = []
    stack = [(0, i) for i in reversed(range(len(rows[0])))]
    while stack:
        depth, index = stack.pop()
        ordered.append(rows[depth][index][0])
        if depth + 1 < len(rows):
            # pushed first-listed first, so the last-listed comes off the stack first
            stack += [(depth + 1, child) for child in children[depth].get(index, [])]
    return ordered


def _replay(parts: list[_Part], result: Discovery) -> None:
    """Put one root's walk into ``result``: hard links and links to a binary
    become aliases of the name met first, symlinked files are considered
    last (a library and its soname link are read once, under the real file's
    name, and the link becomes an alias of it)."""
    seen: dict[tuple[int, int], str] = {}
    links: list[tuple[str, str, int, tuple[int, int]]] = []
    errors, aliases, binaries = result.errors, result.aliases, result.binaries
    for _, events, files_seen, _, data in parts:
        result.files_seen += files_seen
        result.unindexed.append(data)
        for event in events:
            code = event[0]
            if code == _FILE:
                _, path, rel, size, dev, ino, kind, error = event
                key = (dev, ino)
                if key in seen:
                    aliases[rel] = seen[key]
                elif error is not None:
                    errors.append(FileError(rel, "discover", error))
                elif kind is not None:
                    binaries.append(FoundBinary(rel, kind, size, disk_path=path))
                    seen[key] = rel
            elif code == _LINK:
                _, path, rel, size, dev, ino = event
                links.append((path, rel, size, (dev, ino)))
            elif code == _ERROR:
                errors.append(FileError(event[1], "discover", event[2]))
            else:
                result.archives.append(event[1])
    if links:
        _replay_links(parts, links, seen, result)
    for key, rel in seen.items():  # for named_skipped
        result.inodes.setdefault(key, rel)


def _replay_links(parts: list[_Part], links: list[tuple[str, str, int, tuple[int, int]]],
                  seen: dict[tuple[int, int], str], result: Discovery) -> None:
    """The symlinked files of a walk, after every other file: a link to a data-named file has that
    file read under its own name first."""
    by_inode: dict[tuple[int, int], tuple[str, str, int, tuple[int, int]]] = {}
    for _, _, _, _, data in parts:
        for _, path, rel, index in data.entries():
            if not data.links[index]:
                size, dev, ino = data.stats[3 * index:3 * index + 3]
                by_inode.setdefault((dev, ino), (path, rel, size, (dev, ino)))
    for link in links:
        real = by_inode.pop(link[3], None)
        if real is not None:
            _consider_once(*real, seen, result)
        _consider_once(*link, seen, result)


def _entry_name(entry: os.DirEntry) -> str:
    return entry.name


def _is_data_name(name: str) -> bool:
    dot = name.rfind(".")
    return dot >= 0 and name[dot + 1:].lower() in DATA_EXTENSIONS


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
        wanted = {posixpath.basename(n.replace("\\", "/")).casefold() for n in names}
        taken = result.take_skipped(wanted)
        for name in sorted(wanted):
            for where, rel in taken.get(name, []):
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
                _consider_once(where, rel, st.st_size, (st.st_dev, st.st_ino), result.inodes, result)
                new += result.binaries[before:]
    finally:
        if archive is not None:
            archive.close()
    result.binaries.sort(key=lambda b: b.path)
    return sorted(new, key=lambda b: b.path)


def _consider_once(path: str, rel: str, size: int, key: tuple[int, int], seen: dict, result: Discovery) -> None:
    if key in seen:
        result.aliases[rel] = seen[key]
    elif _consider_file(path, rel, result, size):
        seen[key] = rel


def _consider_file(path: str | Path, rel: str, result: Discovery, size: int | None = None) -> bool:
    kind, error, stat_size = _sniff(path)
    if error is not None:
        result.errors.append(FileError(rel, "discover", error))
        return False
    if kind is None:
        return False
    result.binaries.append(FoundBinary(rel, kind, size if size is not None else stat_size, disk_path=os.fspath(path)))
    return True


def _sniff_path(path: str) -> tuple[str | None, str | None]:
    """(kind or None, error or None) of the file at ``path``."""
    kind, error, _ = _sniff(path)
    return kind, error


#: the names of files a loader maps: Windows' executable images and Linux's shared objects (libx.so.1.2)
_LIBRARY_NAME = re.compile(r"\.(dll|exe|pyd|sys)$|\.so(\.\d+)*$", re.IGNORECASE)


def _sniff(path: str | Path) -> tuple[str | None, str | None, int]:
    """(kind or None, error or None, size) of the file at ``path``, from its first bytes."""
    try:
        fd, st = open_regular_fd(path)  # a FIFO swapped in after the listing is refused, not waited on
        try:
            # the DOS header, and where it points, with plain reads: no file object per file
            head = os.read(fd, 0x40)
            if not head and _LIBRARY_NAME.search(os.fspath(path)):
                # named as the loader would load it, and nothing in it: LoadLibrary fails with
                # ERROR_BAD_EXE_FORMAT, dlopen with "file too short" (glibc elf/dl-load.c); unread, not no-CUDA
                return None, "empty file (0 bytes) named like a library: no loader can map it", 0
            kind = sniff(head)
            if kind is None and head[:2] == b"MZ":  # e_lfanew beyond the first bytes, or a short file
                with os.fdopen(os.dup(fd), "rb", buffering=0) as handle:
                    kind = sniff_file(handle)
        finally:
            os.close(fd)
    except OSError as exc:
        return None, _os_message(exc), 0
    return kind, None, st.st_size


def _walk_archive(path: Path, result: Discovery, on_file: Callable[[], None] | None) -> None:
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
