"""The fast readers must produce exactly what the lief reference produces.

Compared field by field as whole BinaryInfo objects. The lief reader already
maps lief's view onto the model (lief_reader.py documents each mapping: COFF
long names via ``coff_string``, exports in name-table order, NOBITS sections
with file_size 0, the null ELF section dropped), so no normalisation is
needed here.

pefile, a reader written independently of lief, is the second reference for
PE files: machine, bitness, DLL or EXE, sections, imports (static and
delay-loaded, with function names and ordinals) and export names must agree
with it too (`pe_view`; pefile is in the test extra for this alone).

Only well-formed files are compared: on corrupt input lief returns partial
objects where the fast reader raises MalformedBinary (tested in
test_readers.py), so fixtures/corrupt/ is left out.
"""
from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import pytest
from test_readers import CUDA_ELF, FIXTURES, build_samples, fixture_binaries, make_elf

from cuda4amd.scan.read.engine import read_bytes, read_path

EXPECTED_WHEELS = (
    "cupy_cuda12x-14.2.0",
    "ctranslate2-4.8.5",
    "nvidia_cuda_runtime_cu12-12.9.79",
    "nvidia_cufft_cu12-11.4.1.4",
)


def explain(fast, ref) -> str:
    """A short account of the first differences, for the assertion message."""
    a, b = asdict(fast), asdict(ref)
    lines = []
    for key in a:
        if a[key] == b[key]:
            continue
        if isinstance(a[key], list) and isinstance(b[key], list):
            sa = {repr(x) for x in a[key]}
            sb = {repr(x) for x in b[key]}
            lines.append(f"{key}: fast-only {sorted(sa - sb)[:3]} lief-only {sorted(sb - sa)[:3]}"
                         + (" (order differs)" if sa == sb else ""))
        else:
            lines.append(f"{key}: fast {a[key]!r} lief {b[key]!r}")
    return "; ".join(lines)


def assert_agree(path: Path) -> None:
    fast = read_path(path)
    ref = read_path(path, engine="lief")
    assert fast == ref, f"{path}: {explain(fast, ref)}"
    if fast.format == "PE":
        assert_agrees_with_pefile(path, fast)


PE_MACHINES = {0x8664: "x86_64", 0x14C: "x86", 0xAA64: "arm64", 0x1C4: "arm"}


def pe_view(path: Path) -> dict:
    """What pefile reads in a PE file, in the terms of the model (BinaryInfo)."""
    import pefile

    # pefile's guards against corrupt files cut real ones: C++ names over 512 bytes (MAX_IMPORT_NAME_LENGTH,
    # MAX_SYMBOL_NAME_LENGTH) and DLLs with over 8192 exports (max_symbol_exports); lift them for these files
    limits = {name: getattr(pefile, name) for name in ("MAX_IMPORT_NAME_LENGTH", "MAX_SYMBOL_NAME_LENGTH")}
    pe = pefile.PE(str(path), fast_load=True, max_symbol_exports=1 << 20)
    try:
        for name in limits:
            setattr(pefile, name, pefile.MAX_STRING_LENGTH)
        pe.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY[name] for name in (
            "IMAGE_DIRECTORY_ENTRY_IMPORT", "IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT", "IMAGE_DIRECTORY_ENTRY_EXPORT")])
        machine = pe.FILE_HEADER.Machine
        imports = []
        for load, entries in (("static", getattr(pe, "DIRECTORY_ENTRY_IMPORT", [])),
                              ("delay", getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", []))):
            for entry in entries:
                names = tuple(i.name.decode("utf-8", "backslashreplace") for i in entry.imports if i.name is not None)
                ordinals = tuple(i.ordinal for i in entry.imports if i.name is None and i.ordinal is not None)
                imports.append((entry.dll.decode("utf-8", "backslashreplace"), load, names, ordinals))
        exports = sorted(e.name.decode("utf-8", "backslashreplace")
                         for e in getattr(getattr(pe, "DIRECTORY_ENTRY_EXPORT", None), "symbols", []) if e.name)
        return {
            "machine": PE_MACHINES.get(machine, f"unknown(0x{machine:x})"),
            "bits": 64 if pe.OPTIONAL_HEADER.Magic == 0x20B else 32,
            "kind": "dll" if pe.FILE_HEADER.Characteristics & 0x2000 else "exe",
            "sections": [(coff_name(pe, s.Name.rstrip(b"\0").decode("utf-8", "backslashreplace")), s.VirtualAddress,
                          s.Misc_VirtualSize, s.PointerToRawData, s.SizeOfRawData) for s in pe.sections],
            "imports": imports,
            "exports": exports,
        }
    finally:
        for name, value in limits.items():
            setattr(pefile, name, value)
        pe.close()


def coff_name(pe, name: str) -> str:
    """A section name "/4" is offset 4 into the COFF string table, which pefile does not follow
    (PE format specification, "Section Table": the table follows the COFF symbol table, 18 bytes a symbol)."""
    if not (name.startswith("/") and name[1:].isdigit()):
        return name
    table = pe.FILE_HEADER.PointerToSymbolTable + pe.FILE_HEADER.NumberOfSymbols * 18
    data = pe.__data__
    start = table + int(name[1:])
    end = data.find(b"\0", start)
    return bytes(data[start:end]).decode("utf-8", "backslashreplace")


def fast_view(info) -> dict:
    return {
        "machine": info.machine,
        "bits": info.bits,
        "kind": info.kind,
        "sections": [(s.name, s.virtual_address, s.virtual_size, s.file_offset, s.file_size) for s in info.sections],
        "imports": [(i.name, i.load, i.symbols, i.ordinals) for i in info.imports],
        "exports": sorted(info.exports),
    }


def assert_agrees_with_pefile(path: Path, fast) -> None:
    ours, theirs = fast_view(fast), pe_view(path)
    differing = {key: (ours[key], theirs[key]) for key in ours if ours[key] != theirs[key]}
    assert not differing, f"{path}: fast reader and pefile differ: {differing}"


# --------------------------------------------------------------------------------------
# fixtures and locally built samples
# --------------------------------------------------------------------------------------

FIXTURE_FILES = fixture_binaries()


@pytest.mark.skipif(not FIXTURE_FILES, reason="no PE/ELF fixtures built (fixtures/build.sh)")
@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_fast_equals_lief(path):
    assert_agree(path)


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return build_samples(tmp_path_factory.mktemp("agreement_samples"))


def test_samples_fast_equals_lief(samples):
    assert samples  # the handmade ELF images at least
    for path in samples.values():
        assert_agree(path)


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("little", [True, False])
def test_handmade_elf_fast_equals_lief(bits, little):
    # arm64/arm little endian, ppc64/ppc big endian (lief derives the byte
    # order of some machines from e_machine, so keep the pairs realistic)
    machine = {(64, True): 183, (32, True): 40, (64, False): 21, (32, False): 20}[bits, little]
    data = make_elf(bits=bits, little=little, machine=machine, interp=True, bind_now=True, **CUDA_ELF)
    assert read_bytes(data) == read_bytes(data, engine="lief")


# --------------------------------------------------------------------------------------
# real-world wheels
# --------------------------------------------------------------------------------------


def wheel_cache() -> Path:
    return Path(os.environ.get("CUDA4AMD_WHEEL_CACHE", "~/.cache/cuda4amd/wheels")).expanduser()


def cached_wheels() -> list[Path]:
    cache = wheel_cache()
    return sorted(cache.glob("*.whl")) if cache.is_dir() else []


