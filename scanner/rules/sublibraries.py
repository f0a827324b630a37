"""Rules for libraries split into a front-end and the sub-libraries only it loads (runtime/sublibraries.toml).

    rules.splits                                   # every rules folder's splits, shipped first
    split = split_for("cudnn_ops64_9.dll", "windows", rules.splits)
    split.front                                    # "cudnn64_9.dll": what the ZLUDA release must replace

When ZLUDA replaces the front-end, NVIDIA's front-end never loads, and so
neither do the sub-libraries it would have loaded (cuda4amd.scan.frontends
decides which of a scan's binaries that holds for). Invalid data raises
RulesError naming the file.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from cuda4amd.rules.families import flags_for
from cuda4amd.rules.validate import (
    ID_RE,
    RulesError,
    Schema,
    basename,
    check,
    check_platform,
    compile_pattern,
    is_nonempty_str,
    is_str_list,
    read_provenance,
    read_toml,
    rows,
    top_level,
)

__all__ = ["SUBLIBRARIES_FILE", "Split", "load_split_files", "split_for"]

SUBLIBRARIES_FILE = "sublibraries.toml"

_REQUIRED: Schema = {"family": is_nonempty_str, "name": is_nonempty_str, "platform": is_nonempty_str,
                     "front": is_nonempty_str, "sub": is_str_list, "source": is_nonempty_str}


@dataclass(frozen=True)
class Split:
    """A front-end (`front`, a file name) and the sub-libraries it loads (`sub_patterns`) on one platform."""

    family: str
    name: str  # "cuDNN 9"
    platform: str
    front: str
    sub_patterns: tuple[str, ...]
    source: str
    path: Path

    @cached_property
    def subs(self) -> tuple[re.Pattern[str], ...]:
        return tuple(compile_pattern(self.path, f"split {self.name!r} {self.platform}", p, flags_for(self.platform))
                     for p in self.sub_patterns)

    def is_sub(self, file_name: str, platform: str) -> bool:
        return platform == self.platform and any(p.match(basename(file_name, platform)) for p in self.subs)


def load_split_files(paths: Sequence[Path]) -> tuple[Split, ...]:
    """Every sublibraries.toml of ``paths`` (shipped first): the splits add up."""
    out: list[Split] = []
    for path in paths:
        out += _load(path)
    return tuple(out)


def _load(path: Path) -> list[Split]:
    doc = read_toml(path)
    read_provenance(path, doc)
    top_level(path, doc, ("provenance", "split"))
    out = []
    for i, row in enumerate(rows(path, doc, "split")):
        where = f"split #{i + 1}"
        s = check(path, where, row, _REQUIRED)
        check_platform(path, where, s["platform"])
        if not ID_RE.match(s["family"]):
            raise RulesError(path, f"{where}: family must match {ID_RE.pattern}, got {s['family']!r}")
        if not s["sub"]:
            raise RulesError(path, f"{where}: 'sub' must list at least one pattern")
        if any(c in s["front"] for c in "/\\*?[^$"):
            raise RulesError(path, f"{where}: 'front' is a file name, not a path or pattern: {s['front']!r}")
        split = Split(s["family"], s["name"], s["platform"], s["front"], tuple(s["sub"]), s["source"], path)
        split.subs  # noqa: B018 - a bad regex shows at load, not mid-scan
        out.append(split)
    return out


def split_for(file_name: str, platform: str, splits: Iterable[Split]) -> Split | None:
    """The split whose sub-library `file_name` is on `platform`, or None."""
    return next((s for s in splits if s.is_sub(file_name, platform)), None)
