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
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Mapping, Sequence

from cuda4amd.model import SYMBOL_STATES
from cuda4amd.rules.frameworks import Framework, load_frameworks
from cuda4amd.rules.gpus import GpuProfiles, load_profiles
from cuda4amd.rules.kernels import KERNELS_DIR, PtxFacts, load_ptx_files
from cuda4amd.rules.runtime import (
    GENERATORS_FILE,
    NAMES_FILE,
    RUNTIME_DIR,
    Generator,
    NameRules,
    load_generator_files,
    load_name_files,
)
from cuda4amd.rules.validate import (
    ID_RE,
    PLATFORMS,
    Provenance,
    RulesError,
    Schema,
    check,
    check_anchored,
    check_platform,
    compile_pattern,
    is_bool,
    is_int,
    is_nonempty_str,
    is_str,
    is_str_list,
    is_table,
    read_provenance,
    read_toml,
    rows,
    shipped_rules_dir,
    top_level,
)

__all__ = [
    "PLATFORMS", "ROUTES", "SYSTEM_KINDS", "SYMBOL_STATES",
    "RulesError", "Provenance", "Family", "UnknownPattern", "SystemGroup", "Pin",
    "ZludaFile", "Redirect", "ZludaRelease", "RuleSet",
    "load_rules", "load_release", "shipped_rules_dir",
]

Platform = Literal["windows", "linux"]
#: routes of a dependency edge (DESIGN.md §3)
ROUTES: tuple[str, ...] = ("redirect", "passthrough", "stub", "blocked", "unknown")
#: routes a family may default to when ZLUDA ships no replacement for the file
DEFAULT_ROUTES: tuple[str, ...] = ("passthrough", "stub", "blocked", "unknown")
SYSTEM_KINDS: tuple[str, ...] = ("system", "api-set", "redistributable", "host")

FAMILIES_FILE = "families.toml"
SYSTEM_FILE = "system.toml"
ZLUDA_DIR = "zluda"
RELEASES_FILE = "releases.toml"
GPUS_FILE = "gpus.toml"  # GPU profiles (cuda4amd.rules.gpus)
FRAMEWORKS_DIR = "frameworks"  # one file per Python framework (cuda4amd.rules.frameworks)


# ---------------------------------------------------------------------------
# data classes
# ---------------------------------------------------------------------------

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
    #: the AMD library ZLUDA's replacement calls, which the host must have
    #: (a key of cuda4amd.host.sdk.LIBRARIES: "rocblas", "miopen", ...); None: none
    host_library: str | None = None
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
            return None if m is None or m.lastgroup is None else self._labels[int(m.lastgroup[1:])]
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
    #: every rules folder's gpus.toml, shipped first; a later file adds or replaces profiles
    gpu_files: tuple[Path, ...] = ()
    #: every rules folder's frameworks/ folder, shipped first; a later folder's framework wins
    framework_dirs: tuple[Path, ...] = ()
    #: every rules folder's kernels/ folder, shipped first; a later folder's row for a tag wins
    kernel_dirs: tuple[Path, ...] = ()
    #: every rules folder's runtime/ folder, shipped first (names.toml, generators.toml)
    runtime_dirs: tuple[Path, ...] = ()
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
            entries: list[tuple[Any, Sequence[str], Path | None, str]]
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

    @cached_property
    def gpus(self) -> GpuProfiles:
        """The GPU profiles of every rules folder, parsed on first use."""
        if not self.gpu_files:
            raise RulesError(shipped_rules_dir() / GPUS_FILE, "shipped rules file is missing")
        profiles = load_profiles(self.gpu_files[0])
        for extra in self.gpu_files[1:]:
            profiles = load_profiles(extra, base=profiles)
        return profiles

    @cached_property
    def frameworks(self) -> tuple[Framework, ...]:
        """The framework files of every rules folder, parsed on first use. A
        framework id of a later folder replaces the earlier one, and comes
        first, so that its distributions are matched before the shipped ones."""
        merged: dict[str, Framework] = {}
        for folder in reversed(self.framework_dirs):
            for fw in load_frameworks(folder, rules=self):
                merged.setdefault(fw.id, fw)
        return tuple(merged.values())

    @cached_property
    def ptx(self) -> PtxFacts:
        """What each ZLUDA release does with module PTX (kernels/*.toml of every rules folder), parsed on first use."""
        return load_ptx_files(self.kernel_dirs)

    @cached_property
    def names(self) -> NameRules:
        """How loaders assemble library names at run time (runtime/names.toml of every rules folder), parsed on first use."""
        return load_name_files([d / NAMES_FILE for d in self.runtime_dirs if (d / NAMES_FILE).is_file()])

    @cached_property
    def generators(self) -> tuple[Generator, ...]:
        """The code generators of every rules folder's runtime/generators.toml, parsed on first use;
        a later folder's generator replaces an earlier one of the same id."""
        return load_generator_files([d / GENERATORS_FILE for d in self.runtime_dirs if (d / GENERATORS_FILE).is_file()])

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


def _tag_key(tag: str) -> tuple:
    """Order release tags: v6-preview.69 < v6 < v7-preview.9; others after, by name."""
    m = re.fullmatch(r"v(\d+)(?:-preview\.(\d+))?", tag)
    if not m:
        return (1, tag)
    major, preview = int(m.group(1)), m.group(2)
    return (0, major, 0 if preview is not None else 1, int(preview or 0))



# ---------------------------------------------------------------------------
# families.toml
# ---------------------------------------------------------------------------

_FAMILY_REQUIRED: Schema = {
    "id": is_nonempty_str, "name": is_nonempty_str, "windows": is_str_list, "linux": is_str_list,
    "zluda_libraries": is_str_list, "default_route": is_str, "amd_equivalent": is_str,
    "zluda_status": is_str, "advice": is_nonempty_str, "evidence": is_str,
}
_FAMILY_OPTIONAL: Schema = {"cuda_versions": is_str, "notes": is_str_list, "symbol_pattern": is_str,
                            "host_library": is_nonempty_str}
_UNKNOWN_REQUIRED: Schema = {"platform": is_str, "pattern": is_str}
_UNKNOWN_OPTIONAL: Schema = {"note": is_str}


def _load_families(path: Path) -> tuple[Provenance, list[Family], list[UnknownPattern]]:
    doc = read_toml(path)
    prov = read_provenance(path, doc)
    top_level(path, doc, ("provenance", "family", "unknown"))
    families: list[Family] = []
    seen: set[str] = set()
    for i, row in enumerate(rows(path, doc, "family")):
        where = f"family #{i + 1}"
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            where = f"family {row['id']!r}"
        check(path, where, row, _FAMILY_REQUIRED, _FAMILY_OPTIONAL)
        fid = row["id"]
        if not ID_RE.match(fid):
            raise RulesError(path, f"{where}: id must match {ID_RE.pattern}")
        if fid in seen:
            raise RulesError(path, f"duplicate family id {fid!r}")
        seen.add(fid)
        if row["default_route"] not in DEFAULT_ROUTES:
            raise RulesError(path, f"{where}: default_route must be one of {', '.join(DEFAULT_ROUTES)}, "
                                   f"got {row['default_route']!r}")
        for lib in row["zluda_libraries"]:
            if not ID_RE.match(lib):
                raise RulesError(path, f"{where}: zluda_libraries entry {lib!r} is not a function-table key")
        if not row["windows"] and not row["linux"]:
            raise RulesError(path, f"{where}: needs at least one windows or linux pattern")
        for platform in PLATFORMS:
            for src in row[platform]:
                check_anchored(path, f"{where} {platform}", src)
        if "symbol_pattern" in row:
            check_anchored(path, f"{where} symbol_pattern", row["symbol_pattern"])
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
            host_library=row.get("host_library"),
            source=path,
        ))
    unknown: list[UnknownPattern] = []
    for i, row in enumerate(rows(path, doc, "unknown")):
        where = f"unknown #{i + 1}"
        check(path, where, row, _UNKNOWN_REQUIRED, _UNKNOWN_OPTIONAL)
        platform = check_platform(path, where, row["platform"])
        check_anchored(path, where, row["pattern"])
        unknown.append(UnknownPattern(platform, row["pattern"], row.get("note", ""), path))
    return prov, families, unknown


# ---------------------------------------------------------------------------
# system.toml
# ---------------------------------------------------------------------------

_GROUP_REQUIRED: Schema = {"platform": is_str, "kind": is_str}
_GROUP_OPTIONAL: Schema = {"names": is_str_list, "prefixes": is_str_list, "patterns": is_str_list,
                           "note": is_str}


def _load_system(path: Path) -> tuple[Provenance, list[SystemGroup]]:
    doc = read_toml(path)
    prov = read_provenance(path, doc)
    top_level(path, doc, ("provenance", "group"))
    groups: list[SystemGroup] = []
    for i, row in enumerate(rows(path, doc, "group")):
        where = f"group #{i + 1}"
        check(path, where, row, _GROUP_REQUIRED, _GROUP_OPTIONAL)
        platform = check_platform(path, where, row["platform"])
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
            patterns=tuple(compile_pattern(path, where, p, flags) for p in row.get("patterns", ())),
            note=row.get("note", ""),
        ))
    return prov, groups


# ---------------------------------------------------------------------------
# zluda/releases.toml
# ---------------------------------------------------------------------------

_PIN_REQUIRED: Schema = {"flavour": is_nonempty_str, "tag": is_nonempty_str, "platform": is_str,
                         "asset": is_nonempty_str, "bytes": is_int, "sha256": is_str}
_PIN_OPTIONAL: Schema = {"commit": is_str, "date": is_str, "source": is_str}
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def _load_releases_index(path: Path) -> tuple[Provenance, str | None, list[Pin]]:
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
                compile_pattern(path, f"family {fam.id!r} {platform}", src, flags)
        if fam.symbol_pattern_source is not None:
            compile_pattern(path, f"family {fam.id!r} symbol_pattern", fam.symbol_pattern_source)
    for u in unknown:
        compile_pattern(path, f"unknown {u.pattern!r}", u.pattern, re.IGNORECASE if u.platform == "windows" else 0)


def _toml_files(folder: Path) -> list[Path]:
    try:
        return sorted(Path(e.path) for e in os.scandir(folder) if e.is_file() and e.name.endswith(".toml"))
    except FileNotFoundError:
        return []


@dataclass
class _Loading:
    """What load_rules has gathered so far, folder by folder (shipped first)."""

    shipped: Path
    families: list[Family] = field(default_factory=list)
    family_src: dict[str, Path] = field(default_factory=dict)
    unknown: list[UnknownPattern] = field(default_factory=list)
    system: list[SystemGroup] = field(default_factory=list)
    pins: list[Pin] = field(default_factory=list)
    provenance: list[Provenance] = field(default_factory=list)
    release_paths: dict[str, Path] = field(default_factory=dict)
    default: str | None = None
    default_src: Path | None = None
    gpu_files: list[Path] = field(default_factory=list)
    framework_dirs: list[Path] = field(default_factory=list)
    kernel_dirs: list[Path] = field(default_factory=list)
    runtime_dirs: list[Path] = field(default_factory=list)

    def add_folder(self, folder: Path) -> None:
        is_shipped = folder == self.shipped
        if not folder.is_dir():
            raise RulesError(folder, "rules folder does not exist")
        top = {p.name: p for p in _toml_files(folder)}
        for name, p in top.items():
            if name not in (FAMILIES_FILE, SYSTEM_FILE, GPUS_FILE):
                raise RulesError(p, f"unknown rules file (expected {FAMILIES_FILE}, {SYSTEM_FILE}, {GPUS_FILE}, "
                                    f"{ZLUDA_DIR}/{RELEASES_FILE}, {ZLUDA_DIR}/<tag>.toml or "
                                    f"{FRAMEWORKS_DIR}/<id>.toml)")
        for required in (FAMILIES_FILE, SYSTEM_FILE, GPUS_FILE):
            if is_shipped and required not in top:
                raise RulesError(folder / required, "shipped rules file is missing")
        if FAMILIES_FILE in top:
            self.add_families(top[FAMILIES_FILE], compile_now=not is_shipped)
        if SYSTEM_FILE in top:
            self.add_system(top[SYSTEM_FILE])
        if GPUS_FILE in top:
            self.gpu_files.append(top[GPUS_FILE])
        if (folder / FRAMEWORKS_DIR).is_dir():
            self.framework_dirs.append(folder / FRAMEWORKS_DIR)
        elif is_shipped:
            raise RulesError(folder / FRAMEWORKS_DIR, "shipped rules folder is missing")
        if (folder / KERNELS_DIR).is_dir():
            self.kernel_dirs.append(folder / KERNELS_DIR)
        self.add_runtime(folder / RUNTIME_DIR, is_shipped)
        self.add_zluda(folder / ZLUDA_DIR, is_shipped)

    def add_families(self, path: Path, compile_now: bool) -> None:
        prov, fams, unk = _load_families(path)
        self.provenance.append(prov)
        if compile_now:
            _compile_all(path, fams, unk)
        for fam in fams:
            if fam.id in self.family_src:
                raise RulesError(path, f"duplicate family id {fam.id!r} (already defined in {self.family_src[fam.id]})")
            self.family_src[fam.id] = path
        self.families += fams
        self.unknown += unk

    def add_system(self, path: Path) -> None:
        prov, groups = _load_system(path)
        self.provenance.append(prov)
        known = {(g.platform, n): g.kind for g in self.system for n in g.names}
        for g in groups:
            for n in g.names:
                if known.get((g.platform, n), g.kind) != g.kind:
                    raise RulesError(path, f"{g.platform} name {n!r} is already of kind "
                                           f"{known[(g.platform, n)]!r}, not {g.kind!r}")
                known[(g.platform, n)] = g.kind
        self.system += groups

    def add_runtime(self, folder: Path, is_shipped: bool) -> None:
        if not folder.is_dir():
            if is_shipped:
                raise RulesError(folder, "shipped rules folder is missing")
            return
        for p in _toml_files(folder):
            if p.name not in (NAMES_FILE, GENERATORS_FILE):
                raise RulesError(p, f"unknown rules file (expected {RUNTIME_DIR}/{NAMES_FILE} or {RUNTIME_DIR}/{GENERATORS_FILE})")
        for required in (NAMES_FILE, GENERATORS_FILE):
            if is_shipped and not (folder / required).is_file():
                raise RulesError(folder / required, "shipped rules file is missing")
        self.runtime_dirs.append(folder)

    def add_zluda(self, folder: Path, is_shipped: bool) -> None:
        zfiles = _toml_files(folder)
        if is_shipped and RELEASES_FILE not in {p.name for p in zfiles}:
            raise RulesError(folder / RELEASES_FILE, "shipped rules file is missing")
        for p in zfiles:
            if p.name == RELEASES_FILE:
                prov, default, pins = _load_releases_index(p)
                self.provenance.append(prov)
                if default is not None:
                    self.default, self.default_src = default, p
                for pin in pins:
                    if any((q.tag, q.platform, q.asset) == (pin.tag, pin.platform, pin.asset) for q in self.pins):
                        raise RulesError(p, f"duplicate pin for {pin.tag} {pin.platform} {pin.asset}")
                self.pins += pins
                continue
            tag = p.stem
            if tag in self.release_paths:
                raise RulesError(p, f"ZLUDA release {tag!r} is already defined in {self.release_paths[tag]}")
            self.release_paths[tag] = p

    def rule_set(self) -> RuleSet:
        tags = tuple(sorted(self.release_paths, key=_tag_key))
        if self.default is None:
            raise RulesError(self.shipped / ZLUDA_DIR / RELEASES_FILE, "no [releases] default is set")
        if self.default not in self.release_paths:
            raise RulesError(self.default_src or self.shipped,
                             f"default release {self.default!r} has no zluda/{self.default}.toml; "
                             f"known: {', '.join(tags)}")
        return RuleSet(
            families=tuple(self.families),
            unknown=tuple(self.unknown),
            system=tuple(self.system),
            default_release=self.default,
            release_tags=tags,
            pins=tuple(self.pins),
            provenance=tuple(self.provenance),
            release_paths=MappingProxyType(self.release_paths),
            gpu_files=tuple(self.gpu_files),
            framework_dirs=tuple(self.framework_dirs),
            kernel_dirs=tuple(self.kernel_dirs),
            runtime_dirs=tuple(self.runtime_dirs),
        )


def load_rules(extra_dirs: Sequence[str | os.PathLike[str]] = ()) -> RuleSet:
    """Load the shipped rules, then each folder of `extra_dirs` in order.

    Every folder has the same layout, each file optional in an extra folder:
    ``families.toml``, ``system.toml``, ``gpus.toml``, ``frameworks/<id>.toml``,
    ``kernels/*.toml``, ``runtime/names.toml``, ``runtime/generators.toml``,
    ``zluda/releases.toml``, ``zluda/<tag>.toml``. Extra folders add families,
    unknown-name patterns, system groups, releases and pins (re-using a
    family id, a release tag or a pin raises RulesError); they add or replace
    GPU profiles (by gfx), pitfalls (by id), frameworks (by id) and code
    generators (by id), and add run-time name templates. An extra
    ``zluda/releases.toml`` may set ``[releases] default`` (the last one
    wins). Release tables are parsed when ``RuleSet.release(tag)`` first asks
    for them; GPU profiles, frameworks, kernels facts and run-time rules on
    first use of ``RuleSet.gpus`` / ``.frameworks`` / ``.ptx`` / ``.names`` /
    ``.generators``, except an extra folder's, which are parsed here so
    that their errors show at once.
    """
    loading = _Loading(shipped_rules_dir())
    for folder in (loading.shipped, *(Path(d) for d in extra_dirs)):
        loading.add_folder(folder)
    rules = loading.rule_set()
    if len(rules.gpu_files) > 1:
        rules.gpus  # noqa: B018 - parse the extra gpus.toml now: its errors are the user's
    if len(rules.framework_dirs) > 1:
        rules.frameworks  # noqa: B018 - likewise for the extra frameworks
    if len(rules.kernel_dirs) > 1:
        rules.ptx  # noqa: B018 - likewise for the extra kernels facts
    if len(rules.runtime_dirs) > 1:
        rules.names  # noqa: B018 - likewise for the extra run-time names
        rules.generators  # noqa: B018 - and the extra code generators
    return rules
