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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cuda4amd.rules.validate import (
    RulesError,
    Schema,
    check,
    is_bool,
    is_nonempty_str,
    read_provenance,
    read_toml,
    rows,
    shipped_rules_dir,
    top_level,
)

__all__ = ["KERNELS_DIR", "PtxAcceptance", "PtxFacts", "load_ptx_facts", "load_ptx_files"]

KERNELS_DIR = "kernels"
#: rule files of cuda4amd.rules.ptx_rules in the same folder (its PTX_PREFIX)
PTX_RULES_PREFIX = "ptx-"
_RELEASE_REQUIRED: Schema = {
    "tag": is_nonempty_str,
    "debug_target": is_bool,
    "debug_target_source": is_nonempty_str,
    "codeless_module_loads": is_bool,
    "codeless_module_source": is_nonempty_str,
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
    """The shipped rules/kernels/ files, then each extra rules folder's."""
    folders = [shipped_rules_dir(), *(Path(d) for d in extra_dirs)]
    return load_ptx_files([Path(f) / KERNELS_DIR for f in folders if (Path(f) / KERNELS_DIR).is_dir()])


def load_ptx_files(kernel_dirs: Sequence[Path]) -> PtxFacts:
    """Every *.toml of each kernels folder, in order: a later row replaces a tag's earlier one."""
    releases: dict[str, PtxAcceptance] = {}
    for kernels in kernel_dirs:
        for path in sorted(kernels.glob("*.toml")):
            if path.name.startswith(PTX_RULES_PREFIX):
                continue  # ZLUDA's PTX grammar and translator rules: cuda4amd.rules.ptx_rules reads them
            for row in _load_file(path):
                releases[row.tag] = row
    return PtxFacts(releases)


def _load_file(path: Path) -> list[PtxAcceptance]:
    doc = read_toml(path)
    read_provenance(path, doc)
    top_level(path, doc, ("provenance", "release"))
    result = []
    seen: set[str] = set()
    for number, row in enumerate(rows(path, doc, "release"), 1):
        where = f"[[release]] #{number}"
        fields = check(path, where, row, _RELEASE_REQUIRED)
        if fields["tag"] in seen:
            raise RulesError(path, f"{where}: tag {fields['tag']!r} appears twice")
        seen.add(fields["tag"])
        result.append(PtxAcceptance(**fields))
    return result
