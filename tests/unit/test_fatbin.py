"""Fat binary (kernel) analysis: nvcc-built fixtures, corrupt containers, fuzzing,
and real CUDA wheels.

The fixture facts below were produced by nvcc 13.0 (fixtures/kernels/build.sh)
and checked with the independent carver fixtures/kernels/carve.py, whose
listing is fixtures/kernels/entries.txt; the wheel facts likewise come from
carve.py, not from cuda4amd.scan.read.fatbin.
"""
from __future__ import annotations

import dataclasses
import json
import mmap
import struct
import time
from functools import cache
from pathlib import Path

import pytest
from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda4amd.scan.read import fatbin
from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.engine import read_path
from cuda4amd.scan.read.fatbin import FatbinEntry, KernelReport, analyse_kernels

KERNELS = FIXTURES / "kernels"
MAGIC = struct.pack("<I", 0xBA55ED50)


@cache
def load(rel: str):
    path = KERNELS / rel
    return path.read_bytes(), read_path(path)


def analyse(rel: str, deep: bool = False) -> KernelReport:
    data, info = load(rel)
    return analyse_kernels(data, info, deep=deep)


def section(rel: str, name: str):
    (found,) = [s for s in load(rel)[1].sections if s.name == name]
    return found


def brief(report: KernelReport) -> list[tuple]:
    """(kind, arch, ptx_isa, compression, section, relocatable) per entry, in file order."""
    return [(e.kind, e.arch, e.ptx_isa, e.compression, e.section, e.relocatable) for e in report.entries]


NF, NR, FB = ".nv_fatbin", "__nv_relfatbin", ".nv_fatb"

# fixture -> (entries in file order, containers, state)
# nvcc -shared (CUDA 13) adds a device-link container (#1: an nvlink-built
# cubin per SASS arch, empty without SASS) before the module's own (#2).
EXPECTED = {
    "elf/libaxpy_sass86.so": ([
        ("sass", "sm_86", None, "none", NF, False),
        ("sass", "sm_86", None, "none", NF, False),
    ], 2, "sass-only"),
    "elf/libaxpy_ptx86.so": ([
        ("ptx", "sm_86", "9.0", "zstd", NF, False),
    ], 2, "ptx-available"),
    "elf/libaxpy_mixed.so": ([
        ("sass", "sm_86", None, "none", NF, False),
        ("sass", "sm_90a", None, "none", NF, False),
        ("sass", "sm_86", None, "none", NF, False),
        ("sass", "sm_90a", None, "none", NF, False),
        ("ptx", "sm_90", "9.0", "zstd", NF, False),
    ], 2, "ptx-available"),
    "elf/libaxpy_family.so": ([
        ("sass", "sm_100f", None, "none", NF, False),
        ("sass", "sm_120a", None, "none", NF, False),
        ("ptx", "sm_100f", "9.0", "zstd", NF, False),
        ("sass", "sm_100f", None, "none", NF, False),
        ("sass", "sm_120a", None, "none", NF, False),
    ], 2, "ptx-available"),
    "elf/libaxpy_nocompress.so": ([
        ("sass", "sm_86", None, "none", NF, False),
        ("ptx", "sm_86", "9.0", "none", NF, False),
        ("sass", "sm_86", None, "none", NF, False),
    ], 2, "ptx-available"),
    "elf/libaxpy_zstd_all.so": ([
        ("sass", "sm_86", None, "zstd", NF, False),
        ("ptx", "sm_86", "9.0", "zstd", NF, False),
        ("sass", "sm_86", None, "zstd", NF, False),
    ], 2, "ptx-available"),
    "elf/libaxpy_lz4_all.so": ([
        ("sass", "sm_86", None, "lz4", NF, False),
        ("ptx", "sm_86", "9.0", "lz4", NF, False),
        ("sass", "sm_86", None, "lz4", NF, False),
    ], 2, "ptx-available"),
    "elf/libaxpy_rdc.so": ([
        ("sass", "sm_86", None, "none", NF, False),
        ("ptx", "sm_86", "9.0", "zstd", NR, True),
        ("sass", "sm_86", None, "zstd", NR, True),
    ], 2, "relocatable-ptx-only"),
    "elf/libaxpy_debug.so": ([
        ("ptx", "sm_86", "9.0", "zstd", NF, False),  # -G: header flag 0x2
    ], 2, "ptx-available"),
    # axpy.cu (PTX only) and scale.cu (SASS only) linked into one library:
    # #1 the device-link stub (default sm_75), #2 axpy's module, #3 scale's
    "elf/libaxpy_partial.so": ([
        ("sass", "sm_75", None, "none", NF, False),
        ("ptx", "sm_86", "9.0", "zstd", NF, False),
        ("sass", "sm_86", None, "none", NF, False),
    ], 3, "ptx-available"),
    "elf/app_scale": ([
        ("sass", "sm_75", None, "none", NF, False),
        ("ptx", "sm_75", "9.0", "zstd", NF, False),
        ("sass", "sm_75", None, "none", NF, False),
    ], 2, "ptx-available"),
    "elf/axpy_lto.o": ([
        ("lto-ir", "sm_86", None, "zstd", NR, True),
    ], 1, "sass-only"),
    "pe/axpy_fatb.dll": ([
        ("sass", "sm_86", None, "none", FB, False),
        ("ptx", "sm_90", "9.0", "zstd", FB, False),
        ("sass", "sm_75", None, "lz4", FB, False),
    ], 2, "ptx-available"),
    "pe/axpy_rdata.dll": ([
        ("ptx", "sm_86", "9.0", "none", ".rdata", False),  # through the .nvFatBi wrapper
    ], 1, "ptx-available"),
    "pe/axpy_rel.dll": ([
        ("sass", "sm_86", None, "none", FB, False),
        ("ptx", "sm_86", "9.0", "zstd", "__nv_rel", True),
        ("sass", "sm_86", None, "zstd", "__nv_rel", True),
    ], 2, "relocatable-ptx-only"),
}

# deep=True finds more only where a container sits outside the known sections
DEEP_EXTRA = {
    "pe/axpy_rdata.dll": [("sass", "sm_89", None, "none", ".rdata", False)],
}


# fixture -> (modules, with PTX, debug PTX only, codeless containers), deep scan.
# Codeless: nvlink's device-link stub of a non -rdc build (its cubins have no
# .text section; compressed ones are recognised by their version-2 wrapper).
MODULES = {
    "elf/libaxpy_sass86.so": (1, 0, 0, 1),
    "elf/libaxpy_ptx86.so": (1, 1, 0, 1),  # the stub is an empty container here
    "elf/libaxpy_mixed.so": (1, 1, 0, 1),
    "elf/libaxpy_family.so": (1, 1, 0, 1),
    "elf/libaxpy_nocompress.so": (1, 1, 0, 1),
    "elf/libaxpy_zstd_all.so": (1, 1, 0, 1),  # compressed stub: version-2 wrapper, no -rdc code
    "elf/libaxpy_lz4_all.so": (1, 1, 0, 1),
    "elf/libaxpy_rdc.so": (1, 0, 0, 0),  # the device-linked module holds the code; PTX only relocatable
    "elf/libaxpy_debug.so": (1, 1, 1, 1),
    "elf/libaxpy_partial.so": (2, 1, 0, 1),
    "elf/app_scale": (1, 1, 0, 1),
    "elf/axpy_lto.o": (0, 0, 0, 0),  # relocatable only: not a registered module
    "pe/axpy_fatb.dll": (2, 1, 0, 0),  # #2 (sm_75, lz4) is a module of its own without PTX
    "pe/axpy_rdata.dll": (2, 1, 0, 0),
    "pe/axpy_rel.dll": (1, 0, 0, 0),
}


@pytest.mark.parametrize("rel", sorted(MODULES))
def test_module_coverage(rel):
    report = analyse(rel, deep=True)
    counts = (report.modules, report.modules_with_ptx, report.modules_debug_ptx_only, report.codeless_containers)
    assert counts == MODULES[rel]
    assert report.modules_without_ptx == report.modules - report.modules_with_ptx


def test_debug_flag_and_target_kinds():
    (debug,) = [e for e in analyse("elf/libaxpy_debug.so").entries if e.kind == "ptx"]
    assert debug.debug
    assert not any(e.debug for e in analyse("elf/libaxpy_ptx86.so").entries)
    family = analyse("elf/libaxpy_family.so").to_dict()
    assert family["ptx"] == [{"arch": "sm_100f", "isa": "9.0", "target": "family"}]


def test_every_fixture_is_listed():
    on_disk = {str(p.relative_to(KERNELS)) for d in ("elf", "pe") for p in (KERNELS / d).iterdir()}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_fixture_entries(rel):
    entries, containers, state = EXPECTED[rel]
    report = analyse(rel)
    assert brief(report) == entries
    assert report.containers == containers
    assert report.state == state
    deep = analyse(rel, deep=True)
    assert brief(deep) == entries + DEEP_EXTRA.get(rel, [])


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_lief_reader_sections_give_the_same_report(rel):
    data, _info = load(rel)
    info = read_path(KERNELS / rel, engine="lief")
    assert analyse_kernels(data, info, deep=True) == analyse(rel, deep=True)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_summary_fields_follow_entries(rel):
    report = analyse(rel)
    entries = report.entries
    assert report.sass_archs == tuple(sorted({e.arch for e in entries if e.kind == "sass"},
                                             key=fatbin.arch_sort_key))
    assert report.lto_ir_archs == tuple(sorted({e.arch for e in entries if e.kind == "lto-ir"}))
    assert set(report.ptx_archs) == {(e.arch, e.ptx_isa) for e in entries if e.kind == "ptx" and not e.relocatable}
    assert report.compressed == any(e.compression != "none" for e in entries)
    assert report.sections == tuple(dict.fromkeys(e.section for e in entries))
    for e in entries:
        assert isinstance(e, FatbinEntry)
        assert e.size > 0 and e.size % 8 == 0
        if e.compression == "none":
            assert e.uncompressed_size == e.size
        else:
            assert e.uncompressed_size > 0


def test_ptx_isa_and_sizes_from_the_headers():
    # the same PTX (axpy for compute_86, 814 bytes + NUL padding) three ways
    (plain,) = [e for e in analyse("elf/libaxpy_nocompress.so").entries if e.kind == "ptx"]
    (zstd,) = [e for e in analyse("elf/libaxpy_zstd_all.so").entries if e.kind == "ptx"]
    (lz4,) = [e for e in analyse("elf/libaxpy_lz4_all.so").entries if e.kind == "ptx"]
    assert plain.size == plain.uncompressed_size == 816
    assert zstd.uncompressed_size == lz4.uncompressed_size == 814
    assert zstd.size < 814 and lz4.size < 814


def test_to_dict_shape():
    d = analyse("elf/libaxpy_mixed.so").to_dict()
    assert d == {
        "modules": {"total": 1, "with_ptx": 1, "without_ptx": 0, "debug_ptx_only": 0, "codeless_containers": 1},
        "state": "ptx-available",
        "sass": ["sm_86", "sm_90a"],
        "ptx": [{"arch": "sm_90", "isa": "9.0", "target": "portable"}],
        "relocatable_ptx": [],
        "lto_ir": [],
        "containers": 2,
        "sections": [".nv_fatbin"],
        "compressed": True,
    }
    assert json.loads(json.dumps(d)) == d
    rdc = analyse("pe/axpy_rel.dll").to_dict()
    assert rdc["state"] == "relocatable-ptx-only"
    assert rdc["ptx"] == [] and rdc["relocatable_ptx"] == [{"arch": "sm_86", "isa": "9.0"}]
    assert rdc["sections"] == [".nv_fatb", "__nv_rel"]


def test_no_fat_binary():
    report = analyse_kernels(*load_plain())
    assert report == KernelReport()
    assert report.state == "none" and report.to_dict()["containers"] == 0


def load_plain():
    path = FIXTURES / "pe" / "plain.dll"
    return path.read_bytes(), read_path(path)


def test_empty_container_counts_but_holds_nothing():
    data, _info = load("elf/libaxpy_ptx86.so")
    nv = section("elf/libaxpy_ptx86.so", NF)
    assert data[nv.file_offset : nv.file_offset + 4] == MAGIC
    assert struct.unpack_from("<Q", data, nv.file_offset + 8)[0] == 0  # nvcc's empty dlink container


def test_arch_sort_key():
    archs = ["sm_120f", "sm_90a", "sm_100", "sm_90", "sm_100f", "sm_52"]
    assert sorted(archs, key=fatbin.arch_sort_key) == ["sm_52", "sm_90", "sm_90a", "sm_100", "sm_100f", "sm_120f"]


# ------------------------------------------------------------ buffers


def test_mmap_memoryview_and_bytes_agree():
    rel = "pe/axpy_rdata.dll"
    path = KERNELS / rel
    data, info = load(rel)
    want = analyse_kernels(data, info, deep=True)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert analyse_kernels(mm, info, deep=True) == want
        assert analyse_kernels(mm, info, deep=True) == want  # pages released by the first pass come back
    assert analyse_kernels(memoryview(data), info, deep=True) == want
    assert analyse_kernels(bytearray(data), info, deep=True) == want


def test_the_deep_and_by_name_searches_look_for_the_magic_once(tmp_path, rules, monkeypatch):
    """An NVIDIA library's data sections are searched for containers by both the deep kernel search and the
    by-name search (which skips them): they share what was searched (fatbin.Magics), so no byte is searched
    twice but where two searches meet (3 bytes), and each gives what it gives on its own."""
    from cuda4amd.scan.read.byname import find_library_names
    from cuda4amd.scan.read.payload import PayloadInspector

    data, info = load("pe/axpy_rdata.dll")
    inspector = PayloadInspector(rules, rules.release(rules.default_release))
    # an NVIDIA library that ZLUDA neither redirects nor stubs: its kernels decide whether it runs
    name = next(n for n in ("cudnn_heuristic64_9.dll", "curand64_10.dll", "cusolver64_11.dll", "nvrtc64_120_0.dll")
                if inspector.kernel_scan(n, info) == "deep")
    search = fatbin.Magics._search

    def recorded(spans):
        def searching(self, lo, hi):  # a search stops at the first magic it finds
            hit = search(self, lo, hi)
            spans.append((lo, hi if hit < 0 else hit + 4))
            return hit
        return searching

    searched: list[tuple[int, int]] = []
    monkeypatch.setattr(fatbin.Magics, "_search", recorded(searched))
    payload = inspector.inspect(name, data, info)
    by_byte = [0] * len(data)
    for lo, hi in searched:
        for at in range(lo, hi):
            by_byte[at] += 1
    assert max(by_byte) == 2 and sum(n == 2 for n in by_byte) <= 3 * len(searched)  # only where searches meet
    monkeypatch.setattr(fatbin.Magics, "_search", search)
    # the PTX check's facts come on top of what analyse_kernels finds (its wrapped .rdata container is registered)
    assert payload.kernels is not None and payload.kernels.ptx_tags
    checked = {f.name: () for f in dataclasses.fields(payload.kernels)
               if f.name.startswith(("ptx_tags", "ptx_counts", "ptx_dropped", "ptx_refusal", "ptx_unregistered"))}
    assert dataclasses.replace(payload.kernels, **checked) == analyse_kernels(data, info, deep=True)
    assert payload.kernels.containers == 2
    assert payload.by_name == find_library_names(data, info, rules, nvidia=True)
    # without the sharing, the data sections are searched twice over
    twice: list[tuple[int, int]] = []
    monkeypatch.setattr(fatbin.Magics, "_search", recorded(twice))
    analyse_kernels(data, info, deep=True)
    find_library_names(data, info, rules, nvidia=True)
    assert sum(hi - lo for lo, hi in twice) > 1.5 * sum(hi - lo for lo, hi in searched)


def test_a_file_full_of_magics_is_refused_not_indexed(monkeypatch):
    """Every magic of a searched range is kept (fatbin.Magics): a file with more than MAX_MAGICS is hostile."""
    from cuda4amd.model import BinaryInfo, Section

    monkeypatch.setattr(fatbin, "MAX_MAGICS", 10)
    data = b"\0" + MAGIC * 11 + b"\0" * 19  # none aligned: no container either
    info = BinaryInfo(format="PE", machine="x86_64", bits=64, kind="dll",
                      sections=(Section(".rdata", 0, len(data), 0, len(data)),))
    assert analyse_kernels(data, info).containers == 0  # the known sections only: nothing searched
    with pytest.raises(MalformedBinary, match="more than 10 fat binary container magics"):
        analyse_kernels(data, info, deep=True)
    monkeypatch.setattr(fatbin, "MAX_MAGICS", 11)
    assert analyse_kernels(data, info, deep=True).containers == 0


# ------------------------------------------------------------ wrappers


def patched(rel: str, patches: dict[int, bytes]) -> bytes:
    data = bytearray(load(rel)[0])
    for off, raw in patches.items():
        data[off : off + len(raw)] = raw
    return bytes(data)


def test_wrapper_with_null_pointer_is_ignored_and_a_wild_one_is_a_kernel_error():
    """Issue 11 item 9: a wrapper pointing at nothing valid is a kernel error, not a silent no-CUDA."""
    rel = "pe/axpy_rdata.dll"
    info = load(rel)[1]
    w = section(rel, ".nvFatBi").file_offset
    data = patched(rel, {w + 8: struct.pack("<Q", 0)})
    report = analyse_kernels(data, info)
    assert report.state == "none" and report.containers == 0
    assert analyse_kernels(data, info, deep=True).sass_archs == ("sm_89",)
    for pointer in (0xDEAD_0000_0000, 0x1_8000_0000 + 0x10_0000):
        data = patched(rel, {w + 8: struct.pack("<Q", pointer)})
        with pytest.raises(MalformedBinary, match=r"no section of the file holds|holds no fat binary container"):
            analyse_kernels(data, info)


def test_wrapper_and_deep_scan_do_not_double_count():
    report = analyse("pe/axpy_rdata.dll", deep=True)
    assert report.containers == 2 and len(report.entries) == 2


def test_elf_wrapper_pointers_are_written_in_place_by_gnu_ld():
    # .nvFatBinSegment: {magic, version 2, -> .nv_fatbin, -> prelinked array},
    #                   {magic, version 1, -> __nv_relfatbin, 0}
    rel = "elf/libaxpy_rdc.so"
    data, _info = load(rel)
    seg = section(rel, ".nvFatBinSegment").file_offset
    magic1, ver1, ptr1, _ = struct.unpack_from("<IIQQ", data, seg)
    magic2, ver2, ptr2, zero = struct.unpack_from("<IIQQ", data, seg + 24)
    assert (magic1, ver1, magic2, ver2, zero) == (0x466243B1, 2, 0x466243B1, 1, 0)
    assert ptr1 == section(rel, NF).virtual_address
    assert ptr2 == section(rel, NR).virtual_address


# ------------------------------------------------------------ corrupt input


@pytest.mark.parametrize("rel, message", [
    ("corrupt/libaxpy_sass86_oversize.so", "running 0x1010 bytes past the end of the section"),
    ("corrupt/libaxpy_mixed_cut.so", "running 0x100 bytes past the end of its container"),
    ("corrupt/axpy_fatb_cut.dll", "past the end of the section"),
])
def test_corrupt_fixtures(rel, message):
    path = KERNELS / rel
    info = read_path(path)  # the PE/ELF structure itself is fine
    for deep in (False, True):
        with pytest.raises(MalformedBinary, match=message):
            analyse_kernels(path.read_bytes(), info, deep=deep)


def first_entry(rel: str, name: str = NF) -> int:
    return section(rel, name).file_offset + 16


@pytest.mark.parametrize("what, offset, value, message", [
    ("entry header size 0", 4, struct.pack("<I", 0), "impossible header size 0x0"),
    ("entry header size 8", 4, struct.pack("<I", 8), "impossible header size 0x8"),
    ("entry header size huge", 4, struct.pack("<I", 0xFFFFFFFF), "impossible header size"),
    ("payload size huge", 8, struct.pack("<Q", 1 << 63), "past the end of its container"),
    ("container header size 0", -10, struct.pack("<H", 0), "impossible header size 0"),
    ("container size huge", -8, struct.pack("<Q", (1 << 64) - 1), "past the end of the section"),
    ("container magic damaged", -16, b"XXXX", "non-zero bytes between containers|after the last container"),
])
def test_corrupt_headers(what, offset, value, message):
    rel = "elf/libaxpy_mixed.so"
    data = patched(rel, {first_entry(rel) + offset: value})
    with pytest.raises(MalformedBinary, match=message):
        analyse_kernels(data, load(rel)[1])


def test_garbage_between_containers():
    rel = "pe/axpy_fatb.dll"
    data, info = load(rel)
    nv = section(rel, FB)
    first_size = struct.unpack_from("<Q", data, nv.file_offset + 8)[0]
    gap = nv.file_offset + 16 + first_size  # MSVC-style 8 zero bytes before the 16-aligned 2nd container
    assert data[gap : gap + 8] == bytes(8) and data[gap + 8 : gap + 12] == MAGIC
    with pytest.raises(MalformedBinary, match="non-zero bytes between containers"):
        analyse_kernels(patched(rel, {gap: b"\x01"}), info)


def test_entry_cap(monkeypatch):
    monkeypatch.setattr(fatbin, "MAX_ENTRIES", 2)
    with pytest.raises(MalformedBinary, match="more than 2 fat binary entries"):
        analyse("elf/libaxpy_mixed.so")


def test_container_section_beyond_end_of_file():
    rel = "elf/libaxpy_sass86.so"
    data, info = load(rel)
    nv = section(rel, NF)
    with pytest.raises(MalformedBinary, match="truncated"):
        analyse_kernels(data[: nv.file_offset], info)
    # cut inside .nv_fatbin: its header runs past the end of the file, and the wrappers that would
    # say where its containers are lie beyond the cut
    with pytest.raises(MalformedBinary, match=r"past the end of the file.*no fat binary wrapper"):
        analyse_kernels(data[: nv.file_offset + 0x100], info)


def test_deep_scan_skips_coincidental_magics():
    # a magic with an implausible header in .rdata is ordinary data, not a container
    rel = "pe/axpy_fatb.dll"
    data, info = load(rel)
    rdata = section(rel, ".rdata")
    fake = MAGIC + struct.pack("<HHQ", 7, 3, 1 << 40)[:12]
    data = patched(rel, {rdata.file_offset + 0x40: fake, rdata.file_offset + 0x61: MAGIC})
    assert brief(analyse_kernels(data, info, deep=True)) == EXPECTED[rel][0]


# ------------------------------------------------------------ fuzzing

FUZZ_TARGETS = ["elf/libaxpy_mixed.so", "pe/axpy_fatb.dll", "pe/axpy_rdata.dll", "elf/libaxpy_rdc.so"]
BOUNDARY = [0, 1, 7, 8, 0x10, 0x3F, 0x40, 0x50, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 32, (1 << 63), (1 << 64) - 1]


@cache
def fuzz_region(rel: str) -> tuple[int, int]:
    """File range covering the fat binary and wrapper sections of a fixture."""
    info = load(rel)[1]
    names = fatbin.CONTAINER_SECTIONS | fatbin.WRAPPER_SECTIONS | {".rdata"}
    spans = [(s.file_offset, s.file_offset + s.file_size) for s in info.sections if s.name in names and s.file_size]
    return min(a for a, _ in spans), max(b for _, b in spans)


@cache
def header_offsets(rel: str) -> tuple[int, ...]:
    """File offsets of every container header, entry header and wrapper record of a fixture."""
    data, info = load(rel)
    out = []
    for s in info.sections:
        if s.name in fatbin.WRAPPER_SECTIONS:
            out += range(s.file_offset, s.file_offset + min(s.virtual_size, s.file_size) - 23, 8)
        if s.name not in fatbin.CONTAINER_SECTIONS | {".rdata"}:
            continue
        pos, end = s.file_offset, s.file_offset + s.file_size
        while (pos := data.find(MAGIC, pos, end)) >= 0:
            out.append(pos)
            stop = pos + 16 + struct.unpack_from("<Q", data, pos + 8)[0]
            e = pos + 16
            while e < stop:
                out.append(e)
                e += struct.unpack_from("<I", data, e + 4)[0] + struct.unpack_from("<Q", data, e + 8)[0]
            pos = stop
    return tuple(out)


# (kind, where in [0, 1), value): "hdr*" hit a field of a header, the rest anywhere in the region
mutation = st.one_of(
    st.tuples(st.sampled_from(["hdr16", "hdr32", "hdr64"]), st.floats(0, 1, exclude_max=True),
              st.tuples(st.integers(0, 0x3F), st.sampled_from(BOUNDARY))),
    st.tuples(st.just("byte"), st.floats(0, 1, exclude_max=True), st.integers(0, 255)),
    st.tuples(st.just("u16"), st.floats(0, 1, exclude_max=True), st.sampled_from(BOUNDARY)),
    st.tuples(st.just("u32"), st.floats(0, 1, exclude_max=True), st.sampled_from(BOUNDARY)),
    st.tuples(st.just("u64"), st.floats(0, 1, exclude_max=True), st.sampled_from(BOUNDARY)),
    st.tuples(st.just("magic"), st.floats(0, 1, exclude_max=True), st.just(0)),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rel=st.sampled_from(FUZZ_TARGETS), mutations=st.lists(mutation, min_size=1, max_size=8),
       deep=st.booleans(), cut=st.one_of(st.none(), st.floats(0, 1)))
def test_fuzz_only_malformed_binary(rel, mutations, deep, cut):
    data, info = load(rel)
    start, end = fuzz_region(rel)
    buf = bytearray(data)
    headers = header_offsets(rel)
    for kind, where, value in mutations:
        off = start + int(where * (end - start))
        if kind.startswith("hdr"):
            field, value = value
            kind = {"hdr16": "u16", "hdr32": "u32", "hdr64": "u64"}[kind]
            off = headers[int(where * len(headers))] + field
        if kind == "byte":
            buf[off] = value
        elif kind == "magic":
            off &= ~7
            buf[off : off + 4] = MAGIC
        else:
            fmt = {"u16": "<H", "u32": "<I", "u64": "<Q"}[kind]
            size = struct.calcsize(fmt)
            off = min(off & ~(size - 1), len(buf) - size)
            buf[off : off + size] = struct.pack(fmt, value & ((1 << (8 * size)) - 1))
    if cut is not None:
        del buf[start + int(cut * (end - start)) :]
    try:
        report = analyse_kernels(bytes(buf), info, deep=deep)
    except MalformedBinary as exc:
        assert str(exc)
        return
    assert report.state in ("ptx-available", "sass-only", "relocatable-ptx-only", "none")
    assert len(report.entries) <= fatbin.MAX_ENTRIES
    json.dumps(report.to_dict())


# ------------------------------------------------------------ real wheels

CUPY = "cupy-cuda12x==14.2.0"
CTRANSLATE2 = "ctranslate2==4.8.5"
CUBLAS = "nvidia-cublas-cu12==12.9.2.10"

# Verified with fixtures/kernels/carve.py (independent carver over the whole file).
CUPY_SASS = ("sm_50", "sm_52", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90",
             "sm_100f", "sm_120f")
CUBLAS_SASS = ("sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
CUBLASLT_SASS = ("sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a",
                 "sm_100", "sm_103", "sm_120", "sm_120f", "sm_121")
CUBLASLT_CASK_SASS = ("sm_100a", "sm_100f", "sm_103f", "sm_120f")


def tree(spec: str) -> Path:
    from wheelcache import Unavailable, unpacked

    try:
        return unpacked(spec)
    except Unavailable as exc:
        pytest.skip(f"{spec} is not in the wheel cache and could not be fetched: {exc}")


def analyse_file(path: Path, deep: bool = False) -> tuple[KernelReport, float]:
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        info = read_path(path)
        t0 = time.perf_counter()
        report = analyse_kernels(mm, info, deep=deep)
        return report, time.perf_counter() - t0






