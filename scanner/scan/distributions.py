"""Which installed Python distribution owns which file of a scan target.

    dists = find_distributions(target)        # from .dist-info (RECORD) / .egg-info
    owners = owner_map(dists)                 # OwnerMap: casefolded relative path -> name
    owners.owner_of("Lib/site-packages/torch/lib/cudnn64_8.dll")   # "torch" | None

Paths are relative to the target and '/'-separated, like FoundBinary.path.
Nothing here raises on bad metadata: a .dist-info with a missing or garbled
METADATA or RECORD is still a Distribution (with what could be read), and
unreadable folders are skipped.
"""
from __future__ import annotations

import csv
import functools
import io
import os
import posixpath
import re
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Iterable, Iterator

from cuda4amd.scan.discover import ARCHIVE_ERRORS, Target, printable, within
from cuda4amd.scan.read.engine import open_regular

__all__ = ["Distribution", "OwnerMap", "find_distributions", "owner_map", "owner_of", "canonical_name"]

UNKNOWN_VERSION = "unknown"
#: how deep below a folder target's root to look for site-packages (a dist-info's parent);
#: app/.venv/lib/python3.12/site-packages/x.dist-info is depth 5
MAX_DEPTH = 6
_MAX_METADATA_BYTES = 1 << 20  # headers are at the top; a huge METADATA is mostly its description
_MAX_RECORD_BYTES = 64 << 20

_NORMALIZE = re.compile(r"[-_.]+")


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name: "Cupy_CUDA12x" -> "cupy-cuda12x"."""
    return _NORMALIZE.sub("-", name).lower().strip("-")


@dataclass(frozen=True)
class Distribution:
    name: str  # METADATA `Name` as written (display name); from the folder name if absent
    version: str  # METADATA `Version`, e.g. "2.3.0+cu118"; the folder name's, or "unknown"
    dist_info: str  # relative path of the .dist-info (or .egg-info) folder
    files: frozenset[str]  # relative '/'-paths the distribution installed

    @property
    def canonical_name(self) -> str:
        return canonical_name(self.name)


class OwnerMap(dict):
    """casefolded relative path -> distribution name; `owner_of` does the casefolding."""

    def owner_of(self, path: str) -> str | None:
        return self.get(_key(path))


def _key(path: str) -> str:
    return path.replace("\\", "/").lstrip("/").casefold()


def owner_map(distributions: Iterable[Distribution]) -> OwnerMap:
    """Relative path (casefolded) -> distribution name. When two distributions
    list the same file (namespace `__init__.py`, a file overwritten by a later
    install), the one whose name sorts first wins, so the result is stable."""
    owners = OwnerMap()
    for dist in sorted(distributions, key=lambda d: (d.canonical_name, d.dist_info)):
        for path in dist.files:
            owners.setdefault(_key(path), dist.name)
    return owners


def owner_of(owners: dict[str, str], path: str) -> str | None:
    """Look `path` up in an owner_map() result (case-insensitively)."""
    return owners.get(_key(path))


# ---------------------------------------------------------------------------
# finding them
# ---------------------------------------------------------------------------

def find_distributions(target: Target, *, follow_links: bool = False) -> list[Distribution]:
    """The installed distributions of a venv / site-packages / folder target
    (their .dist-info / .egg-info folders below the target's roots) or of a
    wheel/zip archive target. Sorted by relative dist-info path. Links to
    folders outside the target are not entered unless `follow_links`
    (discovery reports them)."""
    if target.kind == "archive":
        found = _from_archive(target.path)
    elif target.kind == "file":
        found = []
    else:
        found = []
        seen: set[str] = set()
        for root in target.roots or (target.path,):
            for site in _site_dirs(Path(root), None if follow_links else os.path.realpath(target.path)):
                prefix = _relative_prefix(site, Path(target.path))
                for dist in _from_site_dir(site, prefix):
                    if dist.dist_info not in seen:
                        seen.add(dist.dist_info)
                        found.append(dist)
    return sorted(found, key=lambda d: d.dist_info)


def _relative_prefix(folder: Path, top: Path) -> str:
    try:
        rel = os.path.relpath(folder, top)
    except ValueError:  # other drive on Windows
        return ""
    rel = printable(rel).replace(os.sep, "/")
    return "" if rel == "." else rel


def _is_meta_dir(name: str) -> bool:
    low = name.lower()
    return low.endswith(".dist-info") or low.endswith(".egg-info")


def _site_dirs(root: Path, inside: str | None = None) -> Iterator[Path]:
    """Folders that hold .dist-info/.egg-info entries, at most MAX_DEPTH below
    root. A folder holding some is a site-packages: its packages are not entered.
    `inside`: a real path; linked folders resolving outside it are not entered."""
    visited: set[tuple[int, int]] = set()
    stack: list[tuple[str, int]] = [(os.fspath(root), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) in visited:
                continue
            visited.add((st.st_dev, st.st_ino))
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        holds_meta = False
        for e in entries:
            if _is_meta_dir(e.name):
                holds_meta = True
                continue
            if depth < MAX_DEPTH:
                try:
                    if e.is_dir(follow_symlinks=True) and not (inside is not None and e.is_symlink()
                                                                and not within(e.path, inside)):
                        subdirs.append(e.path)
                except OSError:
                    pass
        if holds_meta:
            yield Path(folder)
        else:
            stack.extend((d, depth + 1) for d in reversed(subdirs))


def _from_site_dir(site: Path, prefix: str) -> Iterator[Distribution]:
    try:
        with os.scandir(site) as it:
            metas = sorted((e for e in it if _is_meta_dir(e.name)), key=lambda e: e.name)
    except OSError:
        return
    for e in metas:
        rel_meta = _join(prefix, printable(e.name))
        try:
            is_dir = e.is_dir(follow_symlinks=True)
        except OSError:
            continue
        if e.name.lower().endswith(".dist-info"):
            if not is_dir:
                continue
            meta = _read_bytes(Path(e.path) / "METADATA", _MAX_METADATA_BYTES)
            record = _read_bytes(Path(e.path) / "RECORD", _MAX_RECORD_BYTES)
            paths = _record_paths(record) if record is not None else []
            yield _make(e.name, rel_meta, meta, _resolve_all(prefix, paths))
        else:  # .egg-info: a folder (PKG-INFO, installed-files.txt) or a lone PKG-INFO file
            if is_dir:
                meta = _read_bytes(Path(e.path) / "PKG-INFO", _MAX_METADATA_BYTES)
                listing = _read_bytes(Path(e.path) / "installed-files.txt", _MAX_RECORD_BYTES)
                lines = _lines(listing) if listing is not None else []
                # installed-files.txt is relative to the .egg-info folder itself
                files = [_resolve(rel_meta, p) for p in lines]
                if meta is not None:
                    files.append(rel_meta + "/PKG-INFO")
            else:
                meta = _read_bytes(Path(e.path), _MAX_METADATA_BYTES)
                files = [rel_meta]
            yield _make(e.name, rel_meta, meta, files)


def _from_archive(path: Path) -> list[Distribution]:
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile):
        return []
    with archive:
        members = [(printable(i.filename).lstrip("/"), i) for i in archive.infolist()]
        files = [name for name, info in members if not info.is_dir()]
        metas: dict[str, str] = {}  # relative meta folder -> its basename
        for name in files:
            parts = name.split("/")[:-1]  # the folders a member is in
            for i, part in enumerate(parts):
                if _is_meta_dir(part):
                    metas.setdefault("/".join(parts[: i + 1]), part)
                    break
        by_name = {name: info for name, info in members}

        def read(rel: str, limit: int) -> bytes | None:
            info = by_name.get(rel)
            if info is None or info.is_dir():
                return None
            try:
                with archive.open(info) as f:
                    return f.read(limit)
            except ARCHIVE_ERRORS:
                return None

        dist_infos = [m for m in metas if m.lower().endswith(".dist-info")]
        result: list[Distribution] = []
        if len(dist_infos) == 1 and "/" not in dist_infos[0]:
            # a wheel: every member belongs to its one .dist-info
            rel_meta = dist_infos[0]
            meta = read(rel_meta + "/METADATA", _MAX_METADATA_BYTES)
            return [_make(metas[rel_meta], rel_meta, meta, files)]
        # a zip of a site-packages (or several): RECORDs relative to each parent folder
        for rel_meta, base in sorted(metas.items()):
            parent = posixpath.dirname(rel_meta)
            if base.lower().endswith(".dist-info"):
                meta = read(rel_meta + "/METADATA", _MAX_METADATA_BYTES)
                record = read(rel_meta + "/RECORD", _MAX_RECORD_BYTES)
                listed = _resolve_all(parent, _record_paths(record) if record is not None else [])
            else:
                meta = read(rel_meta + "/PKG-INFO", _MAX_METADATA_BYTES)
                listing = read(rel_meta + "/installed-files.txt", _MAX_RECORD_BYTES)
                listed = [_resolve(rel_meta, p) for p in (_lines(listing) if listing is not None else [])]
            result.append(_make(base, rel_meta, meta, listed))
        return result


# ---------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------

def _make(folder_name: str, rel_meta: str, metadata: bytes | None, files: Iterable[str | None]) -> Distribution:
    name, version = _parse_metadata(metadata)
    dir_name, dir_version = _split_folder_name(folder_name)
    return Distribution(
        name=name or dir_name,
        version=version or dir_version or UNKNOWN_VERSION,
        dist_info=rel_meta,
        files=frozenset(f for f in files if f),
    )


def _split_folder_name(folder_name: str) -> tuple[str, str | None]:
    """"torch-2.3.0+cu118.dist-info" -> ("torch", "2.3.0+cu118"); pip escapes '-' in
    names as '_', so the first '-' separates name and version."""
    stem = folder_name.rsplit(".", 1)[0]
    name, sep, rest = stem.partition("-")
    version = rest.split("-", 1)[0] if sep else ""
    return name or stem, version or None


_HEADER_END = re.compile(r"\r?\n\r?\n")


def _parse_metadata(data: bytes | None) -> tuple[str | None, str | None]:
    if not data:
        return None, None
    text = data.decode("utf-8", "replace")
    # The headers end at the first empty line (core metadata is RFC 822): the long
    # description after it is most of a METADATA file and the email parser fed it
    # line by line (0.2 s for 198 distributions of a real venv).
    head = _HEADER_END.split(text, 1)[0] + "\n"
    try:
        headers = HeaderParser().parsestr(head, headersonly=True)
        name = headers.get("Name")
        version = headers.get("Version")
    except Exception:  # the email parser is lenient, but be sure: metadata never stops a scan
        return None, None
    return _clean(name), _clean(version)


def _clean(value) -> str | None:
    if value is None:
        return None
    value = str(value).strip()
    if not value or len(value) > 200 or any(c in value for c in "\r\n\x00"):
        return None
    return value


def _read_bytes(path: Path, limit: int) -> bytes | None:
    """At most `limit` bytes of a regular file (a FIFO named METADATA or RECORD
    is not waited on: open_regular opens non-blocking and checks the type)."""
    try:
        with open_regular(path) as f:
            return f.read(limit)
    except OSError:
        return None



def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", "replace")
    return [line.strip() for line in text.splitlines() if line.strip()]


def _record_paths(data: bytes) -> list[str]:
    """First column of a RECORD (CSV: a path with a comma is quoted). A garbled
    RECORD gives what can be read: bad rows are parsed line by line or skipped."""
    text = data.decode("utf-8", "replace").replace("\x00", "")
    try:
        return [row[0] for row in csv.reader(io.StringIO(text)) if row and row[0].strip()]
    except csv.Error:
        pass
    paths = []
    for line in text.splitlines():
        try:
            row = next(csv.reader([line]), None)
        except csv.Error:
            row = [line.split(",", 1)[0]]
        if row and row[0].strip():
            paths.append(row[0])
    return paths


def _join(prefix: str, rel: str) -> str:
    return f"{prefix}/{rel}" if prefix else rel


def _resolve_all(base: str, entries: Iterable[str]) -> list[str | None]:
    """_resolve of each entry, with the common case inline: a RECORD lists every
    file of a distribution (tens of thousands in a venv) and nearly all are plain
    relative paths, for which the result is just base/entry; a function call and
    a normpath per entry were most of find_distributions' time."""
    if not _is_normal(base) or base == ".." or base.startswith("../"):
        return [_resolve(base, entry) for entry in entries]
    head = base + "/" if base else ""
    result: list[str | None] = []
    for entry in entries:
        plain = entry.strip().replace("\\", "/")
        if (plain and plain[0] != "/" and plain[1:2] != ":" and plain[-1] != "/" and "//" not in plain
                and "/." not in "/" + plain):
            result.append(head + plain)  # no empty, "." or ".." segment: already normal, inside the target
        else:
            result.append(_resolve(base, entry))
    return result


@functools.lru_cache(maxsize=256)
def _is_normal(base: str) -> bool:
    """Whether a RECORD's base folder is already as posixpath.normpath writes it
    (a handful of bases per scan, so remembered)."""
    return base == "" or (base != "." and not base.endswith("/") and posixpath.normpath(base) == base)


def _resolve(base: str, entry: str) -> str | None:
    """A RECORD/installed-files entry, relative to `base` (target-relative,
    '/'), as a target-relative normalised path; None when it leaves the target
    or is absolute."""
    entry = entry.strip()
    if not entry:
        return None
    entry = entry.replace("\\", "/")
    if entry.startswith("/") or entry[1:2] == ":":
        return None  # absolute (old installers, C:/..., //server): cannot be tied to the target reliably
    joined = _join(base, entry)
    # normpath is the cost of reading a RECORD (one call per listed file, tens of
    # thousands in a venv); a path whose segments are all plain names (none empty,
    # none starting with ".") below a normalised base is already normal.
    if "//" in entry or entry.endswith("/") or "/." in "/" + entry or not _is_normal(base):
        joined = posixpath.normpath(joined)
    if joined in (".", "") or joined == ".." or joined.startswith("../"):
        return None
    return joined
