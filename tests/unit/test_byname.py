"""By-name library references: strings in data sections and Cython's
compressed string tables (fixtures/byname, synthetic buffers, real wheels)."""
from __future__ import annotations

import bz2
import contextlib
import mmap
import zlib

import pytest
from conftest import FIXTURES
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cuda4amd.model import BinaryInfo, Section
from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.byname import (
    LZSS_MARKER,
    ZLIB_MARKER,
    NameReference,
    find_library_names,
    platform_of_info,
)
from cuda4amd.scan.read.byname.lzss import decode as lzss_decode
from cuda4amd.scan.read.engine import read_bytes, read_path

BYNAME = FIXTURES / "byname"


def refs(path, rules):
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return find_library_names(mm, read_path(path), rules)


def triples(found):
    return [(r.name, r.encoding, r.template) for r in found]


# ---------------------------------------------------------------- fixtures

def test_pe_loader(rules):
    assert triples(refs(BYNAME / "loader.dll", rules)) == [
        ("cublasLt64_12.dll", "utf-16le", False),
        ("cudnn64_9.dll", "ascii", False),
        ("cufft64_%d.dll", "utf-16le", True),
        ("nvrtc64_%d_0.dll", "ascii", True),
    ]


def test_elf_loader(rules):
    assert triples(refs(BYNAME / "libloader.so", rules)) == [
        ("libcublas.so.12", "ascii", False),
        ("libnvinfer.so.10", "ascii", False),
    ]


@pytest.mark.parametrize("fixture, encoding", [("cython_lzss.so", "cython-lzss"), ("cython_zlib.so", "cython-zlib")])
def test_cython_string_table(rules, fixture, encoding):
    data = (BYNAME / fixture).read_bytes()
    # only decompression can find them ...
    for plain in (b"libcudnn", b"libcusolver", b"libnvrtc", b"cusolver64_11"):
        assert plain not in data
    # ... and "cusolver64_11.dll" is a Windows name: not CUDA for a Linux binary
    assert triples(refs(BYNAME / fixture, rules)) == [
        ("libcudnn.so.9", encoding, False),
        ("libcusolver.so.11", encoding, False),
        ("libnvrtc.so.%d", encoding, True),
    ]


@pytest.mark.parametrize("path", [BYNAME / "plain.dll", FIXTURES / "pe" / "plain.dll",
                                  FIXTURES / "elf" / "libplain.so"])
def test_no_cuda_names(rules, path):
    assert refs(path, rules) == ()


@pytest.mark.parametrize("fixture, name", [("loader.dll", b"cusparse64_12.dll\0"),
                                           ("libloader.so", b"libcusparse.so.12\0")])
def test_strings_in_text_are_not_reported(rules, fixture, name):
    data = (BYNAME / fixture).read_bytes()
    info = read_path(BYNAME / fixture)
    (text,) = [s for s in info.sections if s.name == ".text"]
    at = data.index(name)
    assert data.count(name) == 1 and text.file_offset <= at < text.file_offset + text.file_size
    assert name.rstrip(b"\0").decode() not in {r.name for r in find_library_names(data, info, rules)}


def test_platform_of_info():
    assert platform_of_info(read_path(BYNAME / "loader.dll")) == "windows"
    assert platform_of_info(read_path(BYNAME / "libloader.so")) == "linux"


def test_result_is_sorted_unique_and_frozen(rules):
    found = refs(BYNAME / "loader.dll", rules)
    assert list(found) == sorted(set(found))
    with pytest.raises(AttributeError):
        found[0].name = "x"  # type: ignore[misc]


# ---------------------------------------------------------------- synthetic buffers

def fake(data: bytes, fmt: str = "ELF", section: str | None = None, extra=()) -> BinaryInfo:
    """A BinaryInfo whose one data section is the whole buffer."""
    section = section or (".rodata" if fmt == "ELF" else ".rdata")
    return BinaryInfo(format=fmt, machine="x86_64", bits=64, kind="dll",
                      sections=(Section(section, 0, len(data), 0, len(data)), *extra))


def names(data: bytes, rules, fmt="ELF", **kw):
    return triples(find_library_names(data, fake(data, fmt, **kw), rules))


@pytest.mark.parametrize("text, fmt, expected", [
    (b"\0C:\\CUDA\\v12\\bin\\cudnn64_9.dll\0", "PE", [("cudnn64_9.dll", "ascii", False)]),
    (b"\0NVCUDA.DLL\0", "PE", [("NVCUDA.DLL", "ascii", False)]),
    (b"\0could not load cudnn64_9.dll.\0", "PE", [("cudnn64_9.dll", "ascii", False)]),
    (b"\0%snvcuda.dll\0", "PE", [("nvcuda.dll", "ascii", False)]),
    (b"\0cublas64_{}.dll\0", "PE", [("cublas64_{}.dll", "ascii", True)]),
    (b"\0nvrtc64_%d%d_0.dll\0", "PE", [("nvrtc64_%d%d_0.dll", "ascii", True)]),
    (b"\0/usr/lib/libcudart.so.%d.%d\0", "ELF", [("libcudart.so.%d.%d", "ascii", True)]),
    (b"\0libcuda.so.1\0libcuda.so\0", "ELF", [("libcuda.so", "ascii", False), ("libcuda.so.1", "ascii", False)]),
    (b"\0libcudnn_ops.so.9: cannot open\0", "ELF", [("libcudnn_ops.so.9", "ascii", False)]),
    # not names: glued to more letters, other platforms, other libraries
    (b"\0nvcuda.dllx\0libcuda.so.1x\0libcuda.so.sym\0", "ELF", []),
    (b"\0nvcuda.dllx\0cudnn64_9.dll_old\0", "PE", []),
    (b"\0libcublas.so.12\0", "PE", []),
    (b"\0cublas64_12.dll\0", "ELF", []),
    (b"\0zlib1.dll\0libz.so.1\0also.something\0", "PE", []),
    (b"\0mynvcuda.dll\0", "PE", []),
])
def test_plain_names(rules, text, fmt, expected):
    assert names(text, rules, fmt) == expected


def test_utf16(rules):
    data = b"\0\0" + "C:\\x\\cudnn64_9.dll\0nvrtc64_%d_0.DLL\0".encode("utf-16le") + b"\0\0"
    assert names(data, rules, "PE") == [("cudnn64_9.dll", "utf-16le", False), ("nvrtc64_%d_0.DLL", "utf-16le", True)]
    odd = b"\0" + data  # alignment follows the hit
    assert names(odd, rules, "PE") == names(data, rules, "PE")


def test_only_data_sections(rules):
    data = b"\0nvcuda.dll\0"
    assert names(data, rules, "PE", section=".rdata") == [("nvcuda.dll", "ascii", False)]
    assert names(data, rules, "PE", section=".data") == [("nvcuda.dll", "ascii", False)]
    for other in (".text", ".nv_fatb", "__nv_rel", ".rsrc", ".idata"):
        assert names(data, rules, "PE", section=other) == []
    for other in (".text", ".nv_fatbin", "__nv_relfatbin", ".dynstr"):
        assert names(b"\0libcuda.so.1\0", rules, "ELF", section=other) == []


def fatbin_container(payload: bytes) -> bytes:
    payload += b"\0" * (-len(payload) % 16)
    return (0xBA55ED50).to_bytes(4, "little") + (1).to_bytes(2, "little") + (16).to_bytes(2, "little") \
        + len(payload).to_bytes(8, "little") + payload


def test_fat_binary_containers_are_skipped(rules):
    inside = fatbin_container(b"\0libcublas.so.12\0" * 4)
    data = b"\0libcuda.so.1\0".ljust(32, b"\0") + inside + inside + b"\0libnvrtc.so.12\0"
    assert names(data, rules, "ELF", section=".data") == [("libcuda.so.1", "ascii", False),
                                                          ("libnvrtc.so.12", "ascii", False)]
    # a container header whose size runs past the section is not a container
    broken = (b"\0" * 16 + (0xBA55ED50).to_bytes(4, "little") + b"\1\0\x10\0" + (1 << 40).to_bytes(8, "little")
              + b"\0libcuda.so.1\0")
    assert names(broken, rules, "ELF") == [("libcuda.so.1", "ascii", False)]


def cython_rodata(blob: bytes, marker=ZLIB_MARKER) -> bytes:
    return b"\0" + marker + b"\0" * 11 + b"\0" * 16 + blob + b"\0" * 32


TABLE = (b"\n?Could not load %s__main____module____name__cline_in_traceback"
         b"driver.pyxlibcuda.so.1nvcuda.dllcudnn64_9.dlllibcudnn.so.99thload_nvidia_dynamic_lib")


@pytest.mark.parametrize("fmt, expected", [
    ("ELF", ["libcuda.so.1", "libcudnn.so.9"]),
    ("PE", ["cudnn64_9.dll", "nvcuda.dll"]),
])
@pytest.mark.parametrize("encoding, compress", [("cython-zlib", lambda b: zlib.compress(b, 9)),
                                                ("cython-bz2", lambda b: bz2.compress(b, 9))])
def test_cython_glued_table(rules, fmt, expected, encoding, compress):
    data = cython_rodata(compress(TABLE))
    assert names(data, rules, fmt) == [(n, encoding, False) for n in expected]


def test_cython_needs_its_marker(rules):
    data = cython_rodata(zlib.compress(TABLE, 9), marker=b"something else entirely")
    assert names(data, rules, "ELF") == []


def test_cython_corrupt_blob_is_skipped(rules):
    blob = bytearray(zlib.compress(TABLE, 9))
    blob[len(blob) // 2] ^= 0xFF
    assert names(cython_rodata(bytes(blob)), rules, "ELF") == []
    truncated = zlib.compress(TABLE, 9)[:-10]
    assert names(cython_rodata(truncated)[:-32], rules, "ELF") == []


def lzss_literals(data: bytes) -> bytes:
    """Cython's LZSS with literals only: a 0xFF flag byte per 8 bytes."""
    out = bytearray()
    for i in range(0, len(data), 8):
        chunk = data[i:i + 8]
        out.append((1 << len(chunk)) - 1)
        out += chunk
    return bytes(out)


def test_lzss_decoder_backreferences():
    # "abcabc": 3 literals then (distance 0, length 3) in short form;
    # then a long-form reference (7+7 bit distance) copying 4 bytes from further back.
    stream = bytes([0b0111, ord("a"), ord("b"), ord("c"), 0x00, 0x00])
    assert lzss_decode(stream + b"\0" * 8, 0, len(stream) + 8)[0][:6] == b"abcabc"
    text = bytes(range(32, 128)) * 3  # 288 bytes: whole flag groups
    head = lzss_literals(text)
    # copy text[0:4] to the end: the copy ends 288 - 4 bytes before the output's end
    back = len(text) - 4 - 0x80
    ref = bytes([0b0, 0x80 | (back & 0x7F), 0x80 | (back >> 7), 4 - 3])
    out, _ = lzss_decode(head + ref + b"\0" * 8, 0, len(head) + len(ref) + 8)
    assert out[:292] == text + text[:4]
    # the 2+7 bit form: distance 0x80 + 5, length 3 + 2
    ref = bytes([0b0, 0x80 | 5, 2])
    out, _ = lzss_decode(head + ref + b"\0" * 8, 0, len(head) + len(ref) + 8)
    assert out[288:293] == text[288 - 0x85 - 5:288 - 0x85]
    # a reference before the start of the output ends decoding
    assert lzss_decode(bytes([0b110, 0x41, 0x05, 0x01, 0, 0]), 0, 6)[0] == b""


def _walked_lzss_candidates(buf, lo, hi):
    """The LZSS start candidates as a walk from NUL to NUL finds them (byname's own before it searched for them
    in C): the oracle of the test below."""
    from cuda4amd.scan.read.byname.lzss import FLAGS_OK, ones

    aligned = lo + (-lo % 16)
    flags = buf[aligned:hi:16].translate(FLAGS_OK)
    al = [aligned + 16 * k for k in ones(flags)]
    ai = 0
    pos = lo
    while pos < hi:
        nul = buf.find(b"\0", pos, hi)
        nxt = hi if nul < 0 else nul + 1
        while nxt < hi and buf[nxt] == 0:
            nxt += 1
        while ai < len(al) and al[ai] < nxt:
            i = al[ai]
            ai += 1
            if i >= pos and i + 4 <= hi:
                yield i
        if nxt >= hi - 4:
            return
        if buf[nxt] & 7 == 7:
            yield nxt
        if ai < len(al) and al[ai] == nxt:
            ai += 1
        pos = nxt + 1


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from([0, 0, 0, 7, 0x0F, 0x17, 0xFF, 0x41, 0x01, 0x06, 0x80]), max_size=80),
       st.integers(0, 80), st.integers(0, 80))
@example([0] * 16 + [7, 0x41, 0x41, 0x41], 0, 20)  # a boundary 4 bytes before the end, right after a NUL: left out
@example([0x41] * 15 + [1, 7, 0x41, 0x41, 0x41], 0, 20)  # the same boundary after another byte: a candidate
def test_lzss_candidates_are_those_of_a_walk_from_nul_to_nul(data, lo, hi):
    from cuda4amd.scan.read.byname.lzss import candidates

    buf = bytes(data)
    lo, hi = min(lo, len(buf)), min(max(lo, hi), len(buf))
    assert list(candidates(buf, lo, hi)) == list(_walked_lzss_candidates(buf, lo, hi))


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from([0, 0, 1, 2, 3, 4, 7, 0x0F, 0x1F, 0x3F, 0x7F, 0xFF, 0x41, 0x80, 0x81, 0xC0]),
                min_size=1, max_size=60), st.integers(0, 59))
def test_a_decode_said_to_end_young_gives_fewer_than_16_bytes(data, start):
    from cuda4amd.scan.read.byname.lzss import ends_young

    buf = bytes(data)
    start = min(start, len(buf) - 1)
    if ends_young(buf, start, len(buf)):
        assert len(lzss_decode(buf, start, min(len(buf), start + 80))[0]) < 16


def test_the_first_back_reference_decides_whether_a_decode_ends_young():
    from cuda4amd.scan.read.byname.lzss import ends_young

    text = b"abcdefghijklmnopqrstuvwxyz"
    assert ends_young(bytes([0b0111]) + text[:3] + b"\x05\x00" + text, 0, 40)  # distance 5 from 3 bytes
    assert not ends_young(bytes([0b0111]) + text[:3] + b"\x00\x00" + text, 0, 40)  # copies them
    assert not ends_young(bytes([0xFF]) + text, 0, 40)  # eight literals: decoded


def test_cython_lzss_table(rules):
    data = cython_rodata(lzss_literals(TABLE), marker=LZSS_MARKER)
    assert names(data, rules, "ELF") == [("libcuda.so.1", "cython-lzss", False),
                                         ("libcudnn.so.9", "cython-lzss", False)]
    # without Cython's boilerplate names it is not taken for a string table
    plain = TABLE.replace(b"__main__", b"").replace(b"__name__", b"").replace(b"cline_in_traceback", b"")
    assert names(cython_rodata(lzss_literals(plain), marker=LZSS_MARKER), rules, "ELF") == []


def test_pe_directory_names_are_not_by_name_loads(rules, monkeypatch):
    """MSVC merges the import/export directories' DLL names into .rdata; they
    are skipped by file offset. Here: loader.dll's export name, renamed to a
    CUDA name of the same length, with .edata/.idata presented as .rdata."""
    from cuda4amd.scan.read.byname import find

    data = (BYNAME / "loader.dll").read_bytes()
    assert data.count(b"loader.dll\0") == 1
    data = data.replace(b"loader.dll\0", b"nvcuda.dll\0")
    info = read_bytes(data)
    merged = BinaryInfo(**{**info.__dict__, "sections": tuple(
        Section(".rdata", s.virtual_address, s.virtual_size, s.file_offset, s.file_size)
        if s.name in (".idata", ".edata") else s for s in info.sections)})
    expected = triples(refs(BYNAME / "loader.dll", rules))
    assert triples(find_library_names(data, merged, rules)) == expected
    monkeypatch.setattr(find, "pe_directory_names", lambda buf: set())
    assert ("nvcuda.dll", "ascii", False) in triples(find_library_names(data, merged, rules))


def test_memoryview_and_bytes_agree(rules):
    data = (BYNAME / "cython_zlib.so").read_bytes()
    info = read_bytes(data)
    assert find_library_names(memoryview(data), info, rules) == find_library_names(data, info, rules)


# ---------------------------------------------------------------- robustness

def _rodata(path):
    info = read_path(path)
    (ro,) = [s for s in info.sections if s.name == ".rodata"]
    return info, ro.file_offset, ro.file_offset + ro.file_size


_CY = {name: (BYNAME / name).read_bytes() for name in ("cython_lzss.so", "cython_zlib.so")}
_CY_INFO = {name: _rodata(BYNAME / name) for name in _CY}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(sorted(_CY)),
       edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=24),
       cut=st.one_of(st.none(), st.floats(0, 1)),
       reparse=st.booleans())
def test_fuzz_cython_fixtures(rules, which, edits, cut, reparse):
    """Mutated Cython modules: mostly inside .rodata (where the blob is), with
    the original section table (so the decoders see the damage) or re-read."""
    data = bytearray(_CY[which])
    info, lo, hi = _CY_INFO[which]
    for where, value in edits:
        data[lo + int(where * (hi - lo))] = value
    if cut is not None:
        del data[int(cut * len(data)):]
    data = bytes(data)
    if reparse:
        try:
            info = read_bytes(data)
        except MalformedBinary:
            return
    try:
        found = find_library_names(data, info, rules)
    except MalformedBinary:
        return
    assert all(isinstance(r, NameReference) for r in found)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=4096), st.sampled_from(["PE", "ELF"]))
def test_fuzz_random_sections(rules, blob, fmt):
    data = b"\0" + ZLIB_MARKER + LZSS_MARKER + b"\0" + blob
    with contextlib.suppress(MalformedBinary):
        find_library_names(data, fake(data, fmt), rules)


def test_hostile_hit_count_is_capped(rules, monkeypatch):
    from cuda4amd.scan.read.byname import limits

    monkeypatch.setattr(limits, "MAX_HITS", 1000)
    data = b".so" * 2000
    with pytest.raises(MalformedBinary, match=r"'\.dll'/'\.so' strings"):
        find_library_names(data, fake(data), rules)


# ---------------------------------------------------------------- real wheels

CUPY = "cupy-cuda12x==14.2.0"
CTRANSLATE2 = "ctranslate2==4.8.5"
CUDART = "nvidia-cuda-runtime-cu12==12.9.79"
CUFFT = "nvidia-cufft-cu12==11.4.1.4"


def tree(spec):
    from wheelcache import Unavailable, unpacked

    try:
        return unpacked(spec)
    except Unavailable as exc:
        pytest.skip(str(exc))








def test_expand_template(rules):
    from cuda4amd.scan.read.byname import expand_template

    assert expand_template("nvrtc64_%d_0.dll", rules, "windows") == (
        "nvrtc64_100_0.dll", "nvrtc64_101_0.dll", "nvrtc64_102_0.dll", "nvrtc64_110_0.dll",
        "nvrtc64_111_0.dll", "nvrtc64_112_0.dll", "nvrtc64_120_0.dll", "nvrtc64_130_0.dll")
    assert expand_template("libnvrtc.so.%d", rules, "linux") == ("libnvrtc.so.12", "libnvrtc.so.13")
    assert expand_template("libcublas.so.{version}", rules, "linux") == (
        "libcublas.so.10", "libcublas.so.11", "libcublas.so.12", "libcublas.so.13")
    assert "libnvrtc.so.9" in expand_template("libnvrtc.so.%d", rules, "linux", unknown=True)
    assert expand_template("cudnn_%s64_9.dll", rules, "windows") == (
        "cudnn_adv64_9.dll", "cudnn_cnn64_9.dll", "cudnn_engines_precompiled64_9.dll",
        "cudnn_engines_runtime_compiled64_9.dll", "cudnn_graph64_9.dll", "cudnn_heuristic64_9.dll",
        "cudnn_ops64_9.dll")
    assert expand_template("nvcuda.dll", rules, "windows") == ("nvcuda.dll",)
    assert expand_template("zlib1.dll", rules, "windows") == ()
    assert expand_template("libcuda.so.1", rules, "windows") == ()
