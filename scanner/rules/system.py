"""system.toml: libraries that are not CUDA findings (the OS, API sets, redistributables, the host).

    prov, groups = load_system(path)
    SystemNames(groups).kind("KERNEL32.dll", "windows")   # -> "system"

Invalid data raises RulesError naming the file and the problem.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from cuda4amd.rules.validate import (
    Provenance,
    RulesError,
    Schema,
    basename,
    check,
    check_platform,
    compile_pattern,
    is_str,
    is_str_list,
    read_provenance,
    read_toml,
    rows,
    top_level,
)

__all__ = ["SYSTEM_FILE", "SYSTEM_KINDS", "SystemGroup", "SystemNames", "check_kinds", "load_system"]

SYSTEM_FILE = "system.toml"
SYSTEM_KINDS: tuple[str, ...] = ("system", "api-set", "redistributable", "host")


@dataclass(frozen=True)
class SystemGroup:
    platform: str
    kind: str
    names: frozenset[str] = frozenset()  # lower-cased on windows
    prefixes: tuple[str, ...] = ()  # lower-cased on windows
    patterns: tuple[re.Pattern[str], ...] = ()
    note: str = ""


class SystemNames:
    """The SYSTEM_KINDS entry of a library name: by exact name (one dict
    look-up), else by the first group whose prefix or pattern matches."""

    def __init__(self, groups: Sequence[SystemGroup]) -> None:
        self.groups = tuple(groups)
        names: dict[tuple[str, str], str] = {}
        for g in self.groups:
            for n in g.names:
                names.setdefault((g.platform, n), g.kind)
        self.names = MappingProxyType(names)

    def kind(self, file_name: str, platform: str) -> str | None:
        name = basename(file_name, platform)
        key = name.lower() if platform == "windows" else name
        kind = self.names.get((platform, key))
        if kind is not None:
            return kind
        for g in self.groups:
            if g.platform != platform:
                continue
            if any(key.startswith(p) for p in g.prefixes) or any(p.search(name) for p in g.patterns):
                return g.kind
        return None


def check_kinds(path: Path, known: Sequence[SystemGroup], groups: Sequence[SystemGroup]) -> None:
    """A name of `groups` (from `path`) has the kind it has in `known` (the folders before), if any."""
    kinds = {(g.platform, n): g.kind for g in known for n in g.names}
    for g in groups:
        for n in g.names:
            if kinds.get((g.platform, n), g.kind) != g.kind:
                raise RulesError(path, f"{g.platform} name {n!r} is already of kind "
                                       f"{kinds[(g.platform, n)]!r}, not {g.kind!r}")
            kinds[(g.platform, n)] = g.kind


_GROUP_REQUIRED: Schema = {"platform": is_str, "kind": is_str}
_GROUP_OPTIONAL: Schema = {"names": is_str_list, "prefixes": is_str_list, "patterns": is_str_list,
                           "note": is_str}


def load_system(path: Path) -> tuple[Provenance, list[SystemGroup]]:
    """Parse and validate one system.toml (its patterns compiled here)."""
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
