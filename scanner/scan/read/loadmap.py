"""Where the loader puts a binary's file bytes: the map the fat binary reader follows.

The CUDA runtime reaches a fat binary through the pointer in its wrapper record
(``__cudaRegisterFatBinary(&__fatDeviceText)``: see cuda4amd.scan.read.fatbin), an
address in the loaded image. Which file bytes sit at that address is what the loader
decides, not what a section header says:

* ELF: ld.so maps each PT_LOAD segment's p_filesz bytes from p_offset at p_vaddr (plus the
  load base) and never reads section headers (glibc elf/dl-load.c, _dl_map_object_from_fd
  and _dl_map_segments). A file without program headers (a relocatable object, which ld.so
  never loads) has only its sections.
* PE: the Windows loader maps the section table: each section's raw data (at most
  VirtualSize bytes of it) from PointerToRawData at ImageBase + VirtualAddress.

    lmap = load_map(buf, info)
    lmap.find(address)                   # (file offset, end of that file data, region name) or None
    disagreement(section, len(buf), lmap) # why a section header is not the file range of its data
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from cuda4amd.model import BinaryInfo, Section
from cuda4amd.scan.read.binview import Buffer
from cuda4amd.scan.read.elf import load_segments

__all__ = ["LoadMap", "disagreement", "load_map"]


@dataclass(frozen=True)
class LoadMap:
    """The loaded image's file data: (address, end address, file offset, name) per region, by address.
    Addresses are ELF virtual addresses or PE RVAs (what a pointer minus ImageBase gives)."""

    regions: tuple[tuple[int, int, int, str], ...]
    #: True when the regions are ELF PT_LOAD segments (the section headers play no part then)
    segments: bool = False

    def find(self, address: int) -> tuple[int, int, str] | None:
        """(file offset, file offset where that region's file data ends, region name) of ``address``,
        or None where the loader maps no file bytes. Of regions that overlap, the one starting
        nearest below ``address`` answers."""
        i = bisect_right(self.regions, (address, 1 << 128)) - 1
        if i < 0:
            return None
        start, end, offset, name = self.regions[i]
        if address >= end:
            return None
        return offset + (address - start), offset + (end - start), name


def load_map(buf: Buffer, info: BinaryInfo) -> LoadMap:
    """The regions of file data the loader maps for ``info`` (the file in ``buf``)."""
    size = len(buf)
    regions: list[tuple[int, int, int, str]] = []
    if info.format == "ELF":
        for vaddr, offset, filesz in load_segments(buf):
            length = min(filesz, size - offset) if offset < size else 0
            if length > 0:
                regions.append((vaddr, vaddr + length, offset, "PT_LOAD"))
        if regions:
            return LoadMap(tuple(sorted(regions)), segments=True)
    for s in info.sections:
        length = _data_size(s)
        if s.virtual_address and length > 0 and 0 <= s.file_offset < size:
            length = min(length, size - s.file_offset)
            regions.append((s.virtual_address, s.virtual_address + length, s.file_offset, s.name))
    return LoadMap(tuple(sorted(regions)))


def disagreement(section: Section, size: int, lmap: LoadMap) -> str | None:
    """Why ``section``'s header cannot be taken as the file range of its data (the file holds
    ``size`` bytes), as a phrase after "the <name> section header", or None where it can."""
    length = _data_size(section)
    start = section.file_offset
    if length <= 0:
        return None
    if start + length > size:
        return (f"claims {length:#x} bytes of data at file offset {start:#x}, running past the end of the "
                f"file ({size:#x} bytes)")
    if not lmap.segments or not section.virtual_address:
        return None
    found = lmap.find(section.virtual_address)
    if found is None:
        return (f"puts its data at address {section.virtual_address:#x}, where ld.so maps no file bytes "
                f"(no PT_LOAD segment's file data holds it)")
    offset, end, _name = found
    if offset != start:
        return (f"says its data is at file offset {start:#x}, but ld.so maps its address "
                f"{section.virtual_address:#x} from file offset {offset:#x}")
    if start + length > end:
        return (f"claims {length:#x} bytes of data at file offset {start:#x}, running past the file data of "
                f"its PT_LOAD segment (which ends at {end:#x}), the bytes ld.so maps")
    return None


def _data_size(section: Section) -> int:
    """The bytes of file data a section header claims (PE: at most VirtualSize of its raw data)."""
    length = section.file_size
    if section.virtual_size and section.virtual_size < length:
        length = section.virtual_size
    return length
