"""Load and validate cuda4amd's rule files (TOML); see docs/rules.md.

    rules = load_rules()                       # shipped rules (+ extra folders)
    fam = rules.family_for("cublas64_12.dll", "windows")
    rel = rules.release(rules.default_release) # parsed on first use, cached on `rules`
    rel.replacement_for("cublas64_12.dll", "windows")
    rel.symbol_state("blas", "cublasSgemm_v2")  # "implemented" | "stub" | "missing"

Everything here is a pure function or a frozen dataclass; there is no module
state. The only caches live on instances: a RuleSet keeps the release tables
and combined name regexes it built on first use, a Family its compiled
patterns. Invalid data raises RulesError naming the file and the problem.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Literal, Mapping, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "PLATFORMS", "ROUTES", "SYSTEM_KINDS", "SYMBOL_STATES",
    "RulesError", "Provenance", "Family", "UnknownPattern", "SystemGroup", "Pin",
    "ZludaFile", "Redirect", "ZludaRelease", "RuleSet",
    "load_rules", "load_release", "shipped_rules_dir",
]

Platform = Literal["windows", "linux"]
PLATFORMS: tuple[str, ...] = ("windows", "linux")
#: routes of a dependency edge (DESIGN.md §3)
ROUTES: tuple[str, ...] = ("redirect", "passthrough", "stub", "blocked", "unknown")
#: routes a family may default to when ZLUDA ships no replacement for the file
DEFAULT_ROUTES: tuple[str, ...] = ("passthrough", "stub", "blocked", "unknown")
SYSTEM_KINDS: tuple[str, ...] = ("system", "api-set", "redistributable", "host")
SYMBOL_STATES: tuple[str, ...] = ("implemented", "stub", "missing")

FAMILIES_FILE = "families.toml"
SYSTEM_FILE = "system.toml"
ZLUDA_DIR = "zluda"
RELEASES_FILE = "releases.toml"
GPUS_FILE = "gpus.toml"  # GPU profiles, loaded by cuda4amd.host.profiles


class RulesError(Exception):
    """Invalid rule data: `path` is the offending file, `message` the problem."""

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        self.path = Path(path)
        self.message = message
        super().__init__(f"{self.path}: {message}")

    def __reduce__(self):  # keep picklable (multiprocessing) despite two args
        return (type(self), (self.path, self.message))


# ---------------------------------------------------------------------------
# data classes
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Provenance:
    """Where a rule file's facts come from (its mandatory [provenance] table)."""

    path: Path
    generated_by: str
    sources: tuple[str, ...]
    upstream: tuple[str, ...] = ()
    date: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Family:
    """An NVIDIA library family and how ZLUDA treats it.

    `windows_patterns` / `linux_patterns` are the regexes as written in the
    rules (anchored with '^'); `windows` / `linux` are the compiled patterns
    (Windows ones case-insensitive), compiled on first access. Name lookups
    go through RuleSet.family_for, which uses one combined regex per platform.
    """

    id: str
    name: str
    windows_patterns: tuple[str, ...]
    linux_patterns: tuple[str, ...]
    zluda_libraries: tuple[str, ...]
    default_route: str
    amd_equivalent: str
    zluda_status: str
    advice: str
    evidence: str
    cuda_versions: str = ""
    notes: tuple[str, ...] = ()
    #: regex of the C symbols the family's libraries export (None: not known)
    symbol_pattern_source: str | None = None
    source: Path | None = field(default=None, compare=False)

    @cached_property
    def symbol_pattern(self) -> re.Pattern[str] | None:
        """Compiled `symbol_pattern_source` (case-sensitive), or None."""
        src = self.symbol_pattern_source
        return None if src is None else re.compile(src)

    @cached_property
    def windows(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p, re.IGNORECASE) for p in self.windows_patterns)

    @cached_property
    def linux(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p) for p in self.linux_patterns)

    def patterns(self, platform: str) -> tuple[re.Pattern[str], ...]:
        return self.windows if _check_platform(platform) == "windows" else self.linux

    def pattern_sources(self, platform: str) -> tuple[str, ...]:
        return self.windows_patterns if _check_platform(platform) == "windows" else self.linux_patterns

    def matches(self, file_name: str, platform: str) -> bool:
        name = _basename(file_name, platform)
        return any(p.match(name) for p in self.patterns(platform))


@dataclass(frozen=True)
class UnknownPattern:
    """A name that looks like an NVIDIA CUDA library but matches no family."""

    platform: str
    pattern: str
    note: str = ""
    source: Path | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SystemGroup:
    platform: str
    kind: str
    names: frozenset[str] = frozenset()  # lower-cased on windows
    prefixes: tuple[str, ...] = ()  # lower-cased on windows
    patterns: tuple[re.Pattern[str], ...] = ()
    note: str = ""


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
        name = _basename(file_name, platform)
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
        """One of SYMBOL_STATES: `implemented`; `stub` (exported, returns
        NOT_SUPPORTED at run time); `missing` (not exported: a static import of
        it makes the loader refuse the library). A library this release has no
        table for has every symbol missing."""
        return self.functions.get(library, {}).get(symbol, "missing")

    def symbol_detail(self, library: str, symbol: str) -> str | None:
        return self.details.get(library, {}).get(symbol)

    def is_redirected(self, file_name: str, platform: str, bits: int = 64) -> bool:
        """Whether ZLUDA's launcher (Windows) / zluda_ld (Linux) redirects this name."""
        name = _basename(file_name, platform)
        if platform == "windows":
            name = name.lower()
            return any(r.platform == platform and r.bits == bits and r.name.lower() == name
                       for r in self.redirects)
        return any(r.platform == platform and r.bits == bits and r.name == name
                   for r in self.redirects)


class _Matcher:
    """First-match lookup of a name over ordered (label, regex) entries.

    Normally one combined regex `(?P<_0>(?:a)|(?:b))|(?P<_1>...)`: a single
    compile validates all patterns at once and is about twice as fast to build
    as one compile per pattern, and one match per lookup. Patterns that use
    group references, named groups or inline flags cannot be combined safely;
    then each is compiled and tried in order. Patterns are '^'-anchored, so
    `match` is used. Built on first use and kept on its RuleSet."""

    __slots__ = ("_combined", "_labels", "_each")

    def __init__(self, entries: Sequence[tuple[Any, Sequence[str], Path | None, str]], flags: int) -> None:
        self._labels: list[Any] = []
        self._combined: re.Pattern[str] | None = None
        self._each: list[tuple[Any, re.Pattern[str]]] | None = None
        parts: list[str] = []
        simple = True
        for label, sources, origin, where in entries:
            for src in sources:
                if not src.startswith("^"):
                    raise RulesError(origin or "<rules>", f"{where}: pattern {src!r} must be anchored with '^'")
                if _UNSAFE_TO_COMBINE.search(src) or not _balanced(src):
                    simple = False
            if sources:
                parts.append(f"(?P<_{len(self._labels)}>" + "|".join(f"(?:{x})" for x in sources) + ")")
                self._labels.append(label)
        if simple and parts:
            try:
                self._combined = re.compile("|".join(parts), flags)
                return
            except (re.error, RecursionError, OverflowError):
                pass
        each: list[tuple[Any, re.Pattern[str]]] = []
        for label, sources, origin, where in entries:
            for src in sources:
                try:
                    each.append((label, re.compile(src, flags)))
                except (re.error, RecursionError, OverflowError) as e:
                    raise RulesError(origin or "<rules>", f"{where}: bad regex {src!r}: {e}") from None
        self._each = each

    def __call__(self, name: str) -> Any:
        if self._combined is not None:
            m = self._combined.match(name)
            return None if m is None else self._labels[int(m.lastgroup[1:])]
        for label, pattern in self._each or ():
            if pattern.match(name):
                return label
        return None


# `(?` not followed by a plain group or lookaround, or a numbered backreference
_UNSAFE_TO_COMBINE = re.compile(r"\\[1-9]|\(\?(?![:=!]|<[=!])")


def _balanced(src: str) -> bool:
    """Parentheses balance outside escapes and character classes (so that a
    pattern cannot close the group it is wrapped in when combined)."""
    depth, i, n = 0, 0, len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            if i + 1 >= n:
                return False  # a trailing backslash would escape the wrapper's ')'
            i += 2
            continue
        if c == "[":
            i += 1
            if i < n and src[i] == "^":
                i += 1
            if i < n and src[i] == "]":
                i += 1
            while i < n and src[i] != "]":
                i += 2 if src[i] == "\\" else 1
            if i >= n:
                return False
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return False
        i += 1
    return depth == 0


@dataclass(frozen=True, eq=False)
class RuleSet:
    families: tuple[Family, ...]
    unknown: tuple[UnknownPattern, ...]
    system: tuple[SystemGroup, ...]
    default_release: str
    release_tags: tuple[str, ...]
    pins: tuple[Pin, ...]
    provenance: tuple[Provenance, ...] = ()
    release_paths: Mapping[str, Path] = field(default_factory=dict, repr=False)
    # per-instance cache of parsed releases (not global state)
    _releases: dict[str, ZludaRelease] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _system_names: Mapping[tuple[str, str], str] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    # per-instance cache of the combined name matchers, built on first use
    _matchers: dict[tuple[str, str], _Matcher] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names: dict[tuple[str, str], str] = {}
        for g in self.system:
            for n in g.names:
                names.setdefault((g.platform, n), g.kind)
        object.__setattr__(self, "_system_names", MappingProxyType(names))

    def _matcher(self, kind: str, platform: str) -> _Matcher:
        """The combined regex for families / unknown names of one platform, or
        for symbols (platform ""), compiled on first use. Patterns of extra
        rule folders were already compiled by load_rules (so errors show at
        load); the shipped ones are compiled by the tests (RuleSet.validate)."""
        key = (kind, platform)
        m = self._matchers.get(key)
        if m is None:
            flags = re.IGNORECASE if platform == "windows" else 0
            if kind == "family":
                entries = [(f, f.pattern_sources(platform), f.source, f"family {f.id!r} {platform}")
                           for f in self.families]
            elif kind == "unknown":
                entries = [(u, (u.pattern,), u.source, f"unknown {u.pattern!r}")
                           for u in self.unknown if u.platform == platform]
            else:
                entries = [(f, (f.symbol_pattern_source,), f.source, f"family {f.id!r} symbol_pattern")
                           for f in self.families if f.symbol_pattern_source is not None]
            m = self._matchers[key] = _Matcher(entries, flags)
        return m

    def validate(self) -> None:
        """Check everything load_rules leaves for later: compile every name and
        symbol pattern and load every release table. Raises RulesError."""
        for platform in PLATFORMS:
            self._matcher("family", platform)
            self._matcher("unknown", platform)
            for fam in self.families:
                fam.patterns(platform)
        self._matcher("symbol", "")
        for tag in self.release_tags:
            self.release(tag)

    def release(self, tag: str) -> ZludaRelease:
        """The release table for `tag`, parsed from its file on first use."""
        cached = self._releases.get(tag)
        if cached is not None:
            return cached
        path = self.release_paths.get(tag)
        if path is None:
            where = next(iter(self.release_paths.values()), Path(ZLUDA_DIR)).parent
            raise RulesError(where, f"unknown ZLUDA release {tag!r}; known: {', '.join(self.release_tags)}")
        rel = load_release(path)
        self._releases[tag] = rel
        return rel

    def family(self, family_id: str) -> Family | None:
        return next((f for f in self.families if f.id == family_id), None)

    def family_for(self, file_name: str, platform: str) -> Family | None:
        """The family whose patterns match the basename of `file_name` (first
        in rule order), case-insensitively on Windows; None if none does."""
        name = _basename(file_name, platform)  # validates platform
        return self._matcher("family", platform)(name)

    def family_for_symbol(self, symbol: str) -> Family | None:
        """The family whose `symbol_pattern` claims this C symbol name (first in
        rule order, case-sensitive), or None."""
        return self._matcher("symbol", "")(symbol)

    def is_unknown_cuda(self, file_name: str, platform: str) -> bool:
        """Looks like an NVIDIA CUDA library but matches no family."""
        name = _basename(file_name, platform)
        if self._matcher("family", platform)(name) is not None:
            return False
        return self._matcher("unknown", platform)(name) is not None

    def system_kind(self, file_name: str, platform: str) -> str | None:
        """The SYSTEM_KINDS entry ("system", "api-set", "redistributable",
        "host") of a library that is not a CUDA finding, or None."""
        name = _basename(file_name, platform)
        key = name.lower() if platform == "windows" else name
        kind = self._system_names.get((platform, key))
        if kind is not None:
            return kind
        for g in self.system:
            if g.platform != platform:
                continue
            if any(key.startswith(p) for p in g.prefixes) or any(p.search(name) for p in g.patterns):
                return g.kind
        return None

    def pin_for(self, tag: str, platform: str) -> Pin | None:
        return next((p for p in self.pins if p.tag == tag and p.platform == platform), None)


# ---------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------

def _check_platform(platform: str) -> str:
    if platform not in PLATFORMS:
        raise ValueError(f"platform must be one of {PLATFORMS}, not {platform!r}")
    return platform


def _basename(file_name: str, platform: str) -> str:
    if _check_platform(platform) == "windows":
        file_name = file_name.replace("\\", "/")
    return file_name.rsplit("/", 1)[-1]


def shipped_rules_dir() -> Path:
    """The folder of the rules shipped with cuda4amd (the data package `cuda4amd.ruledata`)."""
    from cuda4amd import ruledata

    return Path(ruledata.__file__).resolve().parent


def _tag_key(tag: str) -> tuple:
    """Order release tags: v6-preview.69 < v6 < v7-preview.9; others after, by name."""
    m = re.fullmatch(r"v(\d+)(?:-preview\.(\d+))?", tag)
    if not m:
        return (1, tag)
    major, preview = int(m.group(1)), m.group(2)
    return (0, major, 0 if preview is not None else 1, int(preview or 0))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise RulesError(path, f"not valid TOML: {e}") from None
    except OSError as e:
        raise RulesError(path, f"cannot read: {e.strerror or e}") from None


# type checkers for the schema tables
def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_nonempty_str(v: Any) -> bool:
    return isinstance(v, str) and v.strip() != ""


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_table(v: Any) -> bool:
    return isinstance(v, dict)


_TYPE_NAMES: dict[Callable[[Any], bool], str] = {
    _is_str: "a string", _is_nonempty_str: "a non-empty string",
    _is_str_list: "a list of strings", _is_int: "an integer", _is_bool: "true or false",
    _is_table: "a table",
}

Schema = Mapping[str, Callable[[Any], bool]]


def _check(path: Path, where: str, obj: Any, required: Schema, optional: Schema = {}) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise RulesError(path, f"{where}: expected a table, got {type(obj).__name__}")
    unknown = [k for k in obj if k not in required and k not in optional]
    if unknown:
        allowed = ", ".join([*required, *optional])
        raise RulesError(path, f"{where}: unknown key {unknown[0]!r} (allowed: {allowed})")
    for k in required:
        if k not in obj:
            raise RulesError(path, f"{where}: missing key {k!r}")
    for k, v in obj.items():
        ok = required.get(k) or optional[k]
        if not ok(v):
            raise RulesError(path, f"{where}: {k!r} must be {_TYPE_NAMES.get(ok, 'valid')}, got {v!r}")
    return obj


def _check_anchored(path: Path, where: str, pattern: str) -> None:
    if not pattern.startswith("^"):
        raise RulesError(path, f"{where}: pattern {pattern!r} must be anchored with '^'")


def _compile(path: Path, where: str, pattern: str, flags: int = 0) -> re.Pattern[str]:
    _check_anchored(path, where, pattern)
    try:
        return re.compile(pattern, flags)
    except re.error as e:
        raise RulesError(path, f"{where}: bad regex {pattern!r}: {e}") from None


def _check_platform_value(path: Path, where: str, value: str) -> str:
    if value not in PLATFORMS:
        raise RulesError(path, f"{where}: platform must be one of {', '.join(PLATFORMS)}, got {value!r}")
    return value


_PROVENANCE_REQUIRED: Schema = {"generated_by": _is_nonempty_str, "sources": _is_str_list}
_PROVENANCE_OPTIONAL: Schema = {"upstream": _is_str_list, "date": _is_str, "notes": _is_str_list}


def _provenance(path: Path, doc: dict[str, Any]) -> Provenance:
    if "provenance" not in doc:
        raise RulesError(path, "missing the mandatory [provenance] table (generated_by, sources, ...)")
    p = _check(path, "[provenance]", doc["provenance"], _PROVENANCE_REQUIRED, _PROVENANCE_OPTIONAL)
    if not p["sources"] or not all(s.strip() for s in p["sources"]):
        raise RulesError(path, "[provenance]: 'sources' must list at least one non-empty source")
    return Provenance(
        path=path,
        generated_by=p["generated_by"],
        sources=tuple(p["sources"]),
        upstream=tuple(p.get("upstream", ())),
        date=p.get("date"),
        notes=tuple(p.get("notes", ())),
    )


def _top_level(path: Path, doc: dict[str, Any], allowed: Sequence[str]) -> None:
    for k in doc:
        if k not in allowed:
            raise RulesError(path, f"unknown top-level key {k!r} (allowed: {', '.join(allowed)})")


def _rows(path: Path, doc: dict[str, Any], key: str) -> list[Any]:
    rows = doc.get(key, [])
    if not isinstance(rows, list):
        raise RulesError(path, f"{key!r} must be an array of tables ([[{key}]])")
    return rows


_ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")

# ---------------------------------------------------------------------------
# families.toml
# ---------------------------------------------------------------------------

_FAMILY_REQUIRED: Schema = {
    "id": _is_nonempty_str, "name": _is_nonempty_str, "windows": _is_str_list, "linux": _is_str_list,
    "zluda_libraries": _is_str_list, "default_route": _is_str, "amd_equivalent": _is_str,
    "zluda_status": _is_str, "advice": _is_nonempty_str, "evidence": _is_str,
}
_FAMILY_OPTIONAL: Schema = {"cuda_versions": _is_str, "notes": _is_str_list, "symbol_pattern": _is_str}
_UNKNOWN_REQUIRED: Schema = {"platform": _is_str, "pattern": _is_str}
_UNKNOWN_OPTIONAL: Schema = {"note": _is_str}


def _load_families(path: Path) -> tuple[Provenance, list[Family], list[UnknownPattern]]:
    doc = _read_toml(path)
    prov = _provenance(path, doc)
    _top_level(path, doc, ("provenance", "family", "unknown"))
    families: list[Family] = []
    seen: set[str] = set()
    for i, row in enumerate(_rows(path, doc, "family")):
        where = f"family #{i + 1}"
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            where = f"family {row['id']!r}"
        _check(path, where, row, _FAMILY_REQUIRED, _FAMILY_OPTIONAL)
        fid = row["id"]
        if not _ID_RE.match(fid):
            raise RulesError(path, f"{where}: id must match {_ID_RE.pattern}")
        if fid in seen:
            raise RulesError(path, f"duplicate family id {fid!r}")
        seen.add(fid)
        if row["default_route"] not in DEFAULT_ROUTES:
            raise RulesError(path, f"{where}: default_route must be one of {', '.join(DEFAULT_ROUTES)}, "
                                   f"got {row['default_route']!r}")
        for lib in row["zluda_libraries"]:
            if not _ID_RE.match(lib):
                raise RulesError(path, f"{where}: zluda_libraries entry {lib!r} is not a function-table key")
        if not row["windows"] and not row["linux"]:
            raise RulesError(path, f"{where}: needs at least one windows or linux pattern")
        for platform in PLATFORMS:
            for src in row[platform]:
                _check_anchored(path, f"{where} {platform}", src)
        if "symbol_pattern" in row:
            _check_anchored(path, f"{where} symbol_pattern", row["symbol_pattern"])
        families.append(Family(
            id=fid,
            name=row["name"],
            windows_patterns=tuple(row["windows"]),
            linux_patterns=tuple(row["linux"]),
            zluda_libraries=tuple(row["zluda_libraries"]),
            default_route=row["default_route"],
            amd_equivalent=row["amd_equivalent"],
            zluda_status=row["zluda_status"],
            advice=row["advice"],
            evidence=row["evidence"],
            cuda_versions=row.get("cuda_versions", ""),
            notes=tuple(row.get("notes", ())),
            symbol_pattern_source=row.get("symbol_pattern"),
            source=path,
        ))
    unknown: list[UnknownPattern] = []
    for i, row in enumerate(_rows(path, doc, "unknown")):
        where = f"unknown #{i + 1}"
        _check(path, where, row, _UNKNOWN_REQUIRED, _UNKNOWN_OPTIONAL)
        platform = _check_platform_value(path, where, row["platform"])
        _check_anchored(path, where, row["pattern"])
        unknown.append(UnknownPattern(platform, row["pattern"], row.get("note", ""), path))
    return prov, families, unknown


# ---------------------------------------------------------------------------
# system.toml
# ---------------------------------------------------------------------------

_GROUP_REQUIRED: Schema = {"platform": _is_str, "kind": _is_str}
_GROUP_OPTIONAL: Schema = {"names": _is_str_list, "prefixes": _is_str_list, "patterns": _is_str_list,
                           "note": _is_str}


def _load_system(path: Path) -> tuple[Provenance, list[SystemGroup]]:
    doc = _read_toml(path)
    prov = _provenance(path, doc)
    _top_level(path, doc, ("provenance", "group"))
    groups: list[SystemGroup] = []
    for i, row in enumerate(_rows(path, doc, "group")):
        where = f"group #{i + 1}"
        _check(path, where, row, _GROUP_REQUIRED, _GROUP_OPTIONAL)
        platform = _check_platform_value(path, where, row["platform"])
        if row["kind"] not in SYSTEM_KINDS:
            raise RulesError(path, f"{where}: kind must be one of {', '.join(SYSTEM_KINDS)}, got {row['kind']!r}")
        if not (row.get("names") or row.get("prefixes") or row.get("patterns")):
            raise RulesError(path, f"{where}: needs names, prefixes or patterns")
        win = platform == "windows"
        names = [n.lower() if win else n for n in row.get("names", ())]
        prefixes = [p.lower() if win else p for p in row.get("prefixes", ())]
        if any(not n or "/" in n or "\\" in n for n in names + prefixes):
            raise RulesError(path, f"{where}: names and prefixes must be plain, non-empty file names")
        flags = re.IGNORECASE if win else 0
        groups.append(SystemGroup(
            platform=platform,
            kind=row["kind"],
            names=frozenset(names),
            prefixes=tuple(prefixes),
            patterns=tuple(_compile(path, where, p, flags) for p in row.get("patterns", ())),
            note=row.get("note", ""),
        ))
    return prov, groups


# ---------------------------------------------------------------------------
# zluda/releases.toml
# ---------------------------------------------------------------------------

_PIN_REQUIRED: Schema = {"flavour": _is_nonempty_str, "tag": _is_nonempty_str, "platform": _is_str,
                         "asset": _is_nonempty_str, "bytes": _is_int, "sha256": _is_str}
_PIN_OPTIONAL: Schema = {"commit": _is_str, "date": _is_str, "source": _is_str}
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def _load_releases_index(path: Path) -> tuple[Provenance, str | None, list[Pin]]:
    doc = _read_toml(path)
    prov = _provenance(path, doc)
    _top_level(path, doc, ("provenance", "releases", "pin"))
    default = None
    if "releases" in doc:
        r = _check(path, "[releases]", doc["releases"], {}, {"default": _is_nonempty_str})
        default = r.get("default")
    pins: list[Pin] = []
    for i, row in enumerate(_rows(path, doc, "pin")):
        where = f"pin #{i + 1}"
        _check(path, where, row, _PIN_REQUIRED, _PIN_OPTIONAL)
        _check_platform_value(path, where, row["platform"])
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

_RELEASE_REQUIRED: Schema = {"tag": _is_nonempty_str, "commit": _is_str, "date": _is_str}
_RELEASE_OPTIONAL: Schema = {"repository": _is_str}
_FILE_REQUIRED: Schema = {"platform": _is_str, "path": _is_nonempty_str, "replaces": _is_str,
                          "backend": _is_str}
_FILE_OPTIONAL: Schema = {"library": _is_nonempty_str, "link_to": _is_nonempty_str, "notes": _is_str}
_FUNCTIONS_OPTIONAL: Schema = {"implemented": _is_str_list, "stub": _is_str_list, "detail": _is_table}
_REDIRECT_REQUIRED: Schema = {"mechanism": _is_nonempty_str, "platform": _is_str, "bits": _is_int,
                              "name": _is_nonempty_str}
_REDIRECT_OPTIONAL: Schema = {"short_name": _is_str, "is_alias": _is_bool, "in_system32": _is_bool,
                              "trace_env_var": _is_str, "source": _is_str}
_COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$")


def load_release(path: str | os.PathLike[str]) -> ZludaRelease:
    """Parse and validate one zluda/<tag>.toml file."""
    path = Path(path)
    doc = _read_toml(path)
    prov = _provenance(path, doc)
    _top_level(path, doc, ("provenance", "release", "file", "functions", "redirect"))
    if "release" not in doc:
        raise RulesError(path, "missing the [release] table (tag, commit, date)")
    rel = _check(path, "[release]", doc["release"], _RELEASE_REQUIRED, _RELEASE_OPTIONAL)
    tag = rel["tag"]
    if tag != path.stem:
        raise RulesError(path, f"[release] tag {tag!r} does not match the file name {path.name!r}")
    if not _COMMIT_RE.match(rel["commit"]):
        raise RulesError(path, f"[release] commit must be 7-40 lower-case hex digits, got {rel['commit']!r}")

    functions: dict[str, Mapping[str, str]] = {}
    details: dict[str, Mapping[str, str]] = {}
    raw_functions = doc.get("functions", {})
    if not isinstance(raw_functions, dict):
        raise RulesError(path, "'functions' must be a table of [functions.<library>] tables")
    for lib, table in raw_functions.items():
        where = f"[functions.{lib}]"
        if not _ID_RE.match(lib):
            raise RulesError(path, f"{where}: library key must match {_ID_RE.pattern}")
        _check(path, where, table, {}, _FUNCTIONS_OPTIONAL)
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

    files: list[ZludaFile] = []
    seen_paths: set[tuple[str, str]] = set()
    for i, row in enumerate(_rows(path, doc, "file")):
        where = f"file #{i + 1}"
        if isinstance(row, dict) and isinstance(row.get("path"), str):
            where = f"file {row['path']!r}"
        _check(path, where, row, _FILE_REQUIRED, _FILE_OPTIONAL)
        platform = _check_platform_value(path, where, row["platform"])
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

    redirects: list[Redirect] = []
    for i, row in enumerate(_rows(path, doc, "redirect")):
        where = f"redirect #{i + 1}"
        _check(path, where, row, _REDIRECT_REQUIRED, _REDIRECT_OPTIONAL)
        platform = _check_platform_value(path, where, row["platform"])
        if row["bits"] not in (32, 64):
            raise RulesError(path, f"{where}: bits must be 32 or 64")
        redirects.append(Redirect(row["mechanism"], platform, row["bits"], row["name"],
                                  row.get("short_name", ""), row.get("is_alias"), row.get("in_system32"),
                                  row.get("trace_env_var", ""), row.get("source", "")))

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


# ---------------------------------------------------------------------------
# load_rules
# ---------------------------------------------------------------------------

def _compile_all(path: Path, families: Sequence[Family], unknown: Sequence[UnknownPattern]) -> None:
    """Compile each pattern of a user's families.toml now, so that a bad regex
    is reported by load_rules (the shipped file is checked by the tests)."""
    for fam in families:
        for platform in PLATFORMS:
            flags = re.IGNORECASE if platform == "windows" else 0
            for src in fam.pattern_sources(platform):
                _compile(path, f"family {fam.id!r} {platform}", src, flags)
        if fam.symbol_pattern_source is not None:
            _compile(path, f"family {fam.id!r} symbol_pattern", fam.symbol_pattern_source)
    for u in unknown:
        _compile(path, f"unknown {u.pattern!r}", u.pattern, re.IGNORECASE if u.platform == "windows" else 0)


def _toml_files(folder: Path) -> list[Path]:
    try:
        return sorted(Path(e.path) for e in os.scandir(folder) if e.is_file() and e.name.endswith(".toml"))
    except FileNotFoundError:
        return []


def load_rules(extra_dirs: Sequence[str | os.PathLike[str]] = ()) -> RuleSet:
    """Load the shipped rules, then each folder of `extra_dirs` in order.

    Every folder has the same layout, each file optional in an extra folder:
    ``families.toml``, ``system.toml``, ``zluda/releases.toml``,
    ``zluda/<tag>.toml``. Extra folders add families, unknown-name patterns,
    system groups, releases and pins; re-using a family id, a release tag or a
    pin raises RulesError. An extra ``zluda/releases.toml`` may set
    ``[releases] default`` (the last one wins). Release tables are parsed
    only when ``RuleSet.release(tag)`` first asks for them.
    """
    shipped = shipped_rules_dir()
    folders = [shipped, *(Path(d) for d in extra_dirs)]
    families: list[Family] = []
    family_src: dict[str, Path] = {}
    unknown: list[UnknownPattern] = []
    system: list[SystemGroup] = []
    pins: list[Pin] = []
    provenance: list[Provenance] = []
    release_paths: dict[str, Path] = {}
    default: str | None = None
    default_src: Path | None = None

    for folder in folders:
        is_shipped = folder == shipped
        if not folder.is_dir():
            raise RulesError(folder, "rules folder does not exist")
        top = {p.name: p for p in _toml_files(folder)}
        for name, p in top.items():
            if name not in (FAMILIES_FILE, SYSTEM_FILE, GPUS_FILE):
                raise RulesError(p, f"unknown rules file (expected {FAMILIES_FILE}, {SYSTEM_FILE}, {GPUS_FILE}, "
                                    f"{ZLUDA_DIR}/{RELEASES_FILE} or {ZLUDA_DIR}/<tag>.toml)")
        for required in (FAMILIES_FILE, SYSTEM_FILE):
            if is_shipped and required not in top:
                raise RulesError(folder / required, "shipped rules file is missing")

        if FAMILIES_FILE in top:
            prov, fams, unk = _load_families(top[FAMILIES_FILE])
            provenance.append(prov)
            if not is_shipped:
                _compile_all(top[FAMILIES_FILE], fams, unk)
            for fam in fams:
                if fam.id in family_src:
                    raise RulesError(top[FAMILIES_FILE], f"duplicate family id {fam.id!r} "
                                                         f"(already defined in {family_src[fam.id]})")
                family_src[fam.id] = top[FAMILIES_FILE]
            families += fams
            unknown += unk
        if SYSTEM_FILE in top:
            prov, groups = _load_system(top[SYSTEM_FILE])
            provenance.append(prov)
            known = {(g.platform, n): g.kind for g in system for n in g.names}
            for g in groups:
                for n in g.names:
                    if known.get((g.platform, n), g.kind) != g.kind:
                        raise RulesError(top[SYSTEM_FILE], f"{g.platform} name {n!r} is already of kind "
                                                           f"{known[(g.platform, n)]!r}, not {g.kind!r}")
                    known[(g.platform, n)] = g.kind
            system += groups

        zfiles = _toml_files(folder / ZLUDA_DIR)
        names = {p.name for p in zfiles}
        if is_shipped and RELEASES_FILE not in names:
            raise RulesError(folder / ZLUDA_DIR / RELEASES_FILE, "shipped rules file is missing")
        for p in zfiles:
            if p.name == RELEASES_FILE:
                prov, d, ps = _load_releases_index(p)
                provenance.append(prov)
                if d is not None:
                    default, default_src = d, p
                for pin in ps:
                    if any((q.tag, q.platform, q.asset) == (pin.tag, pin.platform, pin.asset) for q in pins):
                        raise RulesError(p, f"duplicate pin for {pin.tag} {pin.platform} {pin.asset}")
                pins += ps
                continue
            tag = p.stem
            if tag in release_paths:
                raise RulesError(p, f"ZLUDA release {tag!r} is already defined in {release_paths[tag]}")
            release_paths[tag] = p

    tags = tuple(sorted(release_paths, key=_tag_key))
    if default is None:
        raise RulesError(shipped / ZLUDA_DIR / RELEASES_FILE, "no [releases] default is set")
    if default not in release_paths:
        raise RulesError(default_src or shipped, f"default release {default!r} has no zluda/{default}.toml; "
                                                 f"known: {', '.join(tags)}")
    return RuleSet(
        families=tuple(families),
        unknown=tuple(unknown),
        system=tuple(system),
        default_release=default,
        release_tags=tags,
        pins=tuple(pins),
        provenance=tuple(provenance),
        release_paths=MappingProxyType(release_paths),
    )
