"""Issue 11, items 4-7 and 9 (scan side): hostile trees and wheels give per-file errors or an input
error, never a hang, a blow-up, a traceback or a binary that silently vanishes."""
from __future__ import annotations

import io
import os
import shutil
import struct
import threading
import zipfile

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from cuda4amd.cli import main
from cuda4amd.model import BinaryInfo, Section
from cuda4amd.scan import discover as discovery
from cuda4amd.scan.distributions import find_distributions
from cuda4amd.scan.pipeline import ScanOptions, run_scan
from cuda4amd.scan.read import fatbin
from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.engine import read_bytes, sniff_file
from cuda4amd.scan.read.stage import read_all

PE = FIXTURES / "pe" / "blas_mixed.dll"
ELF_FATBIN = FIXTURES / "kernels" / "elf" / "libaxpy_nocompress.so"

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")


def finishes(fn, seconds=20.0):
    """Run fn in a thread; fail (instead of hanging the suite) when it does not return in time."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # any failure is handed to the test
            box["error"] = exc
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{fn} hangs"
    if "error" in box:
        raise box["error"]
    return box["value"]


def scan(target, **kw):
    return run_scan(ScanOptions(target=str(target), **kw))


# -- 4. FIFOs ------------------------------------------------------------------------------------

@needs_fifo
@pytest.mark.parametrize("where", ["demo-1.0.dist-info/METADATA", "demo-1.0.dist-info/RECORD",
                                   "old-1.0.egg-info/PKG-INFO", "old-1.0.egg-info/installed-files.txt",
                                   "lone-1.0.egg-info"])
def test_a_fifo_where_metadata_is_expected_does_not_block(tmp_path, where):
    site = tmp_path / "site-packages"
    for folder in ("demo-1.0.dist-info", "old-1.0.egg-info"):
        (site / folder).mkdir(parents=True)
    (site / "demo-1.0.dist-info" / "METADATA").write_text("Name: demo\nVersion: 1.0\n")
    shutil.copy(PE, site / "blas.dll")
    path = site / where
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    result = finishes(lambda: scan(site))
    assert [b.path for b in result.binaries] == ["blas.dll"]
    finishes(lambda: find_distributions(discovery.resolve_target(str(site))))


@needs_fifo
def test_a_binary_swapped_for_a_fifo_after_discovery_is_one_error(tmp_path):
    shutil.copy(PE, tmp_path / "a.dll")
    found = discovery.discover(discovery.resolve_target(str(tmp_path)))
    (tmp_path / "a.dll").unlink()
    os.mkfifo(tmp_path / "a.dll")
    binaries, errors = finishes(lambda: read_all(found.target, found.binaries, "fast"))
    assert binaries == [] and [(e.path, e.stage) for e in errors] == [("a.dll", "read")]
    assert "not a regular file (a FIFO)" in errors[0].message


# -- 5. links out of the tree --------------------------------------------------------------------

def test_a_folder_link_leaving_the_target_is_reported_not_followed(tmp_path):
    app, outside = tmp_path / "app", tmp_path / "outside"
    app.mkdir()
    outside.mkdir()
    shutil.copy(PE, app / "own.dll")
    shutil.copy(PE, outside / "foreign.dll")
    (app / "linked").symlink_to(outside, target_is_directory=True)
    (app / "inner").symlink_to(app, target_is_directory=True)  # inside: walked (once, as before)
    result = scan(app)
    assert [b.path for b in result.binaries] == ["own.dll"]
    (err,) = result.errors
    assert err.path == "linked" and "outside the target" in err.message and "--follow-links" in err.message
    followed = scan(app, follow_links=True)
    assert "linked/foreign.dll" in [b.path for b in followed.binaries] and not followed.errors
    res = CliRunner().invoke(main, ["scan", str(app), "--host", "none", "--follow-links", "--format", "json"])
    assert "linked/foreign.dll" in res.output


# -- 6. claims of more bytes than are examined -----------------------------------------------------

def _elf_section(data: bytearray, wanted: bytes) -> int:
    """File offset of the ELF64 section header named `wanted`."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    strtab_off, = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)
    for i in range(shnum):
        hdr = shoff + i * shentsize
        name, = struct.unpack_from("<I", data, hdr)
        if data[strtab_off + name:].split(b"\0", 1)[0] == wanted:
            return hdr
    raise AssertionError(wanted)


def test_a_fat_binary_section_of_a_terabyte_of_holes_is_read_where_the_loader_maps_it(tmp_path):
    """ld.so maps only its PT_LOAD segment's file data, not the terabyte the section header claims: the
    containers are read where the wrapper records point (issue 30, item 5), in seconds, not searched."""
    data = bytearray(ELF_FATBIN.read_bytes())
    hdr = _elf_section(data, b".nv_fatbin")
    offset, = struct.unpack_from("<Q", data, hdr + 0x18)
    struct.pack_into("<Q", data, hdr + 0x20, 1 << 40)
    path = tmp_path / "libhuge.so"
    path.write_bytes(data)
    try:
        os.truncate(path, offset + (1 << 40))  # sparse: no disk used
    except OSError as exc:
        pytest.skip(f"this file system has no 1 TiB sparse files ({exc})")
    result = finishes(lambda: scan(path), 60)
    (binary,) = result.binaries
    assert binary.kernels is not None and binary.kernels.state == "ptx-available"
    assert [e.stage for e in result.errors] == ["loader"], result.errors
    assert "claims 0x10000000000 bytes of data" in result.errors[0].message
    assert "PT_LOAD segment" in result.errors[0].message


def test_overlapping_sections_are_searched_at_most_twice_over(tmp_path):
    buf = bytes(4 << 20)
    info = BinaryInfo(format="ELF", bits=64, machine="x86-64", kind="shared-library",
                      sections=tuple(Section(".rodata", 0x1000, len(buf), 0, len(buf)) for _ in range(1000)))
    with pytest.raises(MalformedBinary, match="sections overlap"):
        finishes(lambda: fatbin.analyse_kernels(buf, info, deep=True))
    one = BinaryInfo(format="ELF", bits=64, machine="x86-64", kind="shared-library",
                     sections=(Section(".rodata", 0x1000, len(buf), 0, len(buf)),))
    assert fatbin.analyse_kernels(buf, one, deep=True).state == "none"


def test_a_wheel_member_claiming_more_than_the_cap_is_one_error(tmp_path, monkeypatch):
    wheel = tmp_path / "big-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("big/libbig.dll", PE.read_bytes() + bytes(1 << 20))
        z.writestr("big/small.dll", PE.read_bytes())
    monkeypatch.setattr(discovery, "MAX_MEMBER_BYTES", 1 << 20)
    result = scan(wheel)
    assert [b.path for b in result.binaries] == ["big/small.dll"]
    assert [(e.path, e.stage) for e in result.errors] == [("big/libbig.dll", "discover")]
    assert "more than the" in result.errors[0].message


# -- 7. broken wheels ----------------------------------------------------------------------------

def _corrupt_member(method: int) -> bytes:
    """A wheel whose one member's compressed stream is damaged in the middle (CRC and sizes intact)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as z:
        z.writestr("pkg/blas.dll", PE.read_bytes())
    data = bytearray(out.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = z.infolist()[0]
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 8, start + 8 + 64):
        data[i] ^= 0x5A
    return bytes(data)


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_LZMA, zipfile.ZIP_BZIP2])
def test_a_corrupt_compressed_member_is_one_error(tmp_path, method):
    wheel = tmp_path / "bad-1.0-py3-none-any.whl"
    wheel.write_bytes(_corrupt_member(method))
    result = scan(wheel)
    assert result.binaries == []
    assert [e.path for e in result.errors] == ["pkg/blas.dll"], result.errors
    res = CliRunner().invoke(main, ["scan", str(wheel), "--host", "none"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output


@pytest.mark.parametrize("content", [b"", b"not a zip at all", b"PK\x03\x04" + bytes(40)], ids=["empty", "text", "cut"])
def test_a_wheel_that_is_not_a_zip_is_an_input_error(tmp_path, content):
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    wheel.write_bytes(content)
    with pytest.raises(discovery.TargetError, match="not a readable whl archive"):
        discovery.resolve_target(str(wheel))
    res = CliRunner().invoke(main, ["scan", str(wheel), "--host", "none"])
    assert res.exit_code == 2 and "not a readable whl archive" in res.output


def test_a_truncated_wheel_is_an_input_error(tmp_path):
    good = tmp_path / "good.whl"
    with zipfile.ZipFile(good, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("pkg/blas.dll", PE.read_bytes())
    cut = tmp_path / "cut-1.0-py3-none-any.whl"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    res = CliRunner().invoke(main, ["scan", str(cut), "--host", "none"])
    assert res.exit_code == 2 and "not a readable whl archive" in res.output


# -- 9. a damaged e_lfanew -----------------------------------------------------------------------

def test_a_damaged_e_lfanew_is_a_per_file_error_not_a_vanished_dll(tmp_path):
    data = bytearray(PE.read_bytes())
    struct.pack_into("<I", data, 0x3C, struct.unpack_from("<I", data, 0x3C)[0] + 8)
    (tmp_path / "cuda_user.dll").write_bytes(data)
    with open(tmp_path / "cuda_user.dll", "rb") as f:
        assert sniff_file(f) == "PE"
    result = scan(tmp_path)
    assert [(e.path, e.stage) for e in result.errors] == [("cuda_user.dll", "read")]
    assert "e_lfanew" in result.errors[0].message
    dos = FIXTURES / "corrupt" / "dos_only.exe"
    with open(dos, "rb") as f:
        assert sniff_file(f) is None  # a DOS program stays what it is


def test_the_by_name_search_caps_a_section_too(monkeypatch):
    from cuda4amd.rules.ruleset import load_rules
    from cuda4amd.scan.read.byname import PE_SECTIONS, find_library_names

    data = PE.read_bytes()
    info = read_bytes(data)
    biggest = max(s.file_size for s in info.sections if s.name in PE_SECTIONS)
    monkeypatch.setattr(fatbin, "MAX_SECTION_BYTES", biggest - 1)
    with pytest.raises(MalformedBinary, match="examined per section"):
        find_library_names(data, info, load_rules())


def test_a_corrupt_metadata_member_of_a_wheel_is_not_a_traceback(tmp_path):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("demo-1.0.dist-info/METADATA", "Name: demo\nVersion: 1.0\n" * 50)
        z.writestr("demo-1.0.dist-info/RECORD", "demo/blas.dll,,\n")
        z.writestr("demo/blas.dll", PE.read_bytes())
    data = bytearray(out.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = z.getinfo("demo-1.0.dist-info/METADATA")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 2, start + 12):
        data[i] ^= 0xA5
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    wheel.write_bytes(bytes(data))
    result = scan(wheel)
    assert [b.path for b in result.binaries] == ["demo/blas.dll"]
