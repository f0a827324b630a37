"""What a binary carries beyond its import tables: GPU kernels and library names.

Run on the same mapped buffer the reader used, right after it. A corrupt
fat binary or string table spoils only that part of the facts: the binary's
imports still count, and the damage becomes a per-file error.
"""
from __future__ import annotations

import dataclasses
import posixpath
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cuda4amd.model import BinaryInfo, FileError, platform_of
from cuda4amd.rules.releases import ZludaRelease
from cuda4amd.rules.ruleset import RuleSet
from cuda4amd.scan.classify import identify
from cuda4amd.scan.read.binview import Buffer, MalformedBinary
from cuda4amd.scan.read.byname import NamePatterns, NameReference, expand_template, find_library_names
from cuda4amd.scan.read.drivernames import DriverNames, find_driver_names
from cuda4amd.scan.read.elf import loader_disagreements
from cuda4amd.scan.read.fatbin import KernelReport, Magics, analyse_kernels

if TYPE_CHECKING:
    from cuda4amd.scan.read.ptx.stage import PtxStage


@dataclass(frozen=True)
class Payload:
    kernels: KernelReport | None
    by_name: tuple[NameReference, ...]
    errors: tuple[FileError, ...]
    driver_names: DriverNames | None = None
    calls_cuda: bool | None = None  # CudaSymbols.called_by; None where routes will not ask (PayloadInspector.inspect)


#: undefined symbols looked at per binary (enough to tell; bounded for huge binaries)
MAX_SYMBOLS = 20_000


class CudaSymbols:
    """Whether a CUDA family's ``symbol_pattern`` claims one of a binary's
    undefined symbols (the first MAX_SYMBOLS): the binary calls CUDA functions.
    scan/routes.py asks it of binaries with no route to a CUDA library.

    The symbols seen and those a family claims are kept for the next binary:
    most undefined symbols (libc, libstdc++, Python's C API) recur in every
    binary of a tree, and one regex match per symbol per binary was the bulk
    of this work. The read stage answers it per binary (each worker with its
    own sets), so a facts cache hit carries the answer.
    """

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self.seen: set[str] = set()
        self.claimed: set[str] = set()

    def called_by(self, undefined_symbols: Sequence[str]) -> bool:
        symbols = undefined_symbols[:MAX_SYMBOLS]
        if not self.seen.issuperset(symbols):  # most binaries name nothing new: no set built for them
            fresh = set(symbols)
            fresh -= self.seen
            self.seen |= fresh
            self.claimed.update(symbol for symbol in fresh if self.rules.family_for_symbol(symbol) is not None)
        return not self.claimed.isdisjoint(symbols)


@dataclass(frozen=True)
class PayloadInspector:
    rules: RuleSet
    release: ZludaRelease
    #: the by-name search patterns, compiled once for every binary of the scan
    names: NamePatterns = field(init=False, repr=False, compare=False)
    #: the symbols seen so far, in this process (a worker has its own copy)
    cuda_symbols: CudaSymbols = field(init=False, repr=False, compare=False)
    #: ZLUDA's PTX check at every release, made on first use (a scan answered by the facts cache never
    #: loads its rules): its decisions kept for the next binary, per process
    ptx_stages: list[PtxStage] = field(init=False, repr=False, compare=False, default_factory=list)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", NamePatterns(self.rules))
        object.__setattr__(self, "cuda_symbols", CudaSymbols(self.rules))

    def inspect(self, path: str, buf: Buffer, info: BinaryInfo) -> Payload:
        mode = self.kernel_scan(path, info)
        if mode is None:
            return Payload(None, (), ())  # ZLUDA replaces this file: it is never loaded
        errors: list[FileError] = []
        if info.format == "ELF":  # the answer follows ld.so; where the section headers differ, say so
            # stage "loader", not "read": the file was read (a "read" error means it could not be,
            # and a single-file target with one is refused as unreadable)
            errors += [FileError(path, "loader", f"{note} (the answer follows ld.so)")
                       for note in loader_disagreements(buf)]
        kernels = None
        magics = Magics(buf)  # the deep kernel search and the by-name search read the same data sections
        registered: list[int] = []
        unregistered: list[tuple[int, str]] = []  # (offset, section)
        notes: list[str] = []  # container sections read through the loader's map, not their headers
        try:
            kernels = analyse_kernels(buf, info, deep=mode == "deep", magics=magics, ptx_registered=registered,
                                      ptx_unregistered=unregistered, notes=notes)
        except MalformedBinary as exc:
            errors.append(FileError(path, "kernels", f"fat binary: {exc}"))
        errors += [FileError(path, "loader", f"fat binary: {note}") for note in notes]
        if kernels is not None and (registered or unregistered):
            kernels = self.check_ptx(path, buf, kernels, registered, unregistered, errors)
        try:
            by_name = find_library_names(buf, info, self.rules, self.names, nvidia=mode == "deep", magics=magics)
        except MalformedBinary as exc:
            by_name = ()
            errors.append(FileError(path, "strings", f"string table: {exc}"))
        if kernels is not None and kernels.state == "none":
            kernels = None
        driver_names = find_driver_names(buf, info) if self.loads_driver(by_name, info) else None
        # asked by routes.unseen_loaders only of a binary with no kernels and no CUDA library among its
        # dependencies, not an NVIDIA library itself: the others are left to it (it works out any it asks),
        # since most undefined symbols of a big tree are those of binaries that link CUDA directly
        calls_cuda = None
        if mode == "cheap" and kernels is None and not self.imports_cuda(info):
            calls_cuda = self.cuda_symbols.called_by(info.undefined_symbols)
        return Payload(kernels, by_name, tuple(errors), driver_names, calls_cuda)

    def check_ptx(self, path: str, buf: Buffer, kernels: KernelReport, registered: list[int],
                  unregistered: list[tuple[int, str]], errors: list[FileError]) -> KernelReport:
        """``kernels`` with ZLUDA's PTX check of the registered containers at ``registered`` and, apart,
        of the never registered ones at ``unregistered`` (analyse_kernels)."""
        if not self.ptx_stages:
            from cuda4amd.scan.read.ptx.stage import PtxStage  # here: only binaries with PTX need it

            self.ptx_stages.append(PtxStage.for_rules(self.rules.kernel_dirs))
        try:
            facts = self.ptx_stages[0].check(buf, registered)
            other = self.ptx_stages[0].check(buf, [off for off, _ in unregistered])
        except (ValueError, struct.error) as exc:  # a container fatbin.py accepted: not expected
            errors.append(FileError(path, "kernels", f"PTX check: {exc}"))
            return kernels
        sections = tuple(dict.fromkeys(section for _, section in unregistered))
        return dataclasses.replace(
            kernels, ptx_tags=facts.tags, ptx_counts=facts.counts, ptx_dropped=facts.dropped,
            ptx_refusal=facts.refusal, ptx_unregistered_tags=other.tags, ptx_unregistered_counts=other.counts,
            ptx_unregistered_dropped=tuple(len(d) for d in other.dropped), ptx_unregistered_refusal=other.refusal,
            ptx_unregistered_sections=sections if other.tags else ())

    def imports_cuda(self, info: BinaryInfo) -> bool:
        """Whether the binary imports a library of a CUDA family by name."""
        platform = platform_of(info.format)
        return any(self.rules.family_for(posixpath.basename(i.name), platform) is not None for i in info.imports)

    def loads_driver(self, by_name: tuple[NameReference, ...], info: BinaryInfo) -> bool:
        """Whether the binary names the CUDA driver library for loading at run
        time: then it resolves driver functions by name too (issue 10, item 4)."""
        platform = platform_of(info.format)
        for ref in by_name:
            # a template or an assembled name ("libcuda.so.{version}") counts by the names it stands for
            names = expand_template(ref.name, self.rules, platform) if ref.template else (ref.name,)
            for name in names:
                family = self.rules.family_for(posixpath.basename(name), platform)
                if family is not None and "driver" in family.zluda_libraries:
                    return True
        return False

    def kernel_scan(self, path: str, info: BinaryInfo) -> str | None:
        """None (not worth reading), "cheap" (known fat binary sections) or "deep" (also .data/.rdata/.cask_re).

        Deep only where the verdict depends on it: NVIDIA's own libraries that
        ZLUDA does not replace keep their kernels in data sections, and
        whether those carry PTX decides whether they can run. Libraries
        ZLUDA replaces are never loaded, so their kernels do not matter.
        """
        platform = platform_of(info.format)
        identity = identify(posixpath.basename(path), platform, self.rules, self.release)
        if identity.family is None:
            return "cheap"
        if identity.route in ("redirect", "stub"):
            return None
        return "deep"
