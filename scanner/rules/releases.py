"""The ZLUDA releases: zluda/releases.toml (the default release, pinned archives) and zluda/<tag>.toml.

    rel = load_release(path)                          # one zluda/<tag>.toml, validated
    rel.replacement_for("cublas64_12.dll", "windows") # the release file that stands in for it
    rel.symbol_state("blas", "cublasSgemm_v2")        # "implemented" | "stub" | "missing"
    prov, default, pins = load_releases_index(path)   # zluda/releases.toml

A RuleSet parses a release table when first asked for it (RuleSet.release).
Invalid data raises RulesError naming the file and the problem.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cuda4amd.rules.validate import (
    ID_RE,
    Provenance,
    RulesError,
    Schema,
    basename,
    check,
    check_platform,
    is_bool,
    is_int,
    is_nonempty_str,
    is_str,
    is_str_list,
    is_table,
    read_provenance,
    read_toml,
    rows,
    top_level,
)

__all__ = [
    "RELEASES_FILE",
    "ZLUDA_DIR",
    "Pin",
    "Redirect",
    "ZludaFile",
    "ZludaRelease",
    "load_release",
    "load_releases_index",
    "release_order",
]

ZLUDA_DIR = "zluda"
RELEASES_FILE = "releases.toml"


@dataclass(frozen=True)
class Pin:
    """A release archive with a known size and sha256 (lower-case hex)."""

    flavour: str
    tag: str
    platform: str
    asset: str
    size: int
    sha256: str
    commit: str = ""
    date: str = ""
    source: str = ""


@dataclass(frozen=True)
class ZludaFile:
    """One file of a ZLUDA release archive (path relative to its top `zluda/`)."""

    platform: str
    path: str
    replaces: str
    backend: str
    library: str | None = None  # function-table key it implements
    link_to: str | None = None  # Linux symlink target (archive-relative)
    notes: str = ""

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Redirect:
    """A library name ZLUDA's launcher (zluda.exe) or zluda_ld redirects."""

    mechanism: str
    platform: str
    bits: int
    name: str
    short_name: str = ""
    is_alias: bool | None = None
    in_system32: bool | None = None
    trace_env_var: str = ""
    source: str = ""


@dataclass(frozen=True, eq=False)
class ZludaRelease:
    tag: str
    commit: str
    date: str
    files: tuple[ZludaFile, ...]
    #: library -> {function name -> "implemented" | "stub"}
    functions: Mapping[str, Mapping[str, str]]
    redirects: tuple[Redirect, ...]
    #: library -> {function name -> detail}, only where the detail says more than the status
    details: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    provenance: Provenance | None = field(default=None, compare=False)
    _index: Mapping[tuple[str, str], ZludaFile] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[tuple[str, str], ZludaFile] = {}
        for f in self.files:
            if "/" in f.path or f.replaces.startswith("none"):
                continue  # trace/…, 32/… and tools/launchers replace nothing an app loads
            if f.link_to is not None and self.resolve_link(f) is None:
                continue  # dangling link (load_release rejects these; direct construction may not)
            key = f.path.lower() if f.platform == "windows" else f.path
            index.setdefault((f.platform, key), f)
        object.__setattr__(self, "_index", MappingProxyType(index))

    @property
    def libraries(self) -> tuple[str, ...]:
        return tuple(self.functions)

    def replacement_for(self, file_name: str, platform: str) -> ZludaFile | None:
        """The top-level release file that stands in for `file_name` (a name or
        path; its basename is compared, case-insensitively on Windows), or None.

        Only top-level runtime files count (not `trace/…`, `32/…`, launchers or
        tools). A Linux symlink row is returned as asked for, once its
        `link_to` chain is known to reach a real file of the release."""
        name = basename(file_name, platform)
        key = name.lower() if platform == "windows" else name
        return self._index.get((platform, key))

    def resolve_link(self, row: ZludaFile) -> ZludaFile | None:
        """Follow `link_to` to the real file (None on a dangling link or a loop)."""
        by_path = {(f.platform, f.path): f for f in self.files}
        seen: set[str] = set()
        while row.link_to is not None:
            if row.path in seen:
                return None
            seen.add(row.path)
            nxt = by_path.get((row.platform, row.link_to))
            if nxt is None:
                return None
            row = nxt
        return row

    def symbol_state(self, library: str, symbol: str) -> str:
        """One of cuda4amd.model.SYMBOL_STATES: `implemented`; `stub` (exported, returns
        NOT_SUPPORTED at run time); `missing` (not exported: a static import of
        it makes the loader refuse the library). A library this release has no
        table for has every symbol missing."""
        return self.functions.get(library, {}).get(symbol, "missing")

    def symbol_detail(self, library: str, symbol: str) -> str | None:
        return self.details.get(library, {}).get(symbol)

    def is_redirected(self, file_name: str, platform: str, bits: int = 64) -> bool:
        """Whether ZLUDA's launcher (Windows) / zluda_ld (Linux) redirects this name."""
        name = basename(file_name, platform)
        if platform == "windows":
            name = name.lower()
            return any(r.platform == platform and r.bits == bits and r.name.lower() == name
                       for r in self.redirects)
        return any(r.platform == platform and r.bits == bits and r.name == name
                   for r in self.redirects)


def release_order(tag: str) -> tuple[int | str, ...]:
    """Order release tags: v6-preview.69 < v6 < v7-preview.9; others after, by name."""
    m = re.fullmatch(r"v(\d+)(?:-preview\.(\d+))?", tag)
    if not m:
        return (1, tag)
    major, preview = int(m.group(1)), m.group(2)
    return (0, major, 0 if preview is not None else 1, int(preview or 0))


# ---------------------------------------------------------------------------
# zluda/releases.toml
# ---------------------------------------------------------------------------

_PIN_REQUIRED: Schema = {"flavour": is_nonempty_str, "tag": is_nonempty_str, "platform": is_str,
                         "asset": is_nonempty_str, "bytes": is_int, "sha256": is_str}
_PIN_OPTIONAL: Schema = {"commit": is_str, "date": is_str, "source": is_str}
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def load_releases_index(path: Path) -> tuple[Provenance, str | None, list[Pin]]:
    doc = read_toml(path)
    prov = read_provenance(path, doc)
    top_level(path, doc, ("provenance", "releases", "pin"))
    default = None
    if "releases" in doc:
        r = check(path, "[releases]", doc["releases"], {}, {"default": is_nonempty_str})
        default = r.get("default")
    pins: list[Pin] = []
    for i, row in enumerate(rows(path, doc, "pin")):
        where = f"pin #{i + 1}"
        check(path, where, row, _PIN_REQUIRED, _PIN_OPTIONAL)
        check_platform(path, where, row["platform"])
        if row["bytes"] <= 0:
            raise RulesError(path, f"{where}: bytes must be positive")
        if not _SHA256_RE.match(row["sha256"]):
            raise RulesError(path, f"{where}: sha256 must be 64 lower-case hex digits (a complete hash), "
                                   f"got {row['sha256']!r}")
        pins.append(Pin(row["flavour"], row["tag"], row["platform"], row["asset"], row["bytes"],
                        row["sha256"], row.get("commit", ""), row.get("date", ""), row.get("source", "")))
    return prov, default, pins


# ---------------------------------------------------------------------------
# zluda/<tag>.toml
# ---------------------------------------------------------------------------

_RELEASE_REQUIRED: Schema = {"tag": is_nonempty_str, "commit": is_str, "date": is_str}
_RELEASE_OPTIONAL: Schema = {"repository": is_str}
_FILE_REQUIRED: Schema = {"platform": is_str, "path": is_nonempty_str, "replaces": is_str,
                          "backend": is_str}
_FILE_OPTIONAL: Schema = {"library": is_nonempty_str, "link_to": is_nonempty_str, "notes": is_str}
_FUNCTIONS_OPTIONAL: Schema = {"implemented": is_str_list, "stub": is_str_list, "detail": is_table}
_REDIRECT_REQUIRED: Schema = {"mechanism": is_nonempty_str, "platform": is_str, "bits": is_int,
                              "name": is_nonempty_str}
_REDIRECT_OPTIONAL: Schema = {"short_name": is_str, "is_alias": is_bool, "in_system32": is_bool,
                              "trace_env_var": is_str, "source": is_str}
_COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$")


def load_release(path: str | os.PathLike[str]) -> ZludaRelease:
    """Parse and validate one zluda/<tag>.toml file."""
    path = Path(path)
    doc = read_toml(path)
    prov = read_provenance(path, doc)
    top_level(path, doc, ("provenance", "release", "file", "functions", "redirect"))
    if "release" not in doc:
        raise RulesError(path, "missing the [release] table (tag, commit, date)")
    rel = check(path, "[release]", doc["release"], _RELEASE_REQUIRED, _RELEASE_OPTIONAL)
    tag = rel["tag"]
    if tag != path.stem:
        raise RulesError(path, f"[release] tag {tag!r} does not match the file name {path.name!r}")
    if not _COMMIT_RE.match(rel["commit"]):
        raise RulesError(path, f"[release] commit must be 7-40 lower-case hex digits, got {rel['commit']!r}")

    functions, details = _release_functions(path, doc)
    files = _release_files(path, doc, functions)
    redirects = _release_redirects(path, doc)

    return ZludaRelease(
        tag=tag,
        commit=rel["commit"],
        date=rel["date"],
        files=tuple(files),
        functions=MappingProxyType(functions),
        redirects=tuple(redirects),
        details=MappingProxyType(details),
        provenance=prov,
    )


def _release_functions(path: Path, doc: dict[str, Any]) -> tuple[dict[str, Mapping[str, str]],
                                                                 dict[str, Mapping[str, str]]]:
    """[functions.<library>]: library -> {function -> state}, and the details."""
    functions: dict[str, Mapping[str, str]] = {}
    details: dict[str, Mapping[str, str]] = {}
    raw_functions = doc.get("functions", {})
    if not isinstance(raw_functions, dict):
        raise RulesError(path, "'functions' must be a table of [functions.<library>] tables")
    for lib, table in raw_functions.items():
        where = f"[functions.{lib}]"
        if not ID_RE.match(lib):
            raise RulesError(path, f"{where}: library key must match {ID_RE.pattern}")
        check(path, where, table, {}, _FUNCTIONS_OPTIONAL)
        states: dict[str, str] = {}
        for status in ("implemented", "stub"):
            for fn in table.get(status, ()):
                if fn in states:
                    if states[fn] != status:
                        raise RulesError(path, f"{where}: function {fn!r} is in both implemented and stub")
                    raise RulesError(path, f"{where}: function {fn!r} is listed twice in {status}")
                states[fn] = status
        detail = table.get("detail", {})
        for fn, text in detail.items():
            if fn not in states:
                raise RulesError(path, f"{where}.detail: {fn!r} is neither implemented nor stub")
            if not isinstance(text, str):
                raise RulesError(path, f"{where}.detail: {fn!r} must be a string")
        functions[lib] = MappingProxyType(states)
        if detail:
            details[lib] = MappingProxyType(dict(detail))
    return functions, details


def _release_files(path: Path, doc: dict[str, Any], functions: Mapping[str, Any]) -> list[ZludaFile]:
    """The [[file]] rows, each link_to reaching a real file of the release."""
    files: list[ZludaFile] = []
    seen_paths: set[tuple[str, str]] = set()
    for i, row in enumerate(rows(path, doc, "file")):
        where = f"file #{i + 1}"
        if isinstance(row, dict) and isinstance(row.get("path"), str):
            where = f"file {row['path']!r}"
        check(path, where, row, _FILE_REQUIRED, _FILE_OPTIONAL)
        platform = check_platform(path, where, row["platform"])
        p = row["path"]
        if p.startswith("/") or "\\" in p or ".." in p.split("/"):
            raise RulesError(path, f"{where}: path must be relative, '/'-separated, without '..'")
        key = (platform, p.lower() if platform == "windows" else p)
        if key in seen_paths:
            raise RulesError(path, f"{where}: duplicate {platform} file")
        seen_paths.add(key)
        lib = row.get("library")
        if lib is not None and lib not in functions:
            raise RulesError(path, f"{where}: library {lib!r} has no [functions.{lib}] table")
        files.append(ZludaFile(platform, p, row["replaces"], row["backend"], lib, row.get("link_to"),
                               row.get("notes", "")))

    by_path = {(f.platform, f.path): f for f in files}
    for f in files:
        if f.link_to is None:
            continue
        seen = {f.path}
        cur = f
        while cur.link_to is not None:
            nxt = by_path.get((cur.platform, cur.link_to))
            if nxt is None:
                raise RulesError(path, f"file {f.path!r}: link_to {cur.link_to!r} names no file of this release")
            if nxt.path in seen:
                raise RulesError(path, f"file {f.path!r}: link_to loop")
            seen.add(nxt.path)
            cur = nxt
    return files


def _release_redirects(path: Path, doc: dict[str, Any]) -> list[Redirect]:
    redirects: list[Redirect] = []
    for i, row in enumerate(rows(path, doc, "redirect")):
        where = f"redirect #{i + 1}"
        check(path, where, row, _REDIRECT_REQUIRED, _REDIRECT_OPTIONAL)
        platform = check_platform(path, where, row["platform"])
        if row["bits"] not in (32, 64):
            raise RulesError(path, f"{where}: bits must be 32 or 64")
        redirects.append(Redirect(row["mechanism"], platform, row["bits"], row["name"],
                                  row.get("short_name", ""), row.get("is_alias"), row.get("in_system32"),
                                  row.get("trace_env_var", ""), row.get("source", "")))
    return redirects
