"""Binaries that use CUDA with no visible way to reach it.

A binary with GPU kernels (fat binaries) or calls into CUDA (undefined
symbols a CUDA family exports) needs a CUDA library at run time. When none
of its dependencies is a CUDA library, and none of the tree's libraries it
loads leads to one, the library is found some way the scan cannot see:
a name assembled at run time that no rule knows, a Python loader
(ctypes, cuda.pathfinder) that preloads it, a process that loaded it first.
Such a binary is never a plain `ready`: verdict.decide makes it `degraded`
with the reason found here, before verdicts flow along the graph, so that
what imports it is at most `degraded` through it, as for any degraded
library.

    unseen = unseen_loaders(binaries, dependencies, identities, rules)   # path -> reason
    verdicts = decide(binaries, dependencies, identities, gaps, ptx, unseen)

Only the structure decides (kernels, CUDA symbols, dependency edges); no
verdict is read, so this runs before verdict.decide and imports nothing of it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from cuda4amd.model import ScannedBinary
from cuda4amd.rules.ruleset import RuleSet
from cuda4amd.scan.classify import Dependency, Identity
from cuda4amd.scan.read.payload import CudaSymbols

NO_LOADER = "kernels but no CUDA loader seen: names may be built at run time"
NO_LOADER_API = "calls CUDA functions but no CUDA loader seen: names may be built at run time"


def unseen_loaders(
    binaries: Sequence[ScannedBinary],
    dependencies: Sequence[Dependency],
    identities: Mapping[str, Identity],
    rules: RuleSet,
) -> dict[str, str]:
    """Path -> reason (:data:`NO_LOADER` or :data:`NO_LOADER_API`) for every
    binary that is not an NVIDIA library, carries kernels or calls CUDA
    functions, and has no route to a CUDA library: no CUDA dependency of its
    own and none through the tree's libraries it loads."""
    by_source: dict[str, list[Dependency]] = {b.path: [] for b in binaries}
    for dep in dependencies:
        by_source.setdefault(dep.edge.source, []).append(dep)
    routed = {path for path, deps in by_source.items() if any(dep.identity.family for dep in deps)}
    changed = True
    while changed:  # a route through the tree's own libraries counts
        changed = False
        for path, deps in by_source.items():
            if path in routed:
                continue
            if any(dep.edge.in_tree and dep.edge.resolved in routed for dep in deps):
                routed.add(path)
                changed = True
    unseen: dict[str, str] = {}
    cuda_symbols = CudaSymbols(rules)  # for a binary whose reader did not answer it
    for binary in binaries:
        identity = identities.get(binary.path)
        if binary.path in routed or (identity is not None and identity.family is not None):
            continue
        if binary.kernels is not None and binary.kernels.state != "none":
            unseen[binary.path] = NO_LOADER
        elif binary.calls_cuda if binary.calls_cuda is not None else cuda_symbols.called_by(
                binary.info.undefined_symbols):
            unseen[binary.path] = NO_LOADER_API
    return unseen
