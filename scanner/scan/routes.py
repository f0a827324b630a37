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

from typing import Mapping, Sequence

from cuda4amd.model import ScannedBinary
from cuda4amd.rules.loader import RuleSet
from cuda4amd.scan.classify import Dependency, Identity

NO_LOADER = "kernels but no CUDA loader seen: names may be built at run time"
NO_LOADER_API = "calls CUDA functions but no CUDA loader seen: names may be built at run time"
#: undefined symbols looked at per binary (enough to tell; bounded for huge binaries)
MAX_SYMBOLS = 20_000


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
    # The symbols seen and those a family claims, shared by the binaries: most undefined
    # symbols (libc, libstdc++, Python's C API) recur in every binary of a tree, and
    # one regex match per symbol per binary was the bulk of this step; then a dict
    # lookup per symbol per binary was (0.04 s of 867 binaries on the device machine).
    seen: set[str] = set()
    claimed: set[str] = set()
    for binary in binaries:
        identity = identities.get(binary.path)
        if binary.path in routed or (identity is not None and identity.family is not None):
            continue
        if binary.kernels is not None and binary.kernels.state != "none":
            unseen[binary.path] = NO_LOADER
        elif _calls_cuda(binary, rules, seen, claimed):
            unseen[binary.path] = NO_LOADER_API
    return unseen


def _calls_cuda(binary: ScannedBinary, rules: RuleSet, seen: set[str], claimed: set[str]) -> bool:
    """Whether a family claims one of the binary's undefined symbols (the first MAX_SYMBOLS)."""
    symbols = binary.info.undefined_symbols[:MAX_SYMBOLS]
    if not seen.issuperset(symbols):  # most binaries name nothing new: no set built for them
        fresh = set(symbols)
        fresh -= seen
        seen |= fresh
        claimed.update(symbol for symbol in fresh if rules.family_for_symbol(symbol) is not None)
    return not claimed.isdisjoint(symbols)
