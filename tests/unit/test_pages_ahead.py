"""What a read asks of the kernel's page cache (scan/read/pages.py), and that asking changes no result.

A cold file is read from the disk one page fault at a time wherever a walk
goes from header to header; the readers ask for those pages ahead instead
(MADV_WILLNEED), and read an ELF file's headers and tables without the
kernel's read-around (MADV_RANDOM). The mappings here record their madvise
calls: a subclass of mmap.mmap, which the readers take for any other.
"""
from __future__ import annotations

import mmap
import struct
from pathlib import Path

import pytest
from conftest import FIXTURES

from cuda4amd.model import BinaryInfo, Section
from cuda4amd.scan.read import fatbin, pages
from cuda4amd.scan.read.engine import read_buffer, read_path
from cuda4amd.scan.read.fatbin import analyse_kernels

pytestmark = pytest.mark.skipif(not hasattr(mmap.mmap, "madvise"), reason="no madvise on this OS (Windows)")

PAGE = mmap.PAGESIZE


class Recorded(mmap.mmap):
    """A read-only mapping that keeps its madvise calls in ``calls``."""

    calls: list[tuple[int, int, int]]

    def madvise(self, advice: int, start: int = 0, length: int = 0) -> None:
        self.calls.append((advice, start, length or len(self) - start))
        super().madvise(advice, start, length or len(self) - start)


def recorded(path: Path) -> Recorded:
    with path.open("rb") as f:
        buf = Recorded(f.fileno(), 0, access=mmap.ACCESS_READ)
    buf.calls = []
    return buf


def test_pages_asked_for_are_merged_into_runs_and_kept_inside_the_file(tmp_path):
    path = tmp_path / "file"
    path.write_bytes(b"x" * (10 * PAGE + 100))
    buf = recorded(path)
    pages.Pages(buf).ask([(5 * PAGE + 8, 5 * PAGE + 72), (0, 10), (PAGE - 1, PAGE + 1), (3 * PAGE, 3 * PAGE),
                          (9 * PAGE, 20 * PAGE), (-50, 1), (40 * PAGE, 41 * PAGE)])
    assert buf.calls == [(mmap.MADV_WILLNEED, 0, 2 * PAGE), (mmap.MADV_WILLNEED, 5 * PAGE, PAGE),
                         (mmap.MADV_WILLNEED, 9 * PAGE, PAGE + 100)]
    buf.close()
    pages.Pages(b"not a mapping").ask([(0, 4)])  # nothing to ask of


# ------------------------------------------------------------ a fat binary walked from the disk

CONTAINERS, ENTRIES, PAYLOAD = 40, 3, 80_000  # 9.6 MB of containers: more than pages.CHUNK
SECTION_AT, SECTION_VA = PAGE, 0x400000


def fatbin_file(tmp_path: Path, wrappers: bool) -> tuple[Path, BinaryInfo, list[int], list[int]]:
    """An ELF-like file with a .nv_fatbin of CONTAINERS containers of ENTRIES entries (one PTX, the rest
    SASS), the .nvFatBinSegment wrappers pointing at them: (path, info, container starts, entry starts)."""
    body = bytearray()
    starts, entries = [], []
    for c in range(CONTAINERS):
        starts.append(SECTION_AT + len(body))
        size = ENTRIES * (64 + PAYLOAD)
        body += struct.pack("<IHHQ", fatbin.MAGIC, 1, 16, size)
        for e in range(ENTRIES):
            entries.append(SECTION_AT + len(body))
            kind = 1 if e == 0 else 2
            body += struct.pack("<HHIQIIHHI8xQ8xQ", kind, 0x0101, 64, PAYLOAD, 0, 0, 8, 8, 80 + c % 10, 1, 0)
            body += b"\0" * PAYLOAD
    wrapper_at = SECTION_AT + len(body)
    records = b"".join(struct.pack("<IIQQ", fatbin.WRAPPER_MAGIC, 1, SECTION_VA + s - SECTION_AT, 0) for s in starts)
    data = bytearray(b"\x7fELF\x02\x01\x01" + b"\0" * (SECTION_AT - 7)) + body + (records if wrappers else b"")
    sections = [Section(".nv_fatbin", SECTION_VA, len(body), SECTION_AT, len(body))]
    if wrappers:
        sections.append(Section(".nvFatBinSegment", SECTION_VA + len(body), len(records), wrapper_at, len(records)))
    path = tmp_path / f"kernels{'-wrapped' if wrappers else ''}.so"
    path.write_bytes(data)
    info = BinaryInfo(format="ELF", machine="x86_64", bits=64, kind="shared-library", sections=tuple(sections))
    return path, info, starts, entries


@pytest.mark.parametrize("wrappers", [True, False])
def test_a_walk_that_reads_the_disk_asks_for_every_header_ahead_and_reports_the_same(tmp_path, monkeypatch,
                                                                                     wrappers):
    path, info, starts, entries = fatbin_file(tmp_path, wrappers)
    buf = recorded(path)
    quiet = analyse_kernels(buf, info)
    assert not [call for call in buf.calls if call[0] == mmap.MADV_WILLNEED]  # nothing read from the disk: no asking
    assert len(quiet.entries) == CONTAINERS * ENTRIES

    asked: list[list[tuple[int, int]]] = []
    ask = pages.Pages.ask
    monkeypatch.setattr(pages.Pages, "ask", lambda self, ranges: (asked.append(list(ranges)), ask(self, ranges))[1])
    faults = iter(range(1_000_000))
    monkeypatch.setattr(fatbin, "disk_faults", lambda: next(faults))  # every container read from the disk
    assert analyse_kernels(buf, info) == quiet
    # asked once, for every header past the first container, a round at a time
    wanted = set(starts[1:]) | {e for e in entries if e > starts[1]}
    got = {start for round_ in asked for start, _ in round_}
    assert wanted <= got and got - wanted <= {s + 16 + ENTRIES * (64 + PAYLOAD) for s in starts}
    assert all(end - start == 64 for round_ in asked for start, end in round_)
    # a round for the containers past the first, then one per entry of a container: the wrappers give every
    # container's start at once; without them each is found where the one before it ends, a round later
    assert len(asked) == (1 + ENTRIES if wrappers else CONTAINERS - 1 + ENTRIES)
    buf.close()


def test_a_small_section_or_a_buffer_of_bytes_is_walked_as_before(tmp_path, monkeypatch):
    path, info, _starts, _entries = fatbin_file(tmp_path, wrappers=True)
    faults = iter(range(1_000_000))
    monkeypatch.setattr(fatbin, "disk_faults", lambda: next(faults))
    monkeypatch.setattr(pages.Pages, "ask", lambda self, ranges: pytest.fail("asked ahead"))
    data = path.read_bytes()
    assert len(analyse_kernels(data, info).entries) == CONTAINERS * ENTRIES  # bytes: in memory already
    monkeypatch.setattr(pages, "CHUNK", len(data))  # the section is no longer big
    buf = recorded(path)
    assert len(analyse_kernels(buf, info).entries) == CONTAINERS * ENTRIES
    buf.close()


# ------------------------------------------------------------ an ELF file's headers and tables


@pytest.mark.parametrize("rel", ["elf/libcublas.so.12", "elf/libuser_rpath.so", "kernels/elf/libaxpy_mixed.so"])
def test_elf_headers_are_read_without_read_around_and_the_symbol_tables_asked_for_whole(rel, monkeypatch):
    path = FIXTURES / rel
    want = read_path(path)
    monkeypatch.setattr(pages, "CHUNK", 0)  # the fixtures are small: advise them as a big file is
    buf = recorded(path)
    assert read_buffer(buf) == want
    advice = [call[0] for call in buf.calls]
    assert buf.calls[0] == (mmap.MADV_RANDOM, 0, len(buf)) and buf.calls[-1] == (mmap.MADV_NORMAL, 0, len(buf))
    assert set(advice[1:-1]) == {mmap.MADV_WILLNEED}
    tables = {s.name: (s.file_offset, s.file_offset + s.file_size) for s in want.sections
              if s.name in (".dynsym", ".dynstr", ".gnu.version")}
    assert {".dynsym", ".dynstr"} <= set(tables)
    asked = [(start, start + length) for _advice, start, length in buf.calls[1:-1]]
    for lo, hi in tables.values():
        assert any(a <= lo and hi <= b for a, b in asked), (lo, hi, asked)
    # and no more than they hold: the names' segment runs on far past them (a 75 MiB library once asked for
    # 73 MiB that way)
    assert sum(b - a for a, b in asked) <= sum(hi - lo + 2 * PAGE for lo, hi in tables.values())
    buf.close()


def test_a_pe_file_is_read_with_read_around_but_for_its_first_page(monkeypatch):
    path = FIXTURES / "kernels" / "pe" / "axpy_rdata.dll"
    want = read_path(path)
    monkeypatch.setattr(pages, "CHUNK", 0)
    buf = recorded(path)
    assert read_buffer(buf) == want
    assert buf.calls == [(mmap.MADV_RANDOM, 0, len(buf)), (mmap.MADV_NORMAL, 0, len(buf)),
                         (mmap.MADV_NORMAL, 0, len(buf))]
    buf.close()


# ------------------------------------------------------------ real libraries

CUBLAS = "nvidia-cublas-cu12==12.9.2.10"


