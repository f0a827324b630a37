"""Which installed Python distribution owns which file of a scan target.

    dists = find_distributions(target)        # from .dist-info (RECORD) / .egg-info
    owners_of(dists, ["Lib/site-packages/torch/lib/cudnn64_8.dll", "x.dll"])
    # {"Lib/site-packages/torch/lib/cudnn64_8.dll": "torch"}: the paths some distribution lists

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
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from cuda4amd.project_names import canonical_name
from cuda4amd.scan.discover import ARCHIVE_ERRORS, Target, printable, within
from cuda4amd.scan.read.engine import open_regular

__all__ = ["Distribution", "find_distributions", "owners_of"]

UNKNOWN_VERSION = "unknown"
#: how deep below a folder target's root to look for site-packages (a dist-info's parent);
#: app/.venv/lib/python3.12/site-packages/x.dist-info is depth 5
MAX_DEPTH = 6
_MAX_METADATA_BYTES = 1 << 20  # headers are at the top; a huge METADATA is mostly its description
_MAX_RECORD_BYTES = 64 << 20

@dataclass(frozen=True)
class Distribution:
    name: str  # METADATA `Name` as written (display name); from the folder name if absent
    version: str  # METADATA `Version`, e.g. "2.3.0+cu118"; the folder name's, or "unknown"
    dist_info: str  # relative path of the .dist-info (or .egg-info) folder
    files: frozenset[str]  # relative '/'-paths the distribution installed

    @property
    def canonical_name(self) -> str:
        return canonical_name(self.name)


def _key(path: str) -> str:
    return path.replace("\\", "/").lstrip("/").casefold()


def owners_of(distributions: Iterable[Distribution], paths: Iterable[str]) -> dict[str, str]:
    """Path -> the name of the distribution that lists it, for each of
    ``paths`` that one lists (compared case-insensitively, '\\' as '/'). When
    two distributions list the same file (namespace `__init__.py`, a file
    overwritten by a later install), the one whose name sorts first wins, so
    the result is stable.

    Only the paths asked about are looked up: a venv's distributions list some
    70,000 files and a scan asks about its binaries (hundreds); a map of every
    file was 50 ms of a 16-core scan's analysis (docs/performance.md)."""
    wanted: dict[str, list[str]] = {}
    for path in paths:
        wanted.setdefault(_key(path), []).append(path)
    owners: dict[str, str] = {}
    for dist in sorted(distributions, key=lambda d: (d.canonical_name, d.dist_info)):
        if not wanted:
            break
        for key in wanted.keys() & _keys(dist.files):  # one C-level pass over the distribution's files
            for path in wanted.pop(key):
                owners[path] = dist.name
    return owners


def _keys(paths: Collection[str]) -> list[str]:
    """[_key(path) for path in paths], for all of them at once where that is the
    same (a call each was most of the owner lookup): with no '\\' and no path
    starting with '/', a key is the casefolded path, and casefolding goes
    character by character."""
    joined = "\0".join(paths)
    # a path starting with '/' is one at the start or right after a NUL
    if "\\" not in joined and not joined.startswith("/") and "\0/" not in joined:
        keys = joined.casefold().split("\0")
        if len(keys) == len(paths):  # else a path held a NUL
            return keys
    return [_key(path) for path in paths]


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
            meta = _read_bytes(os.path.join(e.path, "METADATA"), _MAX_METADATA_BYTES)
            record = _read_bytes(os.path.join(e.path, "RECORD"), _MAX_RECORD_BYTES)
            yield _make(e.name, rel_meta, meta, _record_files(prefix, record) if record is not None else [])
        else:  # .egg-info: a folder (PKG-INFO, installed-files.txt) or a lone PKG-INFO file
            if is_dir:
                meta = _read_bytes(os.path.join(e.path, "PKG-INFO"), _MAX_METADATA_BYTES)
                listing = _read_bytes(os.path.join(e.path, "installed-files.txt"), _MAX_RECORD_BYTES)
                lines = _lines(listing) if listing is not None else []
                # installed-files.txt is relative to the .egg-info folder itself
                files = [_resolve(rel_meta, p) for p in lines]
                if meta is not None:
                    files.append(rel_meta + "/PKG-INFO")
            else:
                meta = _read_bytes(e.path, _MAX_METADATA_BYTES)
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
        by_name = dict(members)

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
                listed = _record_files(parent, record) if record is not None else []
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
        files=_present(files),
    )


def _present(files: Iterable[str | None]) -> frozenset[str]:
    """The files that are there (not None, not ""), without a call per file (70,000 a venv)."""
    found = frozenset(files)
    if None in found or "" in found:
        found = found - _NO_FILES
    return cast("frozenset[str]", found)


_NO_FILES = frozenset((None, ""))


def _split_folder_name(folder_name: str) -> tuple[str, str | None]:
    """"torch-2.3.0+cu118.dist-info" -> ("torch", "2.3.0+cu118"); pip escapes '-' in
    names as '_', so the first '-' separates name and version."""
    stem = folder_name.rsplit(".", 1)[0]
    name, sep, rest = stem.partition("-")
    version = rest.split("-", 1)[0] if sep else ""
    return name or stem, version or None


#: a line the email parser takes for a header (or continuation): CPython
#: Lib/email/feedparser.py `headerRE`; the first other line ends the headers
_HEADER_LINE = re.compile(r"From |[\041-\071\073-\176]*:|[\t ]")
#: lines with their endings, as the email parser's buffer splits them
#: (io.StringIO(newline="")): '\r\n', '\r' or '\n'
_HEADER_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)")
_WANTED_HEADERS = frozenset(("name", "version"))


def _parse_metadata(data: bytes | None) -> tuple[str | None, str | None]:
    if not data:
        return None, None
    # Only the headers are read: the long description after them is most of a
    # METADATA file, and the email parser cost 1 ms a distribution.
    head = data[: _header_end(data)].decode("utf-8", "replace") + "\n"
    headers = _first_headers(head, _WANTED_HEADERS)
    return _clean(headers.get("name")), _clean(headers.get("version"))


def _header_end(data: bytes) -> int | None:
    """Where the headers end: the first empty line (core metadata is RFC 822
    headers, packaging.python.org/specifications/core-metadata), i.e. where the
    regex \\r?\\n\\r?\\n first matches, None if nowhere. Found in the bytes
    ('\\r' and '\\n' are never part of a UTF-8 sequence, so the decoded text
    ends at the same place) with two plain searches: the regex tried every
    position of the headers. A match holds a '\\n' followed by '\\n' or
    '\\r\\n'; the first such '\\n' starts the first match, or the '\\r' before it."""
    ends = [at for at in (data.find(b"\n\n"), data.find(b"\n\r\n")) if at >= 0]
    if not ends:
        return None
    at = min(ends)
    return at - 1 if at > 0 and data[at - 1] == 0x0D else at


def _first_headers(text: str, wanted: frozenset[str]) -> dict[str, str]:
    """Lower-cased header name -> the value of its first occurrence, for the
    `wanted` names (lower case), exactly as email.parser.HeaderParser (policy
    compat32) reads them and Message.get returns them: folded lines joined with
    their line breaks kept, the value's leading blanks and trailing line break
    removed (CPython Lib/email/feedparser.py FeedParser._parsegen and
    _parse_headers, Lib/email/_policybase.py Compat32.header_source_parse).
    `text` ends with a line break. Stops once every wanted name is read."""
    found: dict[str, str] = {}
    current: list[str] = []  # the lines of the header being read
    for match in _HEADER_LINES.finditer(text):
        line = match.group()
        if not _HEADER_LINE.match(line):
            break  # an empty line or the start of a body ends the headers
        if line[0] in " \t":
            if current:
                current.append(line)  # a continuation (one before any header is dropped)
            continue
        if current:
            _add_header(found, current, wanted)
            current = []
            if len(found) == len(wanted):
                return found
        # A Unix "From " envelope line is no header (the parser takes it for the
        # envelope, or a misplaced one, or when last for the body: skipped all
        # the same), nor is a line starting with ':' (no name).
        if not line.startswith("From ") and line[0] != ":":
            current = [line]
    if current:
        _add_header(found, current, wanted)
    return found


def _add_header(found: dict[str, str], lines: list[str], wanted: frozenset[str]) -> None:
    name, value = lines[0].split(":", 1)
    name = name.lower()
    if name in wanted and name not in found:
        found[name] = (value.lstrip(" \t") + "".join(lines[1:])).rstrip("\r\n")


def _clean(value: object) -> str | None:
    if value is None:
        return None
    value = str(value).strip()
    if not value or len(value) > 200 or any(c in value for c in "\r\n\x00"):
        return None
    return value


def _read_bytes(path: str, limit: int) -> bytes | None:
    """At most `limit` bytes of a regular file (a FIFO named METADATA or RECORD
    is not waited on: open_regular opens non-blocking and checks the type)."""
    try:
        with open_regular(path) as f:
            # A read of `limit` bytes allocates that much first (64 MiB for a
            # RECORD: most of reading one); one byte more than the file's size
            # tells a file grown since from one read to its end.
            want = min(limit, os.fstat(f.fileno()).st_size + 1)
            data = f.read(want)
            if len(data) == want < limit:
                data += f.read(limit - want)
            return data
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


#: a '\r' that does not end a line: the csv reader refuses it in an unquoted field
_LONE_CR = re.compile(r"\r(?!\n)")
#: a line's fields after its first, up to the line break
_LATER_FIELDS = re.compile(r",[^\n]*")


def _record_files(base: str, data: bytes) -> list[str | None]:
    """The files a RECORD lists, relative to `base`: _resolve_all(base,
    _record_paths(data)), except that a blank entry is None here, not left out.

    Nearly every RECORD has no quoted field (no '"' at all), no '\r' but in
    line breaks and no line near the csv module's field size limit: then the
    csv reader cannot fail, and its first field of a line is the text before
    the line's first ','; one substitution over the whole file gives all of
    them (the csv reader built a row of three fields per listed file)."""
    text = data.decode("utf-8", "replace")
    if "\x00" in text:  # a plain search is a tenth of a replace that finds nothing
        text = text.replace("\x00", "")
    if '"' in text or _LONE_CR.search(text) is not None or _may_have_long_line(text, csv.field_size_limit()):
        return list(_resolve_all(base, _record_paths(data)))
    firsts = _LATER_FIELDS.sub("", text)
    if "\r" in firsts:  # a line without a ',' kept its '\r\n'
        firsts = firsts.replace("\r", "")
    if firsts.endswith("\n"):
        firsts = firsts[:-1]  # no line after the last line break
    elif not firsts:
        return []
    return _resolve_lines(base, firsts)


def _may_have_long_line(text: str, limit: int) -> bool:
    """Whether a line of `text` may be `limit` characters or longer: such a line
    spans a whole limit/2 stretch of the text without a line break, so looking
    at each of those few stretches is enough (a False is certain)."""
    stretch = limit // 2
    if stretch < 1:
        return True
    return any(text.find("\n", start, start + stretch) < 0 for start in range(0, len(text) - stretch + 1, stretch))


def _join(prefix: str, rel: str) -> str:
    return f"{prefix}/{rel}" if prefix else rel


#: in the entries joined by line breaks (and one before and after), an entry that
#: _resolve may change: one after a line break that is empty, blank at its
#: start, absolute ("/x", "C:x") or starting with "."; a '/' ending an entry or
#: followed by '/' or '.' (an empty, "." or ".." segment)
_NOT_PLAIN_START = re.compile(r"\n(?=[/.\s]|[^\n]:)")
_NOT_PLAIN_SLASH = re.compile(r"/(?=[/.\n])")
#: the ASCII characters str.strip() removes, but the line break
_ASCII_BLANKS = " \t\r\x0b\x0c\x1c\x1d\x1e\x1f"


def _resolve_all(base: str, entries: Iterable[str]) -> list[str | None]:
    """[_resolve(base, entry) for entry in entries] (see _resolve_lines)."""
    entries = list(entries)
    lines = "\n".join(entries)
    if not entries or lines.count("\n") != len(entries) - 1:  # none, or an entry with a line break
        return [_resolve(base, entry) for entry in entries]
    return _resolve_lines(base, lines)


def _resolve_lines(base: str, lines: str) -> list[str | None]:
    """[_resolve(base, entry) for entry in lines.split("\n")], with the common
    case done on all entries at once: a RECORD lists every file of a
    distribution (tens of thousands in a venv) and nearly all are plain
    relative paths below a normalised base, for which the result is just
    base/entry. The few that are not are found by two regex searches over the
    text and resolved one by one: a function call (or even a few string tests)
    per entry was most of find_distributions' time."""
    head = base + "/" if base else ""
    if not _is_normal(base) or base == ".." or base.startswith("../") or "\n" in head:
        return [_resolve(base, entry) for entry in lines.split("\n")]
    if "\\" in lines:
        lines = lines.replace("\\", "/")  # as _resolve does (after strip(), which no '\\' or '/' changes)
    paths = (head + lines.replace("\n", "\n" + head) if head else lines).split("\n")
    result: list[str | None] = list(paths)
    for index in _not_plain("\n" + lines + "\n"):
        result[index] = _resolve(base, paths[index][len(head):])
    return result


def _not_plain(joined: str) -> set[int]:
    """Indices of the entries _resolve may change (see _NOT_PLAIN_START); `joined`
    is "\\n" + the entries joined by "\\n", '\\' as '/', + "\\n"."""
    found: set[int] = set()
    line, at = 0, 0  # the number of line breaks before `at`
    for match in _NOT_PLAIN_START.finditer(joined):
        line += joined.count("\n", at, match.start())
        at = match.start()
        found.add(line)  # the entry after this line break
    line, at = 0, 0
    for match in _NOT_PLAIN_SLASH.finditer(joined):
        line += joined.count("\n", at, match.start())
        at = match.start()
        found.add(line - 1)  # the entry this '/' is in
    if not joined.isascii() or any(blank in joined for blank in _ASCII_BLANKS):
        entries = joined[1:-1].split("\n")
        found.update(index for index, entry in enumerate(entries) if entry.strip() != entry)
    return found


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
