"""Plain data passed between the pipeline stages.

Every stage takes and returns these frozen-ish dataclasses; nothing here
knows how it was produced, so the fast reader and the lief reader can be
compared field by field.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Literal

BinaryFormat = Literal["PE", "ELF"]
LoadKind = Literal["static", "delay", "by-name"]
#: what ZLUDA does with a function a binary imports (a release's function tables):
#: implemented, stub (exported, returns NOT_SUPPORTED) or missing (not exported)
SYMBOL_STATES: tuple[str, ...] = ("implemented", "stub", "missing")
#: a report's groups of imported functions: SYMBOL_STATES, and "unchecked" (no table for the library)
REPORT_SYMBOL_STATES: tuple[str, ...] = (*SYMBOL_STATES, "unchecked")
#: the rules platform ("windows" / "linux") each binary format runs on
PLATFORM_OF_FORMAT: dict[str, str] = {"PE": "windows", "ELF": "linux"}


def platform_of(binary_format: str) -> str:
    """"windows" for a PE binary, "linux" for an ELF one."""
    return PLATFORM_OF_FORMAT[binary_format]


def loader_key(name: str, platform: str) -> str:
    """A file name as the platform's loader compares it: Windows ignores case, Linux does not."""
    return name.casefold() if platform == "windows" else name


@dataclass(frozen=True)
class Section:
    name: str
    virtual_address: int
    virtual_size: int
    file_offset: int
    file_size: int


@dataclass(frozen=True)
class ImportedLibrary:
    """One library a binary asks the loader for.

    For PE: one import (or delay-import) descriptor. For ELF: one DT_NEEDED
    entry; `symbols` holds the undefined dynamic symbols that the binary's
    version-needs table ties to that library (empty when unversioned).
    """

    name: str
    load: LoadKind
    symbols: tuple[str, ...] = ()
    ordinals: tuple[int, ...] = ()


@dataclass(frozen=True)
class BinaryInfo:
    """What a reader found in one binary. Paths are not part of it."""

    format: BinaryFormat
    machine: str  # "x86_64", "x86", "arm64", "arm", "unknown(0x…)"
    bits: int  # 32 or 64
    kind: str  # PE: "dll" | "exe"; ELF: "shared-library" | "executable" | "relocatable" | "core" | "other"
    imports: tuple[ImportedLibrary, ...] = ()
    # exported names; a scan leaves them out (read_buffer(exports=False)): no
    # stage after reading uses them, and they were most of the facts' bytes
    exports: tuple[str, ...] = ()
    sections: tuple[Section, ...] = ()
    # ELF only
    soname: str | None = None
    runpath: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    undefined_symbols: tuple[str, ...] = ()
    bind_now: bool = False


@dataclass(frozen=True, order=True)
class NameReference:
    """A CUDA library name found in a binary's data.

    ``name`` is the name as found (a template keeps its placeholders),
    ``encoding`` one of :data:`ENCODINGS`, ``template`` whether ``name``
    contains format placeholders.
    """

    name: str
    encoding: str
    template: bool = False


@dataclass(frozen=True, slots=True)
class FatbinEntry:
    """One entry of a fat binary container, from its header."""

    kind: str  # "ptx" | "sass" | "lto-ir" | "unknown(N)"
    arch: str  # "sm_86", "sm_90a", "sm_100f" (PTX entries too: compute_86 -> "sm_86")
    ptx_isa: str | None  # "9.0" for PTX entries, else None
    compression: str  # "none" | "lz4" | "zstd"
    section: str  # section holding the container
    relocatable: bool  # in __nv_rel / __nv_relfatbin (-rdc relocatable device code)
    size: int  # padded payload size
    uncompressed_size: int  # header field 0x38 when compressed, else == size
    debug: bool = False  # built with -G (header flag 0x2)


#: the counts of KernelReport.ptx_counts, in order (cuda4amd.scan.read.ptx.stage.COUNTS)
PTX_CHECK_COUNTS = ("ok", "functions_dropped", "load_fails", "empty_module", "no_ptx", "kernels")


@dataclass(frozen=True, slots=True)
class KernelReport:
    """What the fat binaries of one file carry.

    ``ptx_archs`` are the (arch, PTX ISA) pairs ZLUDA can use: PTX outside
    relocatable sections. ``relocatable_ptx_archs`` are pairs found *only* in
    relocatable device code. ``sass_archs``/``lto_ir_archs`` cover all
    sections. All sorted by SM number, unique.

    ``state``: "ptx-available" (some PTX outside relocatable sections),
    "relocatable-ptx-only" (PTX only in __nv_rel/__nv_relfatbin), "sass-only"
    (entries but no PTX at all: SASS, LTO-IR or unknown kinds), "none" (no
    entries: no container, or only empty ones).
    """

    entries: tuple[FatbinEntry, ...] = ()
    containers: int = 0
    sections: tuple[str, ...] = ()  # where containers were found, first-seen order
    sass_archs: tuple[str, ...] = ()
    ptx_archs: tuple[tuple[str, str], ...] = ()
    relocatable_ptx_archs: tuple[tuple[str, str], ...] = ()
    lto_ir_archs: tuple[str, ...] = ()
    state: str = "none"  # "ptx-available" | "sass-only" | "relocatable-ptx-only" | "none"
    compressed: bool = False  # any entry compressed
    #: Modules: containers outside relocatable sections that carry code (see
    #: cuda4amd.scan.read.fatbin, "Modules"); how many of them have usable PTX.
    modules: int = 0
    modules_with_ptx: int = 0
    #: modules whose only PTX was built with -G (`.target sm_XX, debug`),
    #: counted in modules_with_ptx: not every ZLUDA release parses it
    modules_debug_ptx_only: int = 0
    #: containers without code: nvlink's device-link stub of a non -rdc
    #: build (cubins without a .text section), or empty containers
    codeless_containers: int = 0
    #: ZLUDA's PTX check (cuda4amd.scan.read.ptx.stage) over the registered containers (.nv_fatb,
    #: .nv_fatbin) that carry PTX, at every release with PTX rules: per tag (ptx_tags) the counts of
    #: containers ok, functions_dropped, load_fails, empty_module, no_ptx and the kernels of the
    #: modules ZLUDA picks (ptx_counts), the kernels dropped (ptx_dropped), the first refusal's
    #: (construct, source) or () (ptx_refusal)
    ptx_tags: tuple[str, ...] = ()
    ptx_counts: tuple[tuple[int, ...], ...] = ()
    ptx_dropped: tuple[tuple[str, ...], ...] = ()
    ptx_refusal: tuple[tuple[str, ...], ...] = ()
    #: the same check of the containers carrying PTX that nothing registers (cuda4amd.scan.read.fatbin,
    #: analyse_kernels: relocatable device code, data-section containers of the deep search): per tag
    #: (ptx_unregistered_tags) the counts (COUNTS), how many kernels are dropped or lost, the first
    #: refusal; the sections holding them, first-seen order
    ptx_unregistered_tags: tuple[str, ...] = ()
    ptx_unregistered_counts: tuple[tuple[int, ...], ...] = ()
    ptx_unregistered_dropped: tuple[int, ...] = ()
    ptx_unregistered_refusal: tuple[tuple[str, ...], ...] = ()
    ptx_unregistered_sections: tuple[str, ...] = ()

    def unregistered_ptx_check(self, tag: str) -> dict | None:
        """The JSON shape of the PTX check of the never registered containers at ``tag`` (report field
        kernels.unregistered_ptx_check), None if there are none or they were not checked."""
        if tag not in self.ptx_unregistered_tags:
            return None
        i = self.ptx_unregistered_tags.index(tag)
        counts = dict(zip(PTX_CHECK_COUNTS, self.ptx_unregistered_counts[i], strict=True))
        refusal = self.ptx_unregistered_refusal[i]
        return {
            "release": tag,
            "sections": list(self.ptx_unregistered_sections),
            "containers": {k: counts[k] for k in PTX_CHECK_COUNTS[:5]},
            "kernels": counts["kernels"],
            "dropped_kernels": self.ptx_unregistered_dropped[i],
            "first_refusal": {"construct": refusal[0], "source": refusal[1]} if refusal else None,
        }

    def ptx_check(self, tag: str) -> dict | None:
        """The JSON shape of the PTX check at ``tag`` (report field kernels.ptx_check), None if not checked."""
        if tag not in self.ptx_tags:
            return None
        i = self.ptx_tags.index(tag)
        counts = dict(zip(PTX_CHECK_COUNTS, self.ptx_counts[i], strict=True))
        refusal = self.ptx_refusal[i]
        return {
            "release": tag,
            "containers": {k: counts[k] for k in PTX_CHECK_COUNTS[:5]},
            "kernels": counts["kernels"],
            "dropped_kernels": list(self.ptx_dropped[i]),
            "first_refusal": {"construct": refusal[0], "source": refusal[1]} if refusal else None,
        }

    @property
    def modules_without_ptx(self) -> int:
        return self.modules - self.modules_with_ptx

    def to_dict(self) -> dict:
        """JSON-friendly summary (entries themselves are left out)."""
        return {
            "modules": {
                "total": self.modules,
                "with_ptx": self.modules_with_ptx,
                "without_ptx": self.modules_without_ptx,
                "debug_ptx_only": self.modules_debug_ptx_only,
                "codeless_containers": self.codeless_containers,
            },
            "state": self.state,
            "sass": list(self.sass_archs),
            "ptx": [{"arch": a, "isa": i, "target": ptx_target_kind(a)} for a, i in self.ptx_archs],
            "relocatable_ptx": [{"arch": a, "isa": i} for a, i in self.relocatable_ptx_archs],
            "lto_ir": list(self.lto_ir_archs),
            "containers": self.containers,
            "sections": list(self.sections),
            "compressed": self.compressed,
        }


def ptx_target_kind(arch: str) -> str:
    """PTX target kind: "arch-specific" (sm_90a: runs only on that SM), "family"
    (sm_100f: that family), else "portable" (JIT-compiled for any later SM)."""
    return "arch-specific" if arch.endswith("a") else "family" if arch.endswith("f") else "portable"


@dataclass(frozen=True)
class DriverNames:
    """CUDA driver functions a binary names for resolving at run time
    (found by cuda4amd.scan.read.drivernames)."""

    names: tuple[str, ...] = ()  # the binary's own, sorted, unique
    runtime_table: int = 0  # names left out as the CUDA runtime's table


@dataclass(frozen=True)
class PrivateStrings:
    """What a report must not contain: home folders, user names, host names
    (cuda4amd.report.redact replaces them; host probes supply them)."""

    homes: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileError:
    """A file that could not be read; the scan goes on without it."""

    path: str
    stage: str  # "discover" | "read" (not readable); "kernels" | "strings" | "loader" (read, with a problem)
    message: str


@dataclass
class ScannedBinary:
    """A binary found by discovery, with the facts its reader produced."""

    path: str  # relative to the scan target, "/"-separated
    info: BinaryInfo
    size: int = 0
    distribution: str | None = None
    kernels: KernelReport | None = None  # fat binary contents, when it has any
    by_name: tuple[NameReference, ...] = ()  # CUDA libraries it names for loading at run time
    driver_names: DriverNames | None = None  # driver functions it names, when it loads the driver by name
    # whether a CUDA family claims one of its undefined symbols (read.payload.CudaSymbols);
    # None: the reader did not look (scan/routes.py works it out if it needs it)
    calls_cuda: bool | None = None


@dataclass(frozen=True)
class ReadOutcome:
    """One binary read (by the read stage or from the facts cache): its facts, None if it
    could not be read, and its per-file errors in order."""

    binary: ScannedBinary | None
    errors: tuple[FileError, ...] = ()


def _pickled_by_fields(cls: Any) -> None:
    """Pickle instances of ``cls`` as (class, field values in order), unpickled by one call of its __init__.

    The read stage's workers send their results back pickled, many thousands
    of these per scan. Without this, a frozen slotted dataclass unpickles
    through dataclasses' __setstate__, which looks up dataclasses.fields()
    for every object; the others carry a dict of field names each.
    """
    names = tuple(field.name for field in fields(cls))
    get = operator.attrgetter(*names)
    values: Callable[[Any], tuple] = get if len(names) > 1 else lambda obj: (get(obj),)

    def __reduce__(self: Any) -> tuple[type, tuple]:
        return cls, values(self)

    cls.__reduce__ = __reduce__  # cls is Any: mypy refuses assigning to a method of a known class


for _plain in (Section, ImportedLibrary, BinaryInfo, NameReference, FatbinEntry, KernelReport, DriverNames,
               PrivateStrings, FileError, ScannedBinary, ReadOutcome):
    _pickled_by_fields(_plain)
del _plain
