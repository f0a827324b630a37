"""What each ZLUDA release does with a fat binary module's PTX (rules/kernels/*.toml).

    facts = load_ptx_facts()                  # the shipped rules/kernels/
    facts = load_ptx_facts([Path("my-rules")])  # + a user's rules folders (later ones win per tag)
    release = facts.get("v6-preview.69")      # PtxAcceptance or None (nothing known)
    release.debug_target                      # parses `.target sm_86, debug` (nvcc -G)?
    release.codeless_module_loads             # loads a module that has no PTX at all?

Each fact carries the ZLUDA source it was read from (file and lines at the
tag). Invalid data raises ``RulesError(path, message)``.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from cuda4amd.rules.loader import RulesError, shipped_rules_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["KERNELS_DIR", "PtxAcceptance", "PtxFacts", "load_ptx_facts"]

KERNELS_DIR = "kernels"
_FIELDS = {
    "tag": str,
    "debug_target": bool,
    "debug_target_source": str,
    "codeless_module_loads": bool,
    "codeless_module_source": str,
}


@dataclass(frozen=True)
class PtxAcceptance:
    """One release's handling of module PTX, each fact with its source."""

    tag: str
    debug_target: bool
    debug_target_source: str
    codeless_module_loads: bool
    codeless_module_source: str


@dataclass(frozen=True)
class PtxFacts:
    releases: dict[str, PtxAcceptance]

    def get(self, tag: str) -> PtxAcceptance | None:
        return self.releases.get(tag)


def load_ptx_facts(extra_dirs: Sequence[str | os.PathLike[str]] = ()) -> PtxFacts:
    releases: dict[str, PtxAcceptance] = {}
    for folder in [shipped_rules_dir(), *(Path(d) for d in extra_dirs)]:
        kernels = Path(folder) / KERNELS_DIR
        if not kernels.is_dir():
            continue
        for path in sorted(kernels.glob("*.toml")):
            for row in _load_file(path):
                releases[row.tag] = row
    return PtxFacts(releases)


def _load_file(path: Path) -> list[PtxAcceptance]:
    try:
        with open(path, "rb") as handle:
            doc = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RulesError(path, f"cannot read: {exc}") from exc
    unknown = set(doc) - {"provenance", "release"}
    if unknown:
        raise RulesError(path, f"unknown top-level key(s): {', '.join(sorted(unknown))}")
    sources = doc.get("provenance", {}).get("sources")
    if not isinstance(sources, list) or not sources or not all(isinstance(s, str) and s for s in sources):
        raise RulesError(path, "[provenance] sources must be a non-empty list of strings")
    rows = doc.get("release", [])
    if not isinstance(rows, list):
        raise RulesError(path, "'release' must be an array of [[release]] tables")
    result = []
    seen: set[str] = set()
    for number, row in enumerate(rows, 1):
        where = f"[[release]] #{number}"
        if not isinstance(row, dict):
            raise RulesError(path, f"{where}: not a table")
        if set(row) != set(_FIELDS):
            missing, extra = set(_FIELDS) - set(row), set(row) - set(_FIELDS)
            raise RulesError(path, f"{where}: missing {sorted(missing)}, unknown {sorted(extra)}")
        for key, kind in _FIELDS.items():
            if not isinstance(row[key], kind) or (kind is str and not row[key].strip()):
                raise RulesError(path, f"{where}: {key} must be a {'non-empty string' if kind is str else kind.__name__}")
        if row["tag"] in seen:
            raise RulesError(path, f"{where}: tag {row['tag']!r} appears twice")
        seen.add(row["tag"])
        result.append(PtxAcceptance(**row))
    return result
