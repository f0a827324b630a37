"""Binaries that use CUDA with no visible way to reach it.

A binary with GPU kernels (fat binaries) or calls into CUDA (undefined
symbols a CUDA family exports) needs a CUDA library at run time. When none
of its dependencies is a CUDA library, and none of the tree's libraries it
loads leads to one, the library is found some way the scan cannot see:
a name assembled at run time that no rule knows, a Python loader
(ctypes, cuda.pathfinder) that preloads it, a process that loaded it first.
Such a binary is never a plain `ready`: it becomes `degraded` with the reason
:data:`NO_LOADER`.

    mark_unseen_loaders(verdicts, rules)   # after verdict.decide()
"""
from __future__ import annotations

from typing import Sequence

from cuda4amd.rules.loader import RuleSet
from cuda4amd.scan.verdict import BinaryVerdict

NO_LOADER = "kernels but no CUDA loader seen: names may be built at run time"
NO_LOADER_API = "calls CUDA functions but no CUDA loader seen: names may be built at run time"
#: undefined symbols looked at per binary (enough to tell; bounded for huge binaries)
MAX_SYMBOLS = 20_000


def mark_unseen_loaders(verdicts: Sequence[BinaryVerdict], rules: RuleSet) -> None:
    """Degrade every `ready` binary with kernels, and every binary calling CUDA
    functions, that has no route to a CUDA library."""
    by_path = {v.binary.path: v for v in verdicts}
    routed = {path for path, v in by_path.items() if any(dep.identity.family for dep in v.dependencies)}
    changed = True
    while changed:  # a route through the tree's own libraries counts
        changed = False
        for path, v in by_path.items():
            if path in routed:
                continue
            if any(dep.edge.in_tree and dep.edge.resolved in routed for dep in v.dependencies):
                routed.add(path)
                changed = True
    for path, v in by_path.items():
        if v.verdict not in ("ready", "no-cuda") or path in routed or v.identity.family is not None:
            continue
        kernels = v.binary.kernels
        if kernels is not None and kernels.state != "none":
            if v.verdict == "ready":
                v.worsen("degraded", NO_LOADER)
        elif _calls_cuda(v, rules):
            v.worsen("degraded", NO_LOADER_API)


def _calls_cuda(verdict: BinaryVerdict, rules: RuleSet) -> bool:
    return any(rules.family_for_symbol(symbol) is not None
               for symbol in verdict.binary.info.undefined_symbols[:MAX_SYMBOLS])
