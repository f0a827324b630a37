"""Reference reader built on lief: produces the same BinaryInfo as the fast
readers, to test them against. Slow and memory hungry (lief reads whole
files); never imported unless engine="lief" is asked for.

lief 1.0 rarely raises on bad input: it returns None, logs, and hands back
partial objects. This module turns those cases into MalformedBinary where it
can tell; readers.py converts anything else that escapes.
"""
from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterable
from typing import Any

import lief

from cuda4amd.model import BinaryInfo, ImportedLibrary, Section
from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.elf import (
    DF_1_NOW,
    DF_BIND_NOW,
    ET_CORE,
    ET_DYN,
    ET_EXEC,
    ET_REL,
    SHT_NOBITS,
    is_export,
)
from cuda4amd.scan.read.elf import machine_name as elf_machine_name
from cuda4amd.scan.read.pe import IMAGE_FILE_DLL
from cuda4amd.scan.read.pe import machine_name as pe_machine_name
from cuda4amd.scan.read.sniff import sniff_file

#: a binary lief parsed: its stubs type the entries by their base class (a DynamicEntry has no `name`,
#: a data directory may be None), so its objects are read untyped
LiefBinary = Any

# keep lief quiet: its warnings go to stderr otherwise (any error: an older or newer lief without it)
with contextlib.suppress(Exception):
    lief.logging.disable()
# nanobind (lief's binding) lists every lief object alive at interpreter exit on stderr, 32 lines for one
# scan: the command line ends without freeing its heap on purpose (cli/__init__.py entry_point, gc.freeze),
# so lief's own module objects (objc.DeclOpt, assembly.AssemblerConfig) are counted as leaked. Not a leak:
# the OS takes the heap back; lief's switch for it (nanobind's set_leak_warnings) keeps `--engine lief` quiet
with contextlib.suppress(AttributeError):  # a lief before 0.16 has no such switch
    lief.disable_leak_warning()


def _name(s: str | bytes) -> str:
    """lief hands back str for valid UTF-8 and bytes otherwise; match binview.decode."""
    if isinstance(s, bytes):
        try:
            return s.decode("utf-8")
        except UnicodeDecodeError:
            return s.decode("utf-8", "backslashreplace")
    return s


def read_lief(source: str | bytes) -> BinaryInfo:
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            head = f.read(4)
        data = None
    else:
        head = source[:4]
        data = source
    if head[:4] == b"\x7fELF":
        cfg = lief.ELF.ParserConfig()
        cfg.parse_relocations = False
        cfg.parse_symtab_symbols = False
        cfg.parse_notes = False
        cfg.parse_overlay = False
        b = lief.ELF.parse(source if data is None else data, cfg)
        if b is None:
            raise MalformedBinary("lief could not parse this ELF file")
        _check_elf(b, _size(source, data))
        return _elf(b)
    if head[:2] == b"MZ":
        if not _is_pe(source, data):
            raise MalformedBinary("MZ header without a PE signature: a DOS program or a damaged PE file")
        pe_cfg = lief.PE.ParserConfig()
        pe_cfg.parse_reloc = False
        pe_cfg.parse_rsrc = False
        pe_cfg.parse_signature = False
        pe_cfg.parse_exceptions = False
        pe = lief.PE.parse(source if data is None else data, pe_cfg)
        if pe is None:
            raise MalformedBinary("lief could not parse this PE file")
        _check_pe(pe, _size(source, data))
        return _pe(pe)
    raise MalformedBinary("not a PE or ELF binary (unknown magic)")


def _is_pe(source: str | bytes, data: bytes | None) -> bool:
    if data is None:
        with open(source, "rb") as f:
            return sniff_file(f) == "PE"
    return sniff_file(io.BytesIO(data)) == "PE"


def _size(source: str | bytes, data: bytes | None) -> int:
    return os.path.getsize(source) if data is None else len(data)


def _check_pe(b: LiefBinary, size: int) -> None:
    """lief accepts truncated tables silently; refuse what the loader would refuse."""
    hdr = b.header
    end = b.dos_header.addressof_new_exeheader + 24 + hdr.sizeof_optional_header + 40 * hdr.numberof_sections
    if end > size:
        raise MalformedBinary(f"PE headers end at {end:#x}, beyond the end of the file ({size:#x} bytes)")
    T = lief.PE.DataDirectory.TYPES
    for t, what in ((T.IMPORT_TABLE, "import directory"),
                    (T.DELAY_IMPORT_DESCRIPTOR, "delay-import directory"),
                    (T.EXPORT_TABLE, "export directory")):
        rva = b.data_directory(t).rva
        if not rva:
            continue
        if b.section_from_rva(rva) is None and rva >= b.optional_header.sizeof_headers:
            raise MalformedBinary(f"{what} RVA {rva:#x} is outside every section")
        if b.rva_to_offset(rva) >= size:
            raise MalformedBinary(f"{what} RVA {rva:#x} maps beyond the end of the file")


def _check_elf(b: LiefBinary, size: int) -> None:
    h = b.header
    ehsize = 64 if h.identity_class == lief.ELF.Header.CLASS.ELF64 else 32 + 20
    if size < ehsize:
        raise MalformedBinary(f"ELF header needs {ehsize} bytes, the file has {size}")
    if h.numberof_segments and h.program_header_offset + h.numberof_segments * h.program_header_size > size:
        raise MalformedBinary("ELF program header table lies beyond the end of the file")
    if h.numberof_sections and h.section_header_offset + h.numberof_sections * h.section_header_size > size:
        raise MalformedBinary("ELF section header table lies beyond the end of the file")


# --- PE ----------------------------------------------------------------------------


def _pe(b: LiefBinary) -> BinaryInfo:
    machine = int(b.header.machine.value)
    magic = b.optional_header.magic
    bits = 64 if magic == lief.PE.PE_TYPE.PE32_PLUS else 32
    chars = int(b.header.characteristics)
    sections = tuple(
        Section(
            # lief's ``name`` keeps the raw "/N"; the resolved COFF long name
            # (string table at PointerToSymbolTable + 18*NumberOfSymbols) is
            # ``coff_string``, None when lief found no string table.
            _name(s.coff_string.string) if s.coff_string is not None else _name(s.name),
            s.virtual_address,
            s.virtual_size,
            s.pointerto_raw_data,
            s.sizeof_raw_data,
        )
        for s in b.sections
    )
    imports = []
    for imp in b.imports:
        names, ords = _entries(imp.entries)
        imports.append(ImportedLibrary(_name(imp.name), "static", names, ords))
    for imp in b.delay_imports:
        names, ords = _entries(imp.entries)
        imports.append(ImportedLibrary(_name(imp.name), "delay", names, ords))
    exports: tuple[str, ...] = ()
    exp = b.get_export()
    if exp is not None:
        # lief lists export entries by ordinal (address table order) and
        # includes ordinal-only entries; the fast reader gives the names in
        # name-pointer-table order, which linkers sort by byte value (the
        # loader binary-searches it). Sorting by UTF-8 bytes matches.
        exported = [_name(e.name) for e in exp.entries if e.name]
        exports = tuple(sorted(exported, key=lambda n: n.encode("utf-8", "surrogateescape")))
    return BinaryInfo(
        format="PE",
        machine=pe_machine_name(machine),
        bits=bits,
        kind="dll" if chars & IMAGE_FILE_DLL else "exe",
        imports=tuple(imports),
        exports=exports,
        sections=sections,
    )


def _entries(entries: Iterable[Any]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    names, ords = [], []
    for e in entries:
        if e.is_ordinal:
            ords.append(e.ordinal & 0xFFFF)
        else:
            names.append(_name(e.name))
    return tuple(names), tuple(ords)


# --- ELF ---------------------------------------------------------------------------


def _elf(b: LiefBinary) -> BinaryInfo:
    hdr = b.header
    bits = 64 if hdr.identity_class == lief.ELF.Header.CLASS.ELF64 else 32
    little = hdr.identity_data == lief.ELF.Header.ELF_DATA.LSB
    e_type = int(hdr.file_type.value)
    em = int(hdr.machine_type.value)
    has_interp = any(s.type == lief.ELF.Segment.TYPE.INTERP for s in b.segments)
    if e_type == ET_DYN:
        kind = "executable" if has_interp else "shared-library"
    else:
        kind = {ET_REL: "relocatable", ET_EXEC: "executable", ET_CORE: "core"}.get(e_type, "other")

    sections = []
    for i, s in enumerate(b.sections):
        if i == 0 and int(s.type.value) == 0:  # the reserved null section
            continue
        nobits = int(s.type.value) == SHT_NOBITS
        sections.append(Section(_name(s.name), s.virtual_address, s.size, s.offset, 0 if nobits else s.size))

    needed, soname, runpath, rpath, bind_now = _elf_dynamic(b)
    undefined, exports, by_lib = _elf_symbols(b)

    imports = []
    used: set[str] = set()
    for n in needed:
        syms: tuple[str, ...] = ()
        if n not in used:
            syms = tuple(sorted(by_lib.get(n, ())))
            used.add(n)
        imports.append(ImportedLibrary(n, "static", syms))

    return BinaryInfo(
        format="ELF",
        machine=elf_machine_name(em, bits, little),
        bits=bits,
        kind=kind,
        imports=tuple(imports),
        exports=tuple(sorted(exports)),
        sections=tuple(sections),
        soname=soname,
        runpath=tuple(runpath),
        rpath=tuple(rpath),
        undefined_symbols=tuple(sorted(undefined)),
        bind_now=bind_now,
    )


def _elf_dynamic(b: LiefBinary) -> tuple[list[str], str | None, list[str], list[str], bool]:
    """(DT_NEEDED names, DT_SONAME, DT_RUNPATH and DT_RPATH folders, whether binding is immediate)."""
    T = lief.ELF.DynamicEntry.TAG
    needed: list[str] = []
    soname = None
    runpath: list[str] = []
    rpath: list[str] = []
    bind_now = False
    for d in b.dynamic_entries:
        tag = d.tag
        if tag == T.NEEDED:
            needed.append(_name(d.name))
        elif tag == T.SONAME:
            soname = _name(d.name)
        elif tag == T.RUNPATH:
            runpath.extend(p for p in _name(d.runpath).split(":") if p)
        elif tag == T.RPATH:
            rpath.extend(p for p in _name(d.rpath).split(":") if p)
        elif (tag == T.BIND_NOW or (tag == T.FLAGS and d.value & DF_BIND_NOW)
              or (tag == T.FLAGS_1 and d.value & DF_1_NOW)):
            bind_now = True
    return needed, soname, runpath, rpath, bind_now


def _elf_symbols(b: LiefBinary) -> tuple[set[str], set[str], dict[str, set[str]]]:
    """(undefined dynamic symbols, exported ones, {needed file: the undefined symbols its
    version requirement names})."""
    ver_file: dict[int, str] = {}
    for req in b.symbols_version_requirement:
        for aux in req.get_auxiliary_symbols():
            ver_file.setdefault(aux.other & 0x7FFF, _name(req.name))

    undefined: set[str] = set()
    exports: set[str] = set()
    by_lib: dict[str, set[str]] = {}
    LOCAL = lief.ELF.Symbol.BINDING.LOCAL
    for s in b.dynamic_symbols:
        name = _name(s.name)
        if not name or s.binding == LOCAL:
            continue
        if s.shndx == 0:
            undefined.add(name)
            sv = s.symbol_version
            if sv is not None and ver_file:
                f = ver_file.get(sv.value & 0x7FFF)
                if f is not None:
                    by_lib.setdefault(f, set()).add(name)
        elif is_export(int(s.type.value), s.shndx, s.value, s.size):
            exports.add(name)
    return undefined, exports, by_lib
