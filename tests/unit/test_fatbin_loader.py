"""Kernels the reader skipped are not "no kernels" (issue 30, item 5; docs/exit-status.md).

ld.so ignores section headers, and the CUDA runtime reaches a fat binary through the pointer in
its wrapper record (__cudaRegisterFatBinary): where a container section's header disagrees with
the loader's map, the reader follows the wrappers through that map (scan/read/loadmap.py).
Fixtures: fixtures/loader/ (build.sh there: gcc, objcopy, mingw-w64; the fat binary bytes
are nvcc 13.0's, from fixtures/kernels/elf/libaxpy_sass86.so), checked with the independent
carver (expected.txt).
"""
from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, by_path

from cuda4amd.cli import main
from cuda4amd.cli.output import EXIT_FOR_VERDICT
from cuda4amd.model import Section
from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.elf import relative_addends
from cuda4amd.scan.read.engine import read_path
from cuda4amd.scan.read.fatbin import CONTAINER_SECTIONS, analyse_kernels
from cuda4amd.scan.read.loadmap import LoadMap, disagreement, load_map

LOADER = FIXTURES / "loader"
#: section header doctored, kernels reachable: (file, what the note says)
LYING = [
    ("libaxpy_sass86_1tib.so", "claims 0x10000000000 bytes of data at file offset 0x2008, running past the end"),
    ("libgcc_sass86_1tib.so", "claims 0x10000000000 bytes of data at file offset 0x2000, running past the end"),
    ("libgcc_sass86_offset.so", "says its data is at file offset 0x1040, but ld.so maps its address 0x2000 from "
                                "file offset 0x2000"),
    # the wrappers' pointers 0 in place (lld's default): read from their R_X86_64_RELATIVE relocations
    ("libgcc_sass86_1tib_rela.so", "claims 0x10000000000 bytes of data at file offset 0x2000, running past the end"),
]


def kernels(name: str, notes: list[str] | None = None):
    path = LOADER / name
    return analyse_kernels(path.read_bytes(), read_path(path), notes=notes)


def status(target):
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["scan", str(target), "--host", "none"])
    return result.exit_code, result.output


@pytest.mark.parametrize("name", ["libgcc_sass86.so", "gcc_sass86.dll"])
def test_the_toolchain_built_originals_are_sass_only(name):
    notes: list[str] = []
    report = kernels(name, notes)
    assert (report.state, report.sass_archs, report.containers) == ("sass-only", ("sm_86",), 2)
    assert notes == []


@pytest.mark.parametrize("name, said", LYING)
def test_a_lying_container_section_header_is_read_through_the_wrappers(name, said):
    notes: list[str] = []
    report = kernels(name, notes)
    # both containers (nvlink's stub and the module), as carve.py lists them (expected.txt)
    assert (report.state, report.sass_archs, report.containers) == ("sass-only", ("sm_86",), 2)
    assert report.sections == (".nv_fatbin",)
    assert len(notes) == 1 and said in notes[0] and "wrapper records point" in notes[0]


def test_unreachable_fat_binary_is_a_reading_error_not_no_kernels():
    with pytest.raises(MalformedBinary, match="no fat binary wrapper record points into it"):
        kernels("libgcc_sass86_unreachable.so")


@pytest.mark.parametrize("name, _said", LYING)
def test_lying_header_scans_blocked_exit_4_not_ready(name, _said, scan):
    report = scan(LOADER / name)
    assert report["verdict"] == "blocked"
    row = by_path(report)[name]
    assert row["verdict"] == "blocked"
    assert any("carry no PTX (SASS for sm_86)" in reason for reason in row["reasons"])
    assert [e["stage"] for e in report["errors"]] == ["loader"]  # said, and not counted as unread
    assert report["summary"]["unread"] == 0
    code, output = status(LOADER / name)
    assert code == EXIT_FOR_VERDICT["blocked"] == 4
    # the note is shown as one, not as a file that could not be read
    assert "could not be read" not in output and "1 file read with a note:" in output


def test_unreachable_scans_incomplete_exit_9(scan):
    report = scan(LOADER / "libgcc_sass86_unreachable.so")
    assert report["verdict"] == "incomplete"
    assert [e["stage"] for e in report["errors"]] == ["kernels"]
    code, output = status(LOADER / "libgcc_sass86_unreachable.so")
    assert code == EXIT_FOR_VERDICT["incomplete"] == 9
    assert output.startswith("INCOMPLETE")


def test_pe_raw_data_past_the_end_is_refused_as_windows_does():
    # the PE section table is the Windows loader's own map: a .nv_fatb claiming raw data past the end
    # of the file is an image Windows refuses, and the reader says so
    with pytest.raises(MalformedBinary, match="Windows refuses to load it"):
        read_path(LOADER / "corrupt" / "gcc_sass86_oversize.dll")


def test_every_committed_kernel_fixture_agrees_with_its_loader_map():
    # the loader's map changes nothing where the section headers are true: every container section of
    # the nvcc-built fixtures is walked as before
    checked = 0
    for path in sorted((FIXTURES / "kernels").glob("[ep][le]*/*")):
        info = read_path(path)
        data = path.read_bytes()
        lmap = load_map(data, info)
        for s in info.sections:
            if s.name in CONTAINER_SECTIONS:
                assert disagreement(s, len(data), lmap) is None, (path, s)
                checked += 1
    assert checked >= 15


def test_load_map_finds_addresses_in_pt_load_file_data():
    path = LOADER / "libgcc_sass86_1tib.so"
    lmap = load_map(path.read_bytes(), read_path(path))
    assert lmap.segments and all(name == "PT_LOAD" for *_, name in lmap.regions)
    offset, end, name = lmap.find(0x2000) or (0, 0, "")
    assert (offset, name) == (0x2000, "PT_LOAD") and end > 0x2000 + 0x12F8
    assert lmap.find(1 << 40) is None


def test_disagreement_cases():
    lmap = LoadMap(((0x1000, 0x3000, 0x1000, "PT_LOAD"),), segments=True)
    sec = Section(".nv_fatbin", 0x2000, 0x100, 0x2000, 0x100)
    assert disagreement(sec, 0x5000, lmap) is None
    assert "past the end of the file" in (disagreement(Section(".nv_fatbin", 0x2000, 0x10000, 0x2000, 0x10000),
                                                       0x5000, lmap) or "")
    assert "PT_LOAD segment (which ends at 0x3000)" in (
        disagreement(Section(".nv_fatbin", 0x2000, 0x1800, 0x2000, 0x1800), 0x5000, lmap) or "")
    assert "maps no file bytes" in (disagreement(Section(".nv_fatbin", 0x8000, 0x10, 0x2000, 0x10), 0x5000, lmap)
                                    or "")
    assert "from file offset 0x2000" in (disagreement(Section(".nv_fatbin", 0x2000, 0x10, 0x1800, 0x10), 0x5000, lmap)
                                         or "")
    # without segments (a relocatable object), only the file's end can contradict a header
    assert disagreement(Section(".nv_fatbin", 0x8000, 0x10, 0x10, 0x10), 0x5000, LoadMap(())) is None


def test_relative_addends_are_what_ld_so_writes():
    data = (LOADER / "libgcc_sass86_1tib_rela.so").read_bytes()
    # the two wrapper records at 0x5010 and 0x5028 (readelf -x .nvFatBinSegment): data at +8, prelinked at +16
    assert relative_addends(data, 0x5010, 0x5040) == {0x5018: 0x2000, 0x5020: 0x5008, 0x5030: 0x2600}
    assert relative_addends(data, 0, 0x10) == {}
    assert relative_addends(b"not an ELF file", 0, 1 << 64) == {}


def test_without_the_relocations_the_rela_fixture_could_not_be_followed(monkeypatch):
    from cuda4amd.scan.read import fatbin

    monkeypatch.setattr(fatbin, "relative_addends", lambda buf, lo, hi: {})
    with pytest.raises(MalformedBinary, match="no fat binary wrapper record points into it"):
        kernels("libgcc_sass86_1tib_rela.so")
