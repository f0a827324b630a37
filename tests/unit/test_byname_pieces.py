"""The by-name search in pieces (byname.sections.pieces; the windowed container search is
tested with the rest of it, tests/unit/test_byname_whole.py): cutting a segment at runs of
NULs and handing back the pages behind changes no result, and the pages really are
handed back."""
from __future__ import annotations

import struct
import sys
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda4amd.model import BinaryInfo, ImportedLibrary, Section
from cuda4amd.scan.read import byname
from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.byname import cython, sections
from cuda4amd.scan.read.engine import mapped, read_buffer
from cuda4amd.scan.read.fatbin import MAGIC_BYTES
from cuda4amd.scan.read.pages import Pages

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def container(payload: bytes) -> bytes:
    return MAGIC_BYTES + struct.pack("<HHQ", 1, 16, len(payload)) + payload


def outcome(buf, info, rules, chunk: int | None, monkeypatch):
    """find_library_names' result (or its refusal) with search pieces of ``chunk`` bytes."""
    with monkeypatch.context() as m:
        if chunk is not None:
            m.setattr(sections, "CHUNK", chunk)
        try:
            return byname.find_library_names(buf, info, rules)
        except MalformedBinary as exc:
            return ("refused", str(exc))


NAMES = [b"libcublas.so.12", b"libcudnn_graph.so", b"libnvrtc.so.", b"cudnn64_9.dll", b"nvcuda.dll",
         b"%s64_%d.dll", b".so", b".so.%d", b"%s.%d", b"lib%s.so", b"_0.dll", b"64_", b"cublas64_",
         b"libcudart", b"cufft", b"nvrtc64_", b"x.so.1", b".DLL", byname.ZLIB_MARKER, byname.LZSS_MARKER]
text = st.sampled_from(NAMES)
piece = st.one_of(
    text, text.map(lambda b: b"\0" + b + b"\0"), text.map(lambda b: b.decode().encode("utf-16-le")),
    text.map(lambda b: b"\0\0" + b.decode().encode("utf-16-le") + b"\0\0"),
    st.integers(0, 12).map(lambda k: b"\0" * k),  # runs of NULs, the cuts' places, of every length
    st.sampled_from([b".", b"a", b"\0.\0", b"/", b"%s"]), st.binary(max_size=8),
    st.binary(max_size=24).map(container),
)


def info_for(platform: str, size: int) -> BinaryInfo:
    if platform == "linux":  # dlopen: the whole-string passes run too, over the same range
        return BinaryInfo(format="ELF", machine="x86_64", bits=64, kind="dll", undefined_symbols=("dlopen",),
                          sections=(Section(".rodata", 0, size, 0, size),))
    return BinaryInfo(format="PE", machine="x86_64", bits=64, kind="dll",
                      imports=(ImportedLibrary("KERNEL32.dll", ("LoadLibraryExW",)),),
                      sections=(Section(".rdata", 0, size, 0, size),))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["linux", "windows"]), st.lists(piece, max_size=40), st.sampled_from([1, 4, 16, 40]))
def test_pieces_find_what_the_whole_segment_finds(rules, monkeypatch, platform, pieces, chunk):
    buf = b"".join(pieces)
    info = info_for(platform, len(buf))
    assert outcome(buf, info, rules, chunk, monkeypatch) == outcome(buf, info, rules, None, monkeypatch)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(piece, max_size=30), min_size=1, max_size=3), st.sampled_from([1, 4, 16, 40]))
def test_the_markers_are_found_in_one_pass_over_the_pieces(monkeypatch, ranges, chunk):
    # where no pass looked for them (a binary that loads nothing itself), both of
    # Cython's markers are looked for in the same pieces, as bytes.find finds them
    parts = [b"".join(r) for r in ranges]
    buf = b"\0".join(parts)
    spans, at = [], 0
    for part in parts:
        spans.append((at, at + len(part)))
        at += len(part) + 1
    expected = tuple(any(buf.find(marker, lo, hi) >= 0 for lo, hi in spans)
                     for marker in (byname.ZLIB_MARKER, byname.LZSS_MARKER))
    monkeypatch.setattr(sections, "CHUNK", chunk)
    assert cython.cython_markers(buf, spans, Pages(buf)) == expected


def real_binaries() -> list[Path]:
    """The fixtures' binaries (mingw-w64 and gcc builds) and this Python's own extension modules."""
    found = [p for p in sorted(FIXTURES.rglob("*"))
             if p.is_file() and p.suffix.lower() in (".dll", ".exe", ".so", ".pyd")]
    dynload = Path(sysconfig.get_path("platstdlib")) / "lib-dynload"
    found += sorted(dynload.glob("*.so"))[:40]
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir:
        found += sorted(Path(libdir).glob("libpython3*.so*"))[:1]
    return found


def read_real_binaries():
    """(path, mapped bytes, BinaryInfo) of each of real_binaries() the reader accepts (the corrupt
    fixtures are left out); the mapping stays open until the caller asks for the next one."""
    for path in real_binaries():
        with mapped(path) as buf:
            try:
                info = read_buffer(buf, exports=False)
            except MalformedBinary:
                continue
            yield path, buf, info


def test_real_binaries_give_the_same_names_in_pieces(rules, monkeypatch):
    assert len(real_binaries()) > 10
    compared = 0
    for path, buf, info in read_real_binaries():
        whole = outcome(buf, info, rules, None, monkeypatch)
        for chunk in (64, 4096):
            assert outcome(buf, info, rules, chunk, monkeypatch) == whole, (path, chunk)
        compared += 1
    assert compared > 10


def resident_kb(path: Path) -> int:
    """The resident KB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first = line.split(None, 1)[0]
        if not first.endswith(":") or "-" in first:
            inside = line.rstrip().endswith(str(path))
        elif inside and first == "Rss:":
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps (Linux)")
def test_the_pages_searched_are_handed_back(rules, tmp_path, monkeypatch):
    """24 MiB of read-only data searched with 1 MiB pieces leaves at most a few
    pieces resident; searched whole, all of it stays until the mapping closes."""
    unit = b"\0" * 10 + b"some_symbol_name\0libcudnn_graph.so\0" + bytes(range(1, 200)) + b"\0" * 30
    data = unit * (24 * 2**20 // len(unit))
    path = tmp_path / "big.so"
    path.write_bytes(data)
    info = info_for("linux", len(data))
    results = {}
    for chunk in (1 << 20, 1 << 30):
        monkeypatch.setattr(sections, "CHUNK", chunk)
        with mapped(path) as buf:
            results[chunk] = byname.find_library_names(buf, info, rules)
            results[chunk, "kb"] = resident_kb(path)
    assert results[1 << 20] == results[1 << 30]
    assert any(ref.name == "libcudnn_graph.so" for ref in results[1 << 20])
    assert results[1 << 30, "kb"] > 20 * 1024
    assert results[1 << 20, "kb"] < 4 * 1024


driver_piece = st.one_of(
    st.sampled_from([b"cuInit", b"cuMemCreate", b"cuStreamSynchronize_ptsz", b"cuLaunchKernel_ptds", b"cudnn",
                     b"cuX" + b"a" * 94, b"cuX" + b"a" * 95]).map(lambda n: n + b"\0"),
    st.integers(0, 5).map(lambda k: b"\0" * k), st.binary(max_size=6),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(driver_piece, max_size=40), st.sampled_from([1, 200, 201, 257, 300]))
def test_driver_names_searched_in_chunks_are_the_same(monkeypatch, pieces, chunk):
    from cuda4amd.scan.read import drivernames

    buf = b"".join(pieces)
    info = info_for("linux", len(buf))
    whole = drivernames.find_driver_names(buf, info)
    monkeypatch.setattr(drivernames, "CHUNK", chunk)
    assert drivernames.find_driver_names(buf, info) == whole


def test_real_binaries_name_the_same_driver_functions_in_chunks(monkeypatch):
    from cuda4amd.scan.read import drivernames

    compared = 0
    for path, buf, info in read_real_binaries():
        whole = drivernames.find_driver_names(buf, info)
        with monkeypatch.context() as m:
            m.setattr(drivernames, "CHUNK", 257)
            assert drivernames.find_driver_names(buf, info) == whole, path
        compared += whole.names != ()
    assert compared >= 2  # the fixtures that name driver functions
