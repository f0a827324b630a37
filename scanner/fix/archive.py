"""Safe unpacking of ZLUDA release archives, and the unpacked release ("store").

    store = prepare_store(source, archive, sha, release, cache=..., required=[...])
    store.root / "nvcuda.dll"; store.files["nvcuda.dll"] -> sha256

Every member must sit under the archive's single top folder ``zluda/``, with a
relative, '/'-separated name free of ``..``, empty or ``.`` parts, drive
letters, colons, backslashes and NUL. Zip members that are links, devices,
fifos or sockets are refused, and so are tar hard links, devices and fifos.
A tar symlink is accepted only when the release table lists that path with a
``link_to`` and the link, read relative to its folder, names exactly that
file (ZLUDA's Linux archives hold such soname links). Damaged archives
(truncated, bad CRC) are refused; so is an archive without a file the
linking needs; other files the table lists but the archive lacks are
reported. Archives are unpacked into a temporary folder of the cache and
renamed into place when complete, so a half-unpacked release is never used.
"""
from __future__ import annotations

import hashlib
import json
import lzma
import os
import posixpath
import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING

from cuda4amd.fix.release import ReleaseError, ReleaseSource, cache_dir, sha256_file, tree_sha256
from cuda4amd.model import loader_key

if TYPE_CHECKING:
    from cuda4amd.rules.releases import ZludaRelease

__all__ = ["MAX_MEMBERS", "MAX_TOTAL_BYTES", "ArchiveError", "Store", "extract_archive", "inspect_archive",
           "open_folder", "prepare_store"]

TOP = "zluda"
MAX_TOTAL_BYTES = 4 << 30  # unpacked size limit (the real v6 archive unpacks to a few hundred MB)
MAX_MEMBERS = 20000
MANIFEST = "cuda4amd-store.json"
_DRIVE = re.compile(r"^[A-Za-z]:")

#: what reading an archive gives: release-relative path -> sha256 of each regular file, path -> link target,
#: the executable files' paths
_Contents = tuple[dict[str, str], dict[str, str], set[str]]


#: What reading a damaged archive raises, while listing it or reading a member: a bad CRC
#: (BadZipFile), a corrupt or cut-off stream (zlib.error, LZMAError, EOFError, tarfile.ReadError),
#: an unknown method (NotImplementedError). Anything else is a bug, not bad input.
_READ_ERRORS = (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError, RuntimeError,
                ValueError, NotImplementedError)


class ArchiveError(ReleaseError):
    """The archive is refused; the message names the member and the reason."""


@dataclass
class Store:
    """An unpacked, checked release: `root` holds the files of its `zluda/` folder."""

    root: Path
    files: dict[str, str]            # release-relative path -> sha256 of a regular file
    links: dict[str, str]            # release-relative path -> link target as stored (relative)
    source: ReleaseSource
    archive_sha256: str | None       # None for a folder source
    tree_sha256: str
    missing: tuple[str, ...] = ()    # listed by the release table, not in the archive (not needed)
    executable: frozenset[str] = field(default_factory=frozenset)

    @property
    def sha256(self) -> str:
        """The recorded hash of what was linked: the archive's, or the folder's tree hash."""
        return self.archive_sha256 or self.tree_sha256

    def resolve(self, rel: str) -> str | None:
        """Follow links inside the release to a regular file's path (None: absent or dangling)."""
        seen: set[str] = set()
        while rel in self.links:
            if rel in seen:
                return None
            seen.add(rel)
            rel = posixpath.normpath(posixpath.join(posixpath.dirname(rel), self.links[rel]))
        return rel if rel in self.files else None

    def find(self, name: str, platform: str) -> str | None:
        """A top-level path by file name (case-insensitive on Windows)."""
        if name in self.files or name in self.links:
            return name
        if platform == "windows":
            folded = name.casefold()
            for rel in [*self.files, *self.links]:
                if "/" not in rel and rel.casefold() == folded:
                    return rel
        return None

    def sha_of(self, rel: str) -> str | None:
        real = self.resolve(rel)
        return self.files.get(real) if real else None


def _table(release: ZludaRelease, platform: str) -> tuple[set[str], dict[str, str]]:
    listed = {f.path for f in release.files if f.platform == platform}
    links = {f.path: f.link_to for f in release.files if f.platform == platform and f.link_to}
    return listed, links


def _check_name(raw: str, what: str) -> str:
    """The release-relative path of a member name ('' for the top folder)."""
    name = raw
    if "\0" in name or "\\" in name or ":" in name or _DRIVE.match(name):
        raise ArchiveError(f"{what}: member {raw!r} has a drive, colon, backslash or NUL in its name")
    if name.startswith("/"):
        raise ArchiveError(f"{what}: member {raw!r} has an absolute path")
    name = name[:-1] if name.endswith("/") else name
    if name.startswith("./"):
        name = name[2:]
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ArchiveError(f"{what}: member {raw!r} has an empty, '.' or '..' path part")
    if parts[0] != TOP:
        raise ArchiveError(f"{what}: member {raw!r} is outside the top folder '{TOP}/' of a ZLUDA release")
    return "/".join(parts[1:])


@dataclass
class _Member:
    rel: str
    kind: str                       # "file" | "dir" | "link"
    link: str | None = None
    executable: bool = False
    open: Callable[[], IO[bytes] | None] | None = None  # the member's content, for files


def _zip_members(archive: zipfile.ZipFile, what: str) -> Iterator[_Member]:
    for info in archive.infolist():
        rel = _check_name(info.filename, what)
        mode = info.external_attr >> 16 if info.create_system == 3 else 0
        ftype = stat.S_IFMT(mode)
        if ftype == stat.S_IFLNK:
            raise ArchiveError(f"{what}: member {info.filename!r} is a symbolic link: refused")
        if ftype not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise ArchiveError(f"{what}: member {info.filename!r} is a device, fifo or socket: refused")
        if info.flag_bits & 0x1:
            raise ArchiveError(f"{what}: member {info.filename!r} is encrypted")
        if info.is_dir() or ftype == stat.S_IFDIR:
            yield _Member(rel, "dir")
        else:
            yield _Member(rel, "file", executable=bool(mode & 0o111),
                          open=partial(archive.open, info))


def _tar_members(archive: tarfile.TarFile, what: str, table_links: dict[str, str]) -> Iterator[_Member]:
    for info in archive:
        rel = _check_name(info.name, what)
        if info.isdir():
            yield _Member(rel, "dir")
        elif info.isreg():
            yield _Member(rel, "file", executable=bool(info.mode & 0o111),
                          open=partial(archive.extractfile, info))
        elif info.issym():
            target = info.linkname
            expected = table_links.get(rel)
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target)) if target else ""
            if expected is None:
                raise ArchiveError(f"{what}: member {info.name!r} is a symbolic link the release table does not list")
            if not target or target.startswith("/") or "\\" in target or resolved != expected:
                raise ArchiveError(f"{what}: link {info.name!r} -> {target!r} does not name {expected!r} "
                                   f"as the release table says")
            yield _Member(rel, "link", link=target)
        elif info.islnk():
            raise ArchiveError(f"{what}: member {info.name!r} is a hard link: refused")
        else:
            raise ArchiveError(f"{what}: member {info.name!r} is a device, fifo or other special file: refused")


def _walk(path: Path, release: ZludaRelease, platform: str) -> Iterator[_Member]:
    what = path.name
    _, table_links = _table(release, platform)
    name = path.name.lower()
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                yield from _zip_members(archive, what)
        else:
            with tarfile.open(path, "r:*") as archive:
                yield from _tar_members(archive, what, table_links)
    except ArchiveError:
        raise
    except _READ_ERRORS as exc:
        raise ArchiveError(f"{what}: damaged or unreadable archive ({exc})") from None


class _Layout:
    """The member paths met so far (as loader keys), refusing one that is both a
    file and a folder, or a file that appears twice."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.seen: set[str] = set()     # files and links
        self.folders: set[str] = set()  # every folder a member is in or is

    def add(self, m: _Member, key: str) -> None:
        parents = ["/".join(key.split("/")[:i]) for i in range(1, key.count("/") + 1)]
        clash = next((p for p in parents if p in self.seen), None)
        if clash is not None or (m.kind != "dir" and key in self.folders) or (m.kind == "dir" and key in self.seen):
            raise ArchiveError(f"{self.what}: {m.rel!r} is both a file and a folder in the archive: refused")
        self.folders.update(parents)
        if m.kind == "dir":
            self.folders.add(key)
        else:
            if key in self.seen:
                raise ArchiveError(f"{self.what}: {m.rel!r} appears twice")
            self.seen.add(key)


def _copy_member(m: _Member, what: str, out: IO[bytes] | None, total: int) -> tuple[str, int]:
    """Read a file member to its end, into `out` when given: (its sha256, the
    archive's bytes unpacked so far, `total` being those before it)."""
    h = hashlib.sha256()
    with _opened(m, what) as stream:
        while True:
            try:
                block = stream.read(1 << 20)
            except _READ_ERRORS as exc:  # raised here, in the reader's loop, not in _walk
                raise _damaged(what, m, exc) from None
            if not block:
                break
            total += len(block)
            if total > MAX_TOTAL_BYTES:
                raise ArchiveError(f"{what}: unpacks to more than {MAX_TOTAL_BYTES >> 30} GiB: refused")
            h.update(block)
            if out is not None:
                out.write(block)
    return h.hexdigest(), total


def _consume(members: Iterable[_Member], what: str, platform: str, dest: Path | None) -> _Contents:
    """Check every member, and unpack it under `dest` unless that is None."""
    files: dict[str, str] = {}
    links: dict[str, str] = {}
    executable: set[str] = set()
    layout = _Layout(what)
    total = count = 0
    for m in members:
        count += 1
        if count > MAX_MEMBERS:
            raise ArchiveError(f"{what}: more than {MAX_MEMBERS} members")
        if not m.rel:
            continue  # the top folder itself
        layout.add(m, loader_key(m.rel, platform))
        target = dest.joinpath(*m.rel.split("/")) if dest is not None else None
        if m.kind == "dir":
            if target is not None:
                target.mkdir(parents=True, exist_ok=True)
            continue
        if target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
        if m.kind == "link":
            if m.link is None:
                raise ArchiveError(f"{m.rel}: a link without a target")
            links[m.rel] = m.link
            if target is not None:
                os.symlink(m.link, target)
            continue
        if target is None:
            files[m.rel], total = _copy_member(m, what, None, total)
        else:
            with open(target, "xb") as out:  # a fresh staging folder: never overwrites
                files[m.rel], total = _copy_member(m, what, out, total)
            os.chmod(target, 0o755 if m.executable else 0o644)
        if m.executable:
            executable.add(m.rel)
    return files, links, executable


def _damaged(what: str, m: _Member, exc: BaseException) -> ArchiveError:
    return ArchiveError(f"{what}: member {m.rel!r} is damaged ({exc or type(exc).__name__}): refused")


def _opened(m: _Member, what: str) -> IO[bytes]:
    try:
        stream = m.open() if m.open is not None else None
    except _READ_ERRORS as exc:
        raise _damaged(what, m, exc) from None
    if stream is None:
        raise ArchiveError(f"{what}: member {m.rel!r} cannot be read: refused")
    return stream


def _check_contents(what: str, files: dict[str, str], links: dict[str, str], release: ZludaRelease, platform: str,
                    required: Iterable[str]) -> tuple[str, ...]:
    listed, _ = _table(release, platform)
    present = set(files) | set(links)
    fold = platform == "windows"
    have = {p.casefold() for p in present} if fold else present
    lacking = [p for p in sorted(set(required)) if (p.casefold() if fold else p) not in have]
    if lacking:
        raise ArchiveError(f"{what}: lacks {', '.join(lacking)}, which ZLUDA {release.tag} ships "
                           f"({platform}): not the release the rules describe, or an incomplete one")
    for rel, target in links.items():
        real = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
        if real not in present:
            raise ArchiveError(f"{what}: link {rel!r} -> {target!r} names no file of the archive")
    return tuple(p for p in sorted(listed) if (p.casefold() if fold else p) not in have)


def inspect_archive(path: Path, release: ZludaRelease, platform: str,
                    required: Iterable[str] = ()) -> tuple[dict[str, str], dict[str, str], set[str], tuple[str, ...]]:
    """Check an archive without writing anything: (files, links, executable, missing)."""
    files, links, executable = _consume(_walk(path, release, platform), path.name, platform, None)
    missing = _check_contents(path.name, files, links, release, platform, required)
    return files, links, executable, missing


def extract_archive(path: Path, dest: Path, release: ZludaRelease, platform: str,
                    required: Iterable[str] = ()) -> tuple[dict[str, str], dict[str, str], set[str], tuple[str, ...]]:
    """Unpack into `dest` (which must not exist) and check: (files, links, executable, missing)."""
    dest.mkdir(parents=True)
    files, links, executable = _consume(_walk(path, release, platform), path.name, platform, dest)
    missing = _check_contents(path.name, files, links, release, platform, required)
    return files, links, executable, missing


def open_folder(source: ReleaseSource, release: ZludaRelease, platform: str, required: Iterable[str] = ()) -> Store:
    """An unpacked release folder used in place (read only): `path/zluda` or `path` itself."""
    base = Path(source.location)
    root = base / TOP if (base / TOP).is_dir() else base
    what = str(root)
    _, table_links = _table(release, platform)
    files: dict[str, str] = {}
    links: dict[str, str] = {}
    executable: set[str] = set()
    for folder, dirs, names in os.walk(root):
        rel_dir = os.path.relpath(folder, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir
        for d in list(dirs):
            if os.path.islink(os.path.join(folder, d)):
                raise ArchiveError(f"{what}: {posixpath.join(rel_dir, d)} is a link to a folder: refused")
        for name in names:
            full = os.path.join(folder, name)
            rel = posixpath.join(rel_dir, name) if rel_dir else name
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(full)
                expected = table_links.get(rel)
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
                if expected is None or target.startswith("/") or resolved != expected:
                    raise ArchiveError(f"{what}: link {rel} -> {target} is not a link the release table lists")
                links[rel] = target
            elif stat.S_ISREG(st.st_mode):
                files[rel] = sha256_file(full)
                if st.st_mode & 0o111:
                    executable.add(rel)
            else:
                raise ArchiveError(f"{what}: {rel} is a device, fifo or socket: refused")
    missing = _check_contents(what, files, links, release, platform, required)
    tree = tree_sha256(files, links)
    if source.sha256 is not None and tree != source.sha256:
        raise ArchiveError(f"{what}: tree sha256 is {tree}, expected {source.sha256}: refused")
    return Store(root, files, links, source, None, tree, missing, frozenset(executable))


def prepare_store(source: ReleaseSource, archive: Path | None, archive_sha256: str | None, release: ZludaRelease,
                  platform: str, *, required: Iterable[str] = (), cache: Path | None = None,
                  unpack: bool = True) -> Store:
    """The checked release. A folder source is used in place. An archive is
    unpacked once into ``<cache>/zluda/store/<sha256>/`` (or, with
    ``unpack=False``, only read and hashed: its Store then has no usable root)."""
    required = list(required)
    if source.kind == "folder":
        return open_folder(source, release, platform, required)
    assert archive is not None and archive_sha256 is not None
    if not unpack:
        files, links, executable, missing = inspect_archive(archive, release, platform, required)
        return Store(Path(), files, links, source, archive_sha256, tree_sha256(files, links), missing,
                     frozenset(executable))
    stores = (cache or cache_dir()) / "zluda" / "store"
    final = stores / archive_sha256
    manifest = final / MANIFEST
    if manifest.is_file():
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            files, links = dict(data["files"]), dict(data["links"])
            missing = _check_contents(archive.name, files, links, release, platform, required)
            if all((final / TOP / Path(*p.split("/"))).is_file() for p in files):
                return Store(final / TOP, files, links, source, archive_sha256, tree_sha256(files, links),
                             missing, frozenset(data.get("executable", ())))
        except (OSError, ValueError, KeyError, TypeError):
            pass
        shutil.rmtree(final, ignore_errors=True)  # damaged store: unpack again
    stores.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=stores))
    try:
        files, links, executable, missing = extract_archive(archive, staging / TOP, release, platform, required)
        (staging / MANIFEST).write_text(json.dumps({
            "archive": archive.name, "sha256": archive_sha256, "tag": release.tag, "platform": platform,
            "files": files, "links": links, "executable": sorted(executable)}, indent=1), encoding="utf-8")
        try:
            os.replace(staging, final)
        except OSError:
            if not (final / MANIFEST).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Store(final / TOP, files, links, source, archive_sha256, tree_sha256(files, links), missing,
                 frozenset(executable))
