"""Classify CUDA dependencies: family, route through ZLUDA, and each symbol's state."""
from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from cuda4amd.model import SYMBOL_STATES, ScannedBinary, loader_key
from cuda4amd.rules.cudart import CudartMap, RuntimeCall
from cuda4amd.rules.releases import ZludaRelease
from cuda4amd.rules.ruleset import RuleSet
from cuda4amd.scan.graph import Edge, platform_of


@dataclass(frozen=True)
class Identity:
    """What a library name is, as far as ZLUDA is concerned."""

    family: str | None  # family id, "unknown" for unrecognised NVIDIA-like names, None if not CUDA
    family_name: str | None
    route: str | None  # redirect | passthrough | stub | blocked | unknown
    basis: str | None  # zluda-release | family-default | in-tree | unknown-name
    replacement: str | None  # the ZLUDA file that takes this name
    zluda_library: str | None  # its function-table key
    advice: str | None = None


@dataclass(frozen=True)
class DriverCall:
    """A CUDA runtime function a binary imports, the driver function it ends in (rules.cudart_driver)
    and that one's state in the release's driver table (implemented, stub or missing)."""

    call: RuntimeCall
    state: str


@dataclass(frozen=True)
class Dependency:
    edge: Edge
    identity: Identity
    symbols: dict[str, tuple[str, ...]] = field(default_factory=dict)  # state -> names
    #: of a library ZLUDA passes through (NVIDIA's cudart): its imported functions that end in a driver
    #: function of the release's table, in name order
    runtime_calls: tuple[DriverCall, ...] = ()

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


def binary_identities(
    binaries: list[ScannedBinary], aliases: dict[str, str], rules: RuleSet, release: ZludaRelease
) -> dict[str, Identity]:
    """What each binary itself is: an NVIDIA library (by its name or a link's
    name: libcublas.so.12 -> libcublas.so.12.9.1.3 is cuBLAS), or not CUDA."""
    names: dict[str, list[str]] = {b.path: [b.path] for b in binaries}
    for alias, real in sorted(aliases.items()):
        if real in names:
            names[real].append(alias)
    identities = {}
    for binary in binaries:
        platform = platform_of(binary)
        found = [identify(posixpath.basename(path), platform, rules, release) for path in names[binary.path]]
        known = [i for i in found if i.family not in (None, "unknown")]
        identities[binary.path] = known[0] if known else found[0]
    return identities


def in_tree_identities(
    binaries: dict[str, ScannedBinary], identities: dict[str, Identity]
) -> dict[str, Identity]:
    """NVIDIA libraries ZLUDA does not replace, judged by their own kernels.

    DESIGN §3: such a library runs on ZLUDA's driver only where its kernels
    carry PTX. When it is in the scanned tree and its fat binaries were read,
    that decides its route instead of the family default.
    """
    decided = {}
    for path, identity in identities.items():
        kernels = binaries[path].kernels
        if identity.basis != "family-default" or kernels is None:
            continue
        if kernels.state in ("ptx-available", "relocatable-ptx-only"):
            # it runs on ZLUDA's driver as far as its kernels allow: the
            # binary's own verdict says how far (PTX per module, -rdc)
            decided[path] = replace(identity, route="passthrough", basis="in-tree")
        elif kernels.state == "sass-only":
            decided[path] = replace(identity, route="blocked", basis="in-tree")
    return decided


def classify_edges(
    binaries: dict[str, ScannedBinary],
    edges: list[Edge],
    rules: RuleSet,
    release: ZludaRelease,
    in_tree: dict[str, Identity] | None = None,
) -> list[Dependency]:
    cache: dict[tuple[str, str], Identity] = {}
    result = []
    driver_judged: set[str] = set()  # binaries whose named driver functions are on an edge already
    driver_tables = _DriverTables(rules, release)  # built once for all binaries that name driver functions
    for edge in edges:
        if edge.how == "system":
            result.append(Dependency(edge, NOT_CUDA))
            continue
        key = (loader_key(edge.name, edge.platform), edge.platform)
        identity = cache.get(key)
        if identity is None:
            identity = cache[key] = identify(edge.name, edge.platform, rules, release)
        if in_tree and edge.resolved in in_tree:  # in the tree, or read through --search-path
            identity = in_tree[edge.resolved]
        binary = binaries[edge.source]
        if (edge.load == "by-name" and identity.zluda_library == "driver" and binary.driver_names is not None
                and edge.source not in driver_judged):
            driver_judged.add(edge.source)
            symbols = driver_tables.states(binary.driver_names.names)
        else:
            symbols = _symbol_states(binary, edge, identity, rules, release)
        calls: tuple[DriverCall, ...] = ()
        if identity.route == "passthrough" and identity.zluda_library is None and symbols.get("unchecked"):
            calls = driver_tables.runtime_calls(symbols["unchecked"], rules.cudart_driver)
        result.append(Dependency(edge, identity, symbols, calls))
    return result


_VERSIONED = re.compile(r"^(.+)_v(\d+)$")


def driver_function_states(names: Iterable[str], rules: RuleSet, release: ZludaRelease) -> dict[str, tuple[str, ...]]:
    """State of each driver function a binary names for cuGetProcAddress/dlsym.

    cuGetProcAddress takes the plain name and the caller's CUDA version and
    returns the newest variant that version knows (`cuCtxCreate` at 12.5 ->
    `cuCtxCreate_v4`: ZLUDA's zluda_bindgen/src/process_table.rs), so a
    plain name is judged by its newest variant in ZLUDA's table. A name no
    release of ZLUDA declares is not taken for a driver function (ZLUDA's
    tables declare the whole driver API of their CUDA headers); one that an
    other release declares is `missing` from this one.
    """
    return _DriverTables(rules, release).states(names)


class _DriverTables:
    """The tables driver_function_states judges by, each built on first need and
    kept for the next binary (classify_edges judges every binary that names
    driver functions with one: building them per binary cost more than judging)."""

    def __init__(self, rules: RuleSet, release: ZludaRelease) -> None:
        self.rules, self.release = rules, release
        self._table: dict[str, str] | None = None
        self._known: dict[str, str] | None = None  # only when a name is not in this release's table

    def states(self, names: Iterable[str]) -> dict[str, tuple[str, ...]]:
        grouped: dict[str, list[str]] = {state: [] for state in SYMBOL_STATES}
        for name in names:
            state = self.state(name)
            if state is not None:
                grouped[state].append(name)
        return {state: tuple(sorted(found)) for state, found in grouped.items() if found}

    def state(self, name: str) -> str | None:
        """A driver function's state as a request (its newest variant's), None for a name no release declares."""
        if self._table is None:
            self._table = _newest_variants(self.release.functions.get("driver", {}))
        state = self._table.get(name)
        if state is None:
            if self._known is None:
                self._known = _newest_variants(_declared_driver_functions(self.rules))
            if name not in self._known:
                return None  # a message or another API's identifier, not a driver function
            state = "missing"
        return state

    def runtime_calls(self, names: Iterable[str], cudart: CudartMap) -> tuple[DriverCall, ...]:
        """The driver function each runtime function of ``names`` ends in, with its state here. NVIDIA's
        cudart asks the driver for its entry points with cuGetProcAddress and the CUDA version it was
        built for (families.toml, runtime_api), so a driver name is judged as a request: by its newest
        `_vN` variant. A runtime function without a documented driver function is not judged."""
        found = []
        for name in sorted(names):
            call = cudart.calls.get(name)
            state = self.state(call.driver) if call is not None else None
            if call is not None and state is not None:
                found.append(DriverCall(call, state))
        return tuple(found)


def _newest_variants(table: Mapping[str, str]) -> dict[str, str]:
    """Each name's state as a request: a plain name's newest `_vN` variant, else the name itself.
    The exact legacy entry does not count when variants exist: a plain name in a string
    table is a cuGetProcAddress request (cuda.h's macros make anyone who links or dlsym()s
    spell the versioned name, as cudart does). Built once per table: looking each name's
    variants up by prefix cost 1.2 million comparisons on a real venv (0.5 s)."""
    newest: dict[str, tuple[int, str]] = {}
    for candidate, value in table.items():
        match = _VERSIONED.match(candidate)
        if match:
            base, number = match.group(1), int(match.group(2))
            if number > newest.get(base, (-1, ""))[0]:
                newest[base] = (number, value)
    states = dict(table)
    states.update({base: value for base, (_, value) in newest.items()})
    return states


def _declared_driver_functions(rules: RuleSet) -> dict[str, str]:
    """Every driver function some ZLUDA release declares (name -> its state there)."""
    declared: dict[str, str] = {}
    for tag in rules.release_tags:
        declared.update(rules.release(tag).functions.get("driver", {}))
    return declared


def _symbol_states(binary: ScannedBinary, edge: Edge, identity: Identity, rules: RuleSet,
                   release: ZludaRelease) -> dict[str, tuple[str, ...]]:
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


def _attributed_elf_symbols(binary: ScannedBinary, edge: Edge, identity: Identity, rules: RuleSet,
                            release: ZludaRelease) -> list[str]:
    """Undefined ELF symbols carry no library unless versioned: tie the rest to this
    library when its ZLUDA table or its family's symbol pattern claims them."""
    versioned = {s for lib in binary.info.imports for s in lib.symbols}
    family = rules.family(identity.family) if identity.family not in (None, "unknown") else None
    pattern = family.symbol_pattern if family is not None else None
    table = release.functions.get(identity.zluda_library or "", {})
    claimed = []
    for name in binary.info.undefined_symbols:
        if name in versioned:
            continue
        if name in table or (pattern is not None and pattern.match(name)):
            claimed.append(name)
    return claimed
