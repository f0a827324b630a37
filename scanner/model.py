"""Plain data passed between the pipeline stages.

Every stage takes and returns these frozen-ish dataclasses; nothing here
knows how it was produced, so the fast reader and the lief reader can be
compared field by field.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cuda4amd.scan.read.byname import NameReference
    from cuda4amd.scan.read.drivernames import DriverNames
    from cuda4amd.scan.read.fatbin import KernelReport

BinaryFormat = Literal["PE", "ELF"]
LoadKind = Literal["static", "delay", "by-name"]


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
    exports: tuple[str, ...] = ()
    sections: tuple[Section, ...] = ()
    # ELF only
    soname: str | None = None
    runpath: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    undefined_symbols: tuple[str, ...] = ()
    bind_now: bool = False


@dataclass(frozen=True)
class FileError:
    """A file that could not be read; the scan goes on without it."""

    path: str
    stage: str  # "discover" | "read"
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
