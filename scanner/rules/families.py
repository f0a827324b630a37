"""families.toml: the NVIDIA library families, and names that look like CUDA but are none of them.

    prov, families, unknown = load_families(path)
    find = Lookup(family_patterns(families, "windows"), re.IGNORECASE)  # (Family, pattern) in rule order
    find("cublas64_12.dll")                                             # -> the blas Family

A look-up (`Lookup`) wants the first pattern in rule order that matches a
name. It tries one regex, the alternation of every pattern of the kind and
platform, each in a named group that says which pattern matched: 2-4 times
faster per name than trying the patterns one by one (docs/rules.md
"Speed"). A pattern that refers to groups by number or uses inline flags or
named groups means something else inside such a group; a kind holding one is
tried pattern by pattern. `Family.windows`, `.linux` and `.symbol_pattern`
compile each pattern on its own (Windows ones case-insensitively), which is
what validates it. Invalid data raises RulesError naming the file and the
problem.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

from cuda4amd.rules.validate import (
    ID_RE,
    PLATFORMS,
    Provenance,
    RulesError,
    Schema,
    basename,
    check,
    check_anchored,
    check_platform,
    compile_pattern,
    is_nonempty_str,
    is_str,
    is_str_list,
    read_provenance,
    read_toml,
    rows,
    top_level,
)

__all__ = [
    "DEFAULT_ROUTES",
    "FAMILIES_FILE",
    "ROUTES",
    "Family",
    "Lookup",
    "UnknownPattern",
    "compile_now",
    "family_patterns",
    "flags_for",
    "load_families",
    "symbol_patterns",
    "unknown_patterns",
]

FAMILIES_FILE = "families.toml"
#: routes of a dependency edge (DESIGN.md §3)
ROUTES: tuple[str, ...] = ("redirect", "passthrough", "stub", "blocked", "unknown")
#: routes a family may default to when ZLUDA ships no replacement for the file
DEFAULT_ROUTES: tuple[str, ...] = ("passthrough", "stub", "blocked", "unknown")

_RULES = Path("<rules>")  # where a pattern of a Family made in code, not read from a file, is reported


def flags_for(platform: str) -> int:
    """Windows names match case-insensitively, Linux names exactly."""
    return re.IGNORECASE if platform == "windows" else 0


@dataclass(frozen=True)
class Family:
    """An NVIDIA library family and how ZLUDA treats it.

    `windows_patterns` / `linux_patterns` are the regexes as written in the
    rules (anchored with '^'); `windows` / `linux` are the compiled patterns
    (Windows ones case-insensitive), compiled on first access.
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

    def _compile(self, platform: str) -> tuple[re.Pattern[str], ...]:
        where = f"family {self.id!r} {platform}"
        return tuple(compile_pattern(self.source or _RULES, where, p, flags_for(platform))
                     for p in self.pattern_sources(platform))

    @cached_property
    def symbol_pattern(self) -> re.Pattern[str] | None:
        """Compiled `symbol_pattern_source` (case-sensitive), or None."""
        src = self.symbol_pattern_source
        if src is None:
            return None
        return compile_pattern(self.source or _RULES, f"family {self.id!r} symbol_pattern", src)

    @cached_property
    def windows(self) -> tuple[re.Pattern[str], ...]:
        return self._compile("windows")

    @cached_property
    def linux(self) -> tuple[re.Pattern[str], ...]:
        return self._compile("linux")

    def patterns(self, platform: str) -> tuple[re.Pattern[str], ...]:
        return self.windows if _known(platform) == "windows" else self.linux

    def pattern_sources(self, platform: str) -> tuple[str, ...]:
        return self.windows_patterns if _known(platform) == "windows" else self.linux_patterns

    def matches(self, file_name: str, platform: str) -> bool:
        name = basename(file_name, platform)
        return any(p.match(name) for p in self.patterns(platform))


@dataclass(frozen=True)
class UnknownPattern:
    """A name that looks like an NVIDIA CUDA library but matches no family."""

    platform: str
    pattern: str
    note: str = ""
    source: Path | None = field(default=None, compare=False)

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """`pattern` compiled (case-insensitive on Windows), on first access."""
        where = f"unknown {self.pattern!r}"
        return compile_pattern(self.source or _RULES, where, self.pattern, flags_for(self.platform))


def _known(platform: str) -> str:
    if platform not in PLATFORMS:
        raise ValueError(f"platform must be one of {PLATFORMS}, not {platform!r}")
    return platform


# ---------------------------------------------------------------------------
# look-ups: ordered (label, pattern source) entries, the first match wins
# ---------------------------------------------------------------------------

T = TypeVar("T")


def family_patterns(families: Sequence[Family], platform: str) -> tuple[tuple[Family, str], ...]:
    """Every file-name pattern of `platform`, family by family in rule order."""
    return tuple((f, p) for f in families for p in f.pattern_sources(platform))


def unknown_patterns(unknown: Sequence[UnknownPattern], platform: str) -> tuple[tuple[UnknownPattern, str], ...]:
    return tuple((u, u.pattern) for u in unknown if u.platform == _known(platform))


def symbol_patterns(families: Sequence[Family]) -> tuple[tuple[Family, str], ...]:
    """The families that name their C symbols, with the symbol pattern, in rule order."""
    return tuple((f, f.symbol_pattern_source) for f in families if f.symbol_pattern_source is not None)


#: what a wrapping group changes the meaning of: a numbered group reference, or `(?` that opens
#: no plain group or lookaround (a named group or reference, a conditional, inline flags); a
#: false alarm (an escaped backslash before a digit) only costs the joined regex
_NOT_JOINABLE = re.compile(r"\\[1-9]|\(\?(?![:=!]|<[=!])")


class Lookup(Generic[T]):
    """The label of the first (label, pattern) entry whose pattern matches a
    name at its start, or None.

    Every pattern was compiled on its own before (load_rules compiles a user
    folder's, the tests the shipped ones: RuleSet.validate), so re has checked
    its brackets and wrapping it in a group is safe unless _NOT_JOINABLE says
    otherwise."""

    __slots__ = ("each", "joined", "labels")

    def __init__(self, entries: Sequence[tuple[T, str]], flags: int) -> None:
        self.labels = tuple(label for label, _ in entries)
        self.joined: re.Pattern[str] | None = None
        self.each: tuple[tuple[T, re.Pattern[str]], ...] = ()
        if not any(_NOT_JOINABLE.search(source) for _, source in entries):
            joined = "|".join(f"(?P<_{i}>{source})" for i, (_, source) in enumerate(entries))
            with contextlib.suppress(re.error, RecursionError, OverflowError):  # then one by one
                self.joined = re.compile(joined, flags)
        if self.joined is None:
            self.each = tuple((label, re.compile(source, flags)) for label, source in entries)

    def __call__(self, name: str) -> T | None:
        if self.joined is not None:
            m = self.joined.match(name)
            # a pattern's group closes after every group inside it, so it is the last one matched
            return None if m is None or m.lastgroup is None else self.labels[int(m.lastgroup[1:])]
        for label, pattern in self.each:
            if pattern.match(name):
                return label
        return None


def compile_now(families: Sequence[Family], unknown: Sequence[UnknownPattern]) -> None:
    """Compile every pattern now (and keep it), so that a bad regex of a user's
    families.toml is reported by load_rules; the shipped file's are compiled by
    the tests (RuleSet.validate) and otherwise on first use."""
    for fam in families:
        for platform in PLATFORMS:
            fam.patterns(platform)
        fam.symbol_pattern  # noqa: B018 - compiled and kept by the cached property
    for u in unknown:
        u.regex  # noqa: B018 - likewise


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


def load_families(path: Path) -> tuple[Provenance, list[Family], list[UnknownPattern]]:
    """Parse and validate one families.toml (patterns are checked for '^', compiled later)."""
    doc = read_toml(path)
    prov = read_provenance(path, doc)
    top_level(path, doc, ("provenance", "family", "unknown"))
    families: list[Family] = []
    seen: set[str] = set()
    for i, row in enumerate(rows(path, doc, "family")):
        where = f"family #{i + 1}"
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            where = f"family {row['id']!r}"
        family = _family(path, where, row)
        if family.id in seen:
            raise RulesError(path, f"duplicate family id {family.id!r}")
        seen.add(family.id)
        families.append(family)
    unknown: list[UnknownPattern] = []
    for i, row in enumerate(rows(path, doc, "unknown")):
        where = f"unknown #{i + 1}"
        check(path, where, row, _UNKNOWN_REQUIRED, _UNKNOWN_OPTIONAL)
        platform = check_platform(path, where, row["platform"])
        check_anchored(path, where, row["pattern"])
        unknown.append(UnknownPattern(platform, row["pattern"], row.get("note", ""), path))
    return prov, families, unknown


def _family(path: Path, where: str, row: Any) -> Family:
    check(path, where, row, _FAMILY_REQUIRED, _FAMILY_OPTIONAL)
    fid = row["id"]
    if not ID_RE.match(fid):
        raise RulesError(path, f"{where}: id must match {ID_RE.pattern}")
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
    return Family(
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
    )
