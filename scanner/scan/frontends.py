"""Sub-libraries that only a replaced front-end loads: not loaded under ZLUDA.

cuDNN 9 ships `cudnn64_9.dll` (the shim its users link) and sub-libraries
(`cudnn_ops64_9.dll`, `cudnn_graph64_9.dll`, ...) that the shim loads by
name and that load one another (rules/runtime/sublibraries.toml). ZLUDA
replaces the shim; its replacement does the work itself, so NVIDIA's shim
never runs and never loads them. A sub-library is "not loaded" when the
release replaces its front-end and, in the scan's import graph, everything
that imports it or loads it by name is replaced or is itself such a
sub-library (a fixed point: one that an application loads directly keeps
the others it loads judged, too). Nothing loading it in the scan counts as
being reached through the front-end only, which is how the front-end
reaches them: by name, from a file whose strings are never read, since
ZLUDA replaces it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cuda4amd.model import ScannedBinary
from cuda4amd.rules.releases import ZludaRelease
from cuda4amd.rules.ruleset import RuleSet
from cuda4amd.rules.sublibraries import Split, split_for
from cuda4amd.scan.classify import Dependency, Identity, identify
from cuda4amd.scan.graph import platform_of

__all__ = ["REPLACED", "NotLoaded", "not_loaded_sublibraries"]

#: routes under which ZLUDA's file takes a name's place (a stub replacement too: NVIDIA's file never loads)
REPLACED = ("redirect", "stub")


@dataclass(frozen=True)
class NotLoaded:
    """Why a sub-library is not loaded under ZLUDA: its split, and the front-end's identity at the release."""

    split: Split
    front: Identity


def not_loaded_sublibraries(binaries: Sequence[ScannedBinary], dependencies: Sequence[Dependency],
                            identities: Mapping[str, Identity], rules: RuleSet,
                            release: ZludaRelease) -> dict[str, NotLoaded]:
    """path -> NotLoaded for each binary that only a replaced front-end (or another such sub-library) loads."""
    found: dict[str, NotLoaded] = {}
    fronts: dict[tuple[str, str], Identity] = {}
    for binary in binaries:
        me = identities[binary.path]
        if me.family is None or me.route in REPLACED:
            continue
        platform = platform_of(binary)
        split = split_for(binary.path, platform, rules.splits)
        if split is None or split.family != me.family:
            continue
        key = (split.front, platform)
        if key not in fronts:
            fronts[key] = identify(split.front, platform, rules, release)
        if fronts[key].route in REPLACED:
            found[binary.path] = NotLoaded(split, fronts[key])
    if not found:
        return found
    replaced = {path for path, identity in identities.items() if identity.route in REPLACED}
    loaders: dict[str, set[str]] = {}
    for dep in dependencies:
        target = dep.edge.resolved
        if target in found and dep.edge.source != target:
            loaders.setdefault(target, set()).add(dep.edge.source)
    changed = True
    while changed:  # the set only shrinks: this ends
        changed = False
        for path in list(found):
            if any(source not in found and source not in replaced for source in loaders.get(path, ())):
                del found[path]  # something that does load (an application, a library ZLUDA keeps) uses it
                changed = True
    return found
