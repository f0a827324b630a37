"""Classify CUDA dependencies: family, route through ZLUDA, and each symbol's state."""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from .graph import Edge
from .model import ScannedBinary
from .rules import RuleSet, ZludaRelease

SYMBOL_STATES = ("implemented", "stub", "missing")


@dataclass(frozen=True)
class Identity:
    """What a library name is, as far as ZLUDA is concerned."""

    family: str | None  # family id, "unknown" for unrecognised NVIDIA-like names, None if not CUDA
    family_name: str | None
    route: str | None  # redirect | passthrough | stub | blocked | unknown
    basis: str | None  # zluda-release | family-default | unknown-name
    replacement: str | None  # the ZLUDA file that takes this name
    zluda_library: str | None  # its function-table key
    advice: str | None = None


@dataclass(frozen=True)
class Dependency:
    edge: Edge
    identity: Identity
    symbols: dict[str, tuple[str, ...]] = field(default_factory=dict)  # state -> names

    @property
    def is_cuda(self) -> bool:
        return self.identity.family is not None


NOT_CUDA = Identity(None, None, None, None, None, None)


def identify(name: str, platform: str, rules: RuleSet, release: ZludaRelease) -> Identity:
    base = posixpath.basename(name.replace("\\", "/"))
    family = rules.family_for(base, platform)
    if family is None:
        if rules.is_unknown_cuda(base, platform):
            return Identity("unknown", "unrecognised NVIDIA library", "unknown", "unknown-name", None, None)
        return NOT_CUDA
    replacement = release.replacement_for(base, platform)
    if replacement is not None and replacement.library:
        table = release.functions.get(replacement.library, {})
        implemented = any(state == "implemented" for state in table.values())
        return Identity(
            family.id,
            family.name,
            "redirect" if implemented else "stub",
            "zluda-release",
            replacement.path,
            replacement.library,
            family.advice,
        )
    if replacement is not None:
        return Identity(family.id, family.name, "redirect", "zluda-release", replacement.path, None, family.advice)
    return Identity(family.id, family.name, family.default_route, "family-default", None, None, family.advice)


def classify_edges(
    binaries: dict[str, ScannedBinary], edges: list[Edge], rules: RuleSet, release: ZludaRelease
) -> list[Dependency]:
    cache: dict[tuple[str, str], Identity] = {}
    result = []
    for edge in edges:
        if edge.how == "system":
            result.append(Dependency(edge, NOT_CUDA))
            continue
        key = (edge.name.casefold() if edge.platform == "windows" else edge.name, edge.platform)
        identity = cache.get(key)
        if identity is None:
            identity = cache[key] = identify(edge.name, edge.platform, rules, release)
        symbols = _symbol_states(binaries[edge.source], edge, identity, rules, release)
        result.append(Dependency(edge, identity, symbols))
    return result


def _symbol_states(binary, edge, identity, rules, release) -> dict[str, tuple[str, ...]]:
    if identity.family is None:
        return {}
    names = list(edge.symbols)
    if edge.platform == "linux" and not names:
        names = _attributed_elf_symbols(binary, edge, identity, rules, release)
    if identity.zluda_library is None:
        return {"unchecked": tuple(sorted(names))} if names else {}
    grouped: dict[str, list[str]] = {state: [] for state in SYMBOL_STATES}
    for name in names:
        grouped[release.symbol_state(identity.zluda_library, name)].append(name)
    return {state: tuple(sorted(found)) for state, found in grouped.items() if found}


def _attributed_elf_symbols(binary, edge, identity, rules, release) -> list[str]:
    """Undefined ELF symbols carry no library unless versioned: tie the rest to this
    library when its ZLUDA table or its family's symbol pattern claims them."""
    versioned = {s for lib in binary.info.imports for s in lib.symbols}
    family = rules.family(identity.family) if identity.family != "unknown" else None
    pattern = family.symbol_pattern if family is not None else None
    table = release.functions.get(identity.zluda_library or "", {})
    claimed = []
    for name in binary.info.undefined_symbols:
        if name in versioned:
            continue
        if name in table or (pattern is not None and pattern.match(name)):
            claimed.append(name)
    return claimed
