"""Issue 11, items 8-9 and the fuzz test: mutated binaries are read as the loader would read them.

The model (`ld_so_needed`) is written from glibc's elf/dl-load.c (_dl_map_object_from_fd:
PT_DYNAMIC by p_vaddr, p_filesz 0 skipped, an ET_DYN left without one refused) and
elf/dl-deps.c (DT_NEEDED names at DT_STRTAB + d_val), independently of the reader: a tiny
map of the PT_LOAD segments and a walk of the dynamic table. For PE the model is the fat
binary layout the CUDA runtime registers (__cudaRegisterFatBinary gets the wrapper:
magic 0x466243B1, version, pointer to the container, magic 0xBA55ED50).
"""
from __future__ import annotations

import re
import struct

import pytest
from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda4amd.scan.read.binview import MalformedBinary, decode
from cuda4amd.scan.read.elf import loader_disagreements
from cuda4amd.scan.read.engine import read_bytes
from cuda4amd.scan.read.fatbin import analyse_kernels

APP = FIXTURES / "elf" / "app_driver"          # NEEDED libcuda.so.1, libc.so.6 (gcc, fixtures/build.sh)
LIB = FIXTURES / "elf" / "libuser_blas.so"     # NEEDED libcublas.so.12
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NEEDED, DT_STRTAB = 1, 5


# -- the model ------------------------------------------------------------------------------------

def phdrs(data: bytes):
    """[(index, header offset, type, p_offset, p_vaddr, p_filesz, p_memsz)] of an ELF64 LE file."""
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    out = []
    for i in range(phnum):
        at = phoff + i * phentsize
        typ, _flags, off, vaddr, _paddr, filesz, memsz, _align = struct.unpack_from("<IIQQQQQQ", data, at)
        out.append((i, at, typ, off, vaddr, filesz, memsz))
    return out


def shdrs(data: bytes):
    """[(header offset, type, sh_offset, sh_size, sh_link)]."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    out = []
    for i in range(shnum):
        at = shoff + i * shentsize
        _name, typ, _fl, _addr, off, size, link = struct.unpack_from("<IIQQQQI", data, at)
        out.append((at, typ, off, size, link))
    return out


def ld_so_needed(data: bytes) -> tuple[str, ...] | str:
    """The DT_NEEDED names ld.so would load, or "refused"."""
    loads = [p for p in phdrs(data) if p[2] == PT_LOAD]

    def at(vaddr: int) -> int | None:
        for _i, _a, _t, off, va, filesz, _m in loads:
            if va <= vaddr < va + filesz:
                return off + vaddr - va
        return None
    dyns = [p for p in phdrs(data) if p[2] == PT_DYNAMIC and p[5]]
    if not dyns or dyns[-1][4] == 0:  # l_ld == 0: "object file has no dynamic section"
        return "refused"
    start = at(dyns[-1][4])
    if start is None:
        return "refused"
    tags = []
    seg_end = next(off + filesz for _i, _a, _t, off, va, filesz, _m in loads if va <= dyns[-1][4] < va + filesz)
    for pos in range(start, min(len(data), seg_end) - 15, 16):
        tag, val = struct.unpack_from("<qQ", data, pos)
        if tag == 0:
            break
        tags.append((tag, val))
    if not any(t == DT_NEEDED for t, _v in tags):
        return ()  # nothing to load: DT_STRTAB is never looked at
    strtab = at(dict(tags).get(DT_STRTAB, -1))
    if strtab is None:
        return "refused"
    return tuple(decode(data[strtab + v:].split(b"\0", 1)[0]) for t, v in tags if t == DT_NEEDED)


def reader_needed(data: bytes) -> tuple[str, ...] | str:
    try:
        return tuple(i.name for i in read_bytes(data).imports)
    except MalformedBinary:
        return "refused"


def test_the_model_agrees_on_the_fixtures():
    for path in (APP, LIB):
        data = path.read_bytes()
        assert ld_so_needed(data) == reader_needed(data) != "refused"
        assert loader_disagreements(data) == ()


# -- item 8: where the section table and ld.so part ----------------------------------------------

def test_pt_dynamic_is_found_by_its_address_not_its_offset():
    data = bytearray(APP.read_bytes())
    (_i, at, *_), = [p for p in phdrs(data) if p[2] == PT_DYNAMIC]
    struct.pack_into("<Q", data, at + 8, 0x40)  # p_offset now points at the program headers
    assert reader_needed(bytes(data)) == ld_so_needed(bytes(data)) == ("libcuda.so.1", "libc.so.6")
    assert any("p_offset" in n for n in loader_disagreements(bytes(data)))


def test_names_come_from_dt_strtab_not_the_dynstr_section():
    data = bytearray(APP.read_bytes())
    dynamic = next(s for s in shdrs(data) if s[1] == 6)
    dynstr_at = shdrs(data)[dynamic[4]][0]
    struct.pack_into("<Q", data, dynstr_at + 0x18, 0x40)  # .dynstr sh_offset: elsewhere
    assert reader_needed(bytes(data)) == ("libcuda.so.1", "libc.so.6")
    assert any(".dynstr" in n for n in loader_disagreements(bytes(data)))


def test_a_disagreement_is_a_note_on_a_binary_that_was_read(tmp_path, rules):
    """The binary was read (as ld.so reads it): the note is no "read" error,
    and the file scans alone, as a single-file target, too."""
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    data = bytearray(APP.read_bytes())
    dynamic = next(s for s in shdrs(data) if s[1] == 6)
    dynstr_at = shdrs(data)[dynamic[4]][0]
    struct.pack_into("<Q", data, dynstr_at + 0x18, 0x40)
    target = tmp_path / "app_driver"
    target.write_bytes(bytes(data))
    for scanned in (tmp_path, target):
        result = run_scan(ScanOptions(target=str(scanned)), rules=rules)
        assert [b.path for b in result.binaries] == ["app_driver"]
        assert [(e.path, e.stage) for e in result.errors] == [("app_driver", "loader")]
        assert ".dynstr" in result.errors[0].message


def test_the_dynamic_section_header_is_not_what_ld_so_reads():
    data = bytearray(APP.read_bytes())
    dynamic = next(s for s in shdrs(data) if s[1] == 6)
    struct.pack_into("<Q", data, dynamic[0] + 0x18, 0x40)
    assert reader_needed(bytes(data)) == ("libcuda.so.1", "libc.so.6")
    assert any(".dynamic section header" in n for n in loader_disagreements(bytes(data)))


def test_a_pt_dynamic_without_file_data_is_refused_as_ld_so_does():
    data = bytearray(LIB.read_bytes())
    (_i, at, *_), = [p for p in phdrs(data) if p[2] == PT_DYNAMIC]
    struct.pack_into("<Q", data, at + 0x20, 0)  # p_filesz
    assert ld_so_needed(bytes(data)) == "refused"
    with pytest.raises(MalformedBinary, match=re.escape("ld.so refuses it: object file has no dynamic section")):
        read_bytes(bytes(data))


def test_the_scan_reports_the_disagreement(tmp_path):
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    data = bytearray(APP.read_bytes())
    (_i, at, *_), = [p for p in phdrs(data) if p[2] == PT_DYNAMIC]
    struct.pack_into("<Q", data, at + 8, 0x40)
    (tmp_path / "app").write_bytes(bytes(data))
    result = run_scan(ScanOptions(target=str(tmp_path)))
    (binary,) = result.binaries
    assert next(i.name for i in binary.info.imports) == "libcuda.so.1"
    assert any("follows ld.so" in e.message for e in result.errors)


# -- the fuzz test: the mutation kinds of the issue against the model ------------------------------

ELF_SEEDS = (APP.read_bytes(), LIB.read_bytes())


def _mutate_elf(data: bytes, kind: str, which: int, value: int) -> bytes:
    out = bytearray(data)
    dyn = [p for p in phdrs(data) if p[2] == PT_DYNAMIC]
    if kind == "dynamic-offset":             # p_offset / p_vaddr / p_filesz of PT_DYNAMIC
        field = (8, 16, 32)[which % 3]
        struct.pack_into("<Q", out, dyn[0][1] + field, value)
    elif kind == "string-table":             # DT_STRTAB's value, or the .dynstr section header
        start = dyn[0][3]
        for pos in range(start, start + dyn[0][5], 16):
            tag, _v = struct.unpack_from("<qQ", out, pos)
            if tag == DT_STRTAB and which % 2:
                struct.pack_into("<Q", out, pos + 8, value)
        if not which % 2:
            dynamic = next(s for s in shdrs(data) if s[1] == 6)
            struct.pack_into("<Q", out, shdrs(data)[dynamic[4]][0] + 0x18, value)
    else:                                    # section sizes
        secs = shdrs(data)
        struct.pack_into("<Q", out, secs[which % len(secs)][0] + 0x20, value)
    return bytes(out)


VALUES = st.one_of(st.sampled_from([0, 0x40, 0x1000, 0x3000, 0x3DF0, 1 << 32, (1 << 40), (1 << 63) - 1]),
                   st.integers(0, 1 << 20))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(range(len(ELF_SEEDS))),
       kind=st.sampled_from(["dynamic-offset", "string-table", "section-size"]),
       which=st.integers(0, 40), value=VALUES)
def test_fuzz_elf_dynamic_information_follows_the_loader(seed, kind, which, value):
    data = _mutate_elf(ELF_SEEDS[seed], kind, which, value)
    want = ld_so_needed(data)
    got = reader_needed(data)
    if want == "refused":
        assert got == "refused", (kind, which, value, got)  # never a silent "no CUDA" for a file ld.so refuses
    else:
        # where ld.so loads the file, the reader names the same libraries, or refuses the file with a
        # per-file error when a table ld.so does not need here (the symbol table) is damaged
        assert got in (want, "refused"), (kind, which, value, got, want)


# -- PE: the fat binary wrapper and container magic -------------------------------------------------

PE_KERNELS = tuple(sorted((FIXTURES / "kernels" / "pe").glob("*.dll")))  # fixtures/kernels/build.sh


WRAPPER_MAGIC = struct.pack("<I", 0x466243B1)
CONTAINER_MAGIC = struct.pack("<I", 0xBA55ED50)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(range(len(PE_KERNELS))), which=st.sampled_from(["wrapper", "container"]),
       bit=st.integers(0, 31), nth=st.integers(0, 3))
def test_fuzz_a_flipped_magic_bit_is_never_a_silent_no_cuda(seed, which, bit, nth):
    data = PE_KERNELS[seed].read_bytes()
    magic = WRAPPER_MAGIC if which == "wrapper" else CONTAINER_MAGIC
    hits = []
    pos = data.find(magic)
    while pos >= 0:
        hits.append(pos)
        pos = data.find(magic, pos + 1)
    if not hits:
        return
    out = bytearray(data)
    at = hits[nth % len(hits)]
    out[at + bit // 8] ^= 1 << (bit % 8)
    try:
        report = analyse_kernels(bytes(out), read_bytes(bytes(out)))
    except MalformedBinary:
        return  # a kernel error: reported
    # the CUDA runtime would register this wrapper; its kernels must not vanish without a word
    assert report.state != "none", (PE_KERNELS[seed].name, which, bit, at)


def test_a_flipped_wrapper_or_container_magic_is_a_kernel_error():
    data = (FIXTURES / "kernels" / "pe" / "axpy_rdata.dll").read_bytes()
    for magic, message in ((WRAPPER_MAGIC, "damaged wrapper"), (CONTAINER_MAGIC, "holds no fat binary container")):
        out = bytearray(data)
        out[data.find(magic)] ^= 0x01
        with pytest.raises(MalformedBinary, match=message):
            analyse_kernels(bytes(out), read_bytes(bytes(out)))
