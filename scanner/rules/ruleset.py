"""The RuleSet: every rule kind of the shipped rules folder and of each extra one; see docs/rules.md.

    rules = load_rules()                       # shipped rules (+ extra folders)
    fam = rules.family_for("cublas64_12.dll", "windows")
    rel = rules.release(rules.default_release) # parsed on first use, kept on `rules`
    rel.replacement_for("cublas64_12.dll", "windows")
    rel.symbol_state("blas", "cublasSgemm_v2")  # "implemented" | "stub" | "missing"

Each rule kind's file is parsed by its own module (families, system,
releases, gpus, frameworks, kernels, runtime); this one walks the folders
(`_Loading.add_folder`) and answers the look-ups. There is no module state:
the caches live on a RuleSet (the release tables and the ordered pattern
lists it built on first use) and on a Family (its compiled patterns).
Invalid data raises RulesError naming the file and the problem.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType

from cuda4amd.rules.cudart import CUDART_FILE, CudartMap, load_cudart_files
from cuda4amd.rules.families import (
    FAMILIES_FILE,
    Family,
    Lookup,
    UnknownPattern,
    compile_now,
    family_patterns,
    flags_for,
    load_families,
    symbol_patterns,
    unknown_patterns,
)
from cuda4amd.rules.frameworks import FRAMEWORKS_DIR, Framework, load_frameworks
from cuda4amd.rules.gpus import GPU_PROFILES_FILE, GpuProfiles, load_profiles
from cuda4amd.rules.kernels import KERNELS_DIR, PtxFacts, load_ptx_files
from cuda4amd.rules.releases import (
    RELEASES_FILE,
    ZLUDA_DIR,
    Pin,
    ZludaRelease,
    load_release,
    load_releases_index,
    release_order,
)
from cuda4amd.rules.runtime import (
    GENERATORS_FILE,
    NAMES_FILE,
    RUNTIME_DIR,
    Generator,
    NameRules,
    load_generator_files,
    load_name_files,
)
from cuda4amd.rules.sublibraries import SUBLIBRARIES_FILE, Split, load_split_files
from cuda4amd.rules.system import SYSTEM_FILE, SystemGroup, SystemNames, check_kinds, load_system
from cuda4amd.rules.validate import PLATFORMS, Provenance, RulesError, basename, shipped_rules_dir

__all__ = ["RuleSet", "load_rules"]

GPUS_FILE = GPU_PROFILES_FILE.name


@dataclass(frozen=True, eq=False)
class RuleSet:
    families: tuple[Family, ...]
    unknown: tuple[UnknownPattern, ...]
    system: tuple[SystemGroup, ...]
    default_release: str
    release_tags: tuple[str, ...]
    pins: tuple[Pin, ...]
    provenance: tuple[Provenance, ...] = ()
    release_paths: Mapping[str, Path] = field(default_factory=dict, repr=False)
    #: every rules folder's gpus.toml, shipped first; a later file adds or replaces profiles
    gpu_files: tuple[Path, ...] = ()
    #: every rules folder's frameworks/ folder, shipped first; a later folder's framework wins
    framework_dirs: tuple[Path, ...] = ()
    #: every rules folder's kernels/ folder, shipped first; a later folder's row for a tag wins
    kernel_dirs: tuple[Path, ...] = ()
    #: every rules folder's runtime/ folder, shipped first (names.toml, generators.toml)
    runtime_dirs: tuple[Path, ...] = ()
    # per-instance caches (not global state): parsed releases, and the look-ups of
    # each platform, built on first use
    _releases: dict[str, ZludaRelease] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _family_lookups: dict[str, Lookup[Family]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _unknown_lookups: dict[str, Lookup[UnknownPattern]] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def _families_of(self, platform: str) -> Lookup[Family]:
        found = self._family_lookups.get(platform)
        if found is None:
            found = Lookup(family_patterns(self.families, platform), flags_for(platform))
            self._family_lookups[platform] = found
        return found

    def _unknown_of(self, platform: str) -> Lookup[UnknownPattern]:
        found = self._unknown_lookups.get(platform)
        if found is None:
            found = Lookup(unknown_patterns(self.unknown, platform), flags_for(platform))
            self._unknown_lookups[platform] = found
        return found

    @cached_property
    def _symbols(self) -> Lookup[Family]:
        return Lookup(symbol_patterns(self.families), 0)

    @cached_property
    def _system_names(self) -> SystemNames:
        return SystemNames(self.system)

    def validate(self) -> None:
        """Check everything load_rules leaves for later: compile every name and
        symbol pattern on its own, then the look-ups, and load every release
        table. Raises RulesError."""
        compile_now(self.families, self.unknown)
        for platform in PLATFORMS:
            self._families_of(platform)
            self._unknown_of(platform)
        self._symbols  # noqa: B018 - built and kept by the cached property
        for tag in self.release_tags:
            self.release(tag)
        self.cudart_driver  # noqa: B018 - parsed and kept by the cached property

    def release(self, tag: str) -> ZludaRelease:
        """The release table for `tag`, parsed from its file on first use."""
        cached = self._releases.get(tag)
        if cached is not None:
            return cached
        path = self.release_paths.get(tag)
        if path is None:
            where = next(iter(self.release_paths.values()), Path(ZLUDA_DIR)).parent
            raise RulesError(where, f"unknown ZLUDA release {tag!r}; known: {', '.join(self.release_tags)}")
        rel = load_release(path)
        self._releases[tag] = rel
        return rel

    def family(self, family_id: str) -> Family | None:
        return next((f for f in self.families if f.id == family_id), None)

    def family_for(self, file_name: str, platform: str) -> Family | None:
        """The family whose patterns match the basename of `file_name` (first
        in rule order), case-insensitively on Windows; None if none does."""
        name = basename(file_name, platform)  # validates platform
        return self._families_of(platform)(name)

    def family_for_symbol(self, symbol: str) -> Family | None:
        """The family whose `symbol_pattern` claims this C symbol name (first in
        rule order, case-sensitive), or None."""
        return self._symbols(symbol)

    def is_unknown_cuda(self, file_name: str, platform: str) -> bool:
        """Looks like an NVIDIA CUDA library but matches no family."""
        name = basename(file_name, platform)
        if self._families_of(platform)(name) is not None:
            return False
        return self._unknown_of(platform)(name) is not None

    def system_kind(self, file_name: str, platform: str) -> str | None:
        """The SYSTEM_KINDS entry ("system", "api-set", "redistributable",
        "host") of a library that is not a CUDA finding, or None."""
        return self._system_names.kind(file_name, platform)

    @cached_property
    def gpus(self) -> GpuProfiles:
        """The GPU profiles of every rules folder, parsed on first use."""
        if not self.gpu_files:
            raise RulesError(shipped_rules_dir() / GPUS_FILE, "shipped rules file is missing")
        profiles = load_profiles(self.gpu_files[0])
        for extra in self.gpu_files[1:]:
            profiles = load_profiles(extra, base=profiles)
        return profiles

    @cached_property
    def frameworks(self) -> tuple[Framework, ...]:
        """The framework files of every rules folder, parsed on first use. A
        framework id of a later folder replaces the earlier one, and comes
        first, so that its distributions are matched before the shipped ones."""
        merged: dict[str, Framework] = {}
        for folder in reversed(self.framework_dirs):
            for fw in load_frameworks(folder, rules=self):
                merged.setdefault(fw.id, fw)
        return tuple(merged.values())

    @cached_property
    def ptx(self) -> PtxFacts:
        """What each ZLUDA release does with module PTX (kernels/*.toml of every rules folder), parsed on first use."""
        return load_ptx_files(self.kernel_dirs)

    @cached_property
    def names(self) -> NameRules:
        """How loaders assemble library names at run time (runtime/names.toml of every
        rules folder), parsed on first use."""
        return load_name_files([d / NAMES_FILE for d in self.runtime_dirs if (d / NAMES_FILE).is_file()])

    @cached_property
    def splits(self) -> tuple[Split, ...]:
        """Front-ends and the sub-libraries only they load (runtime/sublibraries.toml of every rules
        folder, each optional), parsed on first use; they add up."""
        return load_split_files([d / SUBLIBRARIES_FILE for d in self.runtime_dirs
                                 if (d / SUBLIBRARIES_FILE).is_file()])

    @cached_property
    def generators(self) -> tuple[Generator, ...]:
        """The code generators of every rules folder's runtime/generators.toml, parsed on first use;
        a later folder's generator replaces an earlier one of the same id."""
        return load_generator_files([d / GENERATORS_FILE for d in self.runtime_dirs if (d / GENERATORS_FILE).is_file()])

    @cached_property
    def cudart_driver(self) -> CudartMap:
        """The driver function each CUDA runtime function ends in (runtime/cudart-to-driver.toml of every
        rules folder), parsed on first use; a later folder's row for a runtime function wins."""
        return load_cudart_files([d / CUDART_FILE for d in self.runtime_dirs if (d / CUDART_FILE).is_file()])

    def pin_for(self, tag: str, platform: str) -> Pin | None:
        return next((p for p in self.pins if p.tag == tag and p.platform == platform), None)


# ---------------------------------------------------------------------------
# load_rules
# ---------------------------------------------------------------------------

def _toml_files(folder: Path) -> list[Path]:
    try:
        return sorted(Path(e.path) for e in os.scandir(folder) if e.is_file() and e.name.endswith(".toml"))
    except FileNotFoundError:
        return []


@dataclass
class _Loading:
    """What load_rules has gathered so far, folder by folder (shipped first)."""

    shipped: Path
    families: list[Family] = field(default_factory=list)
    family_src: dict[str, Path] = field(default_factory=dict)
    unknown: list[UnknownPattern] = field(default_factory=list)
    system: list[SystemGroup] = field(default_factory=list)
    pins: list[Pin] = field(default_factory=list)
    provenance: list[Provenance] = field(default_factory=list)
    release_paths: dict[str, Path] = field(default_factory=dict)
    default: str | None = None
    default_src: Path | None = None
    gpu_files: list[Path] = field(default_factory=list)
    framework_dirs: list[Path] = field(default_factory=list)
    kernel_dirs: list[Path] = field(default_factory=list)
    runtime_dirs: list[Path] = field(default_factory=list)

    def add_folder(self, folder: Path) -> None:
        is_shipped = folder == self.shipped
        if not folder.is_dir():
            raise RulesError(folder, "rules folder does not exist")
        top = {p.name: p for p in _toml_files(folder)}
        for name, p in top.items():
            if name not in (FAMILIES_FILE, SYSTEM_FILE, GPUS_FILE):
                raise RulesError(p, f"unknown rules file (expected {FAMILIES_FILE}, {SYSTEM_FILE}, {GPUS_FILE}, "
                                    f"{ZLUDA_DIR}/{RELEASES_FILE}, {ZLUDA_DIR}/<tag>.toml or "
                                    f"{FRAMEWORKS_DIR}/<id>.toml)")
        for required in (FAMILIES_FILE, SYSTEM_FILE, GPUS_FILE):
            if is_shipped and required not in top:
                raise RulesError(folder / required, "shipped rules file is missing")
        if FAMILIES_FILE in top:
            self.add_families(top[FAMILIES_FILE], compile_patterns=not is_shipped)
        if SYSTEM_FILE in top:
            self.add_system(top[SYSTEM_FILE])
        if GPUS_FILE in top:
            self.gpu_files.append(top[GPUS_FILE])
        if (folder / FRAMEWORKS_DIR).is_dir():
            self.framework_dirs.append(folder / FRAMEWORKS_DIR)
        elif is_shipped:
            raise RulesError(folder / FRAMEWORKS_DIR, "shipped rules folder is missing")
        if (folder / KERNELS_DIR).is_dir():
            self.kernel_dirs.append(folder / KERNELS_DIR)
        self.add_runtime(folder / RUNTIME_DIR, is_shipped)
        self.add_zluda(folder / ZLUDA_DIR, is_shipped)

    def add_families(self, path: Path, compile_patterns: bool) -> None:
        prov, fams, unk = load_families(path)
        self.provenance.append(prov)
        if compile_patterns:  # a user's file: a bad regex shows at load, not mid-scan
            compile_now(fams, unk)
        for fam in fams:
            if fam.id in self.family_src:
                raise RulesError(path, f"duplicate family id {fam.id!r} (already defined in {self.family_src[fam.id]})")
            self.family_src[fam.id] = path
        self.families += fams
        self.unknown += unk

    def add_system(self, path: Path) -> None:
        prov, groups = load_system(path)
        self.provenance.append(prov)
        check_kinds(path, self.system, groups)
        self.system += groups

    def add_runtime(self, folder: Path, is_shipped: bool) -> None:
        if not folder.is_dir():
            if is_shipped:
                raise RulesError(folder, "shipped rules folder is missing")
            return
        for p in _toml_files(folder):
            if p.name not in (NAMES_FILE, GENERATORS_FILE, SUBLIBRARIES_FILE, CUDART_FILE):
                raise RulesError(p, f"unknown rules file (expected {RUNTIME_DIR}/{NAMES_FILE}, "
                                    f"{RUNTIME_DIR}/{GENERATORS_FILE}, {RUNTIME_DIR}/{SUBLIBRARIES_FILE} "
                                    f"or {RUNTIME_DIR}/{CUDART_FILE})")
        for required in (NAMES_FILE, GENERATORS_FILE, CUDART_FILE):
            if is_shipped and not (folder / required).is_file():
                raise RulesError(folder / required, "shipped rules file is missing")
        self.runtime_dirs.append(folder)

    def add_zluda(self, folder: Path, is_shipped: bool) -> None:
        zfiles = _toml_files(folder)
        if is_shipped and RELEASES_FILE not in {p.name for p in zfiles}:
            raise RulesError(folder / RELEASES_FILE, "shipped rules file is missing")
        for p in zfiles:
            if p.name == RELEASES_FILE:
                prov, default, pins = load_releases_index(p)
                self.provenance.append(prov)
                if default is not None:
                    self.default, self.default_src = default, p
                for pin in pins:
                    if any((q.tag, q.platform, q.asset) == (pin.tag, pin.platform, pin.asset) for q in self.pins):
                        raise RulesError(p, f"duplicate pin for {pin.tag} {pin.platform} {pin.asset}")
                self.pins += pins
                continue
            tag = p.stem
            if tag in self.release_paths:
                raise RulesError(p, f"ZLUDA release {tag!r} is already defined in {self.release_paths[tag]}")
            self.release_paths[tag] = p

    def rule_set(self) -> RuleSet:
        tags = tuple(sorted(self.release_paths, key=release_order))
        if self.default is None:
            raise RulesError(self.shipped / ZLUDA_DIR / RELEASES_FILE, "no [releases] default is set")
        if self.default not in self.release_paths:
            raise RulesError(self.default_src or self.shipped,
                             f"default release {self.default!r} has no zluda/{self.default}.toml; "
                             f"known: {', '.join(tags)}")
        return RuleSet(
            families=tuple(self.families),
            unknown=tuple(self.unknown),
            system=tuple(self.system),
            default_release=self.default,
            release_tags=tags,
            pins=tuple(self.pins),
            provenance=tuple(self.provenance),
            release_paths=MappingProxyType(self.release_paths),
            gpu_files=tuple(self.gpu_files),
            framework_dirs=tuple(self.framework_dirs),
            kernel_dirs=tuple(self.kernel_dirs),
            runtime_dirs=tuple(self.runtime_dirs),
        )


def load_rules(extra_dirs: Sequence[str | os.PathLike[str]] = ()) -> RuleSet:
    """Load the shipped rules, then each folder of `extra_dirs` in order.

    Every folder has the same layout, each file optional in an extra folder:
    ``families.toml``, ``system.toml``, ``gpus.toml``, ``frameworks/<id>.toml``,
    ``kernels/*.toml``, ``runtime/names.toml``, ``runtime/generators.toml``, ``runtime/sublibraries.toml``,
    ``runtime/cudart-to-driver.toml``,
    ``zluda/releases.toml``, ``zluda/<tag>.toml``. Extra folders add families,
    unknown-name patterns, system groups, releases and pins (re-using a
    family id, a release tag or a pin raises RulesError); they add or replace
    GPU profiles (by gfx), pitfalls (by id), frameworks (by id) and code
    generators (by id), and add run-time name templates. An extra
    ``zluda/releases.toml`` may set ``[releases] default`` (the last one
    wins). Release tables are parsed when ``RuleSet.release(tag)`` first asks
    for them; GPU profiles, frameworks, kernels facts and run-time rules on
    first use of ``RuleSet.gpus`` / ``.frameworks`` / ``.ptx`` / ``.names`` /
    ``.generators``, except an extra folder's, which are parsed here so
    that their errors show at once.
    """
    loading = _Loading(shipped_rules_dir())
    for folder in (loading.shipped, *(Path(d) for d in extra_dirs)):
        loading.add_folder(folder)
    rules = loading.rule_set()
    if len(rules.gpu_files) > 1:
        rules.gpus  # noqa: B018 - parse the extra gpus.toml now: its errors are the user's
    if len(rules.framework_dirs) > 1:
        rules.frameworks  # noqa: B018 - likewise for the extra frameworks
    if len(rules.kernel_dirs) > 1:
        rules.ptx  # noqa: B018 - likewise for the extra kernels facts
    if len(rules.runtime_dirs) > 1:
        rules.names  # noqa: B018 - likewise for the extra run-time names
        rules.generators  # noqa: B018 - and the extra code generators
        rules.splits  # noqa: B018 - and the extra front-end splits
        rules.cudart_driver  # noqa: B018 - and the extra runtime-to-driver rows
    return rules
