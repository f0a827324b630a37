"""Where the names are looked for: the data sections' file ranges, minus the
fat binary containers in them, searched in pieces whose pages are handed back.

Only data sections: PE ``.rdata``/``.data``; ELF ``.rodata``/``.data``/
``.data.rel.ro`` (and the large-model ``.lrodata``/``.ldata``). Never code
(``.text``), never fat binary sections. NVIDIA's libraries embed fat
binaries in ``.data``/``.rdata`` too (cufft64_11.dll: 256 of its 268 MB of
``.data``); those containers (magic ``0xBA55ED50``, 16-byte header,
validated) are jumped over without being read, so only the bytes around
them are touched.

PE only: the DLL-name strings of the binary's own import, delay-import and
export directories (MSVC merges them into ``.rdata``) are not by-name loads
and are skipped *by file offset* (:func:`pe_directory_names`); the same name
elsewhere in the data (e.g. a LoadLibrary argument) is still reported.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from cuda4amd.scan.read.binview import BinView, MalformedBinary
from cuda4amd.scan.read.fatbin import Magics, check_section_size
from cuda4amd.scan.read.pages import CHUNK, Pages
from cuda4amd.scan.read.pe import DIR_DELAY_IMPORT, DIR_EXPORT, DIR_IMPORT, MAX_DESCRIPTORS, PEImage

if TYPE_CHECKING:
    from cuda4amd.model import BinaryInfo
    from cuda4amd.scan.read.binview import Buffer

__all__ = [
    "ELF_CONST_SECTIONS",
    "ELF_SECTIONS",
    "MIN_GAP",
    "PE_CONST_SECTIONS",
    "PE_SECTIONS",
    "pe_directory_names",
    "pieces",
    "ranges",
    "segments",
]

#: Sections searched, per format.
PE_SECTIONS = frozenset({".rdata", ".data"})
ELF_SECTIONS = frozenset({".rodata", ".data", ".data.rel.ro", ".lrodata", ".ldata"})
#: Sections that can hold Cython's compressed string literal (and its markers).
PE_CONST_SECTIONS = frozenset({".rdata"})
ELF_CONST_SECTIONS = frozenset({".rodata", ".lrodata"})

#: Bytes between two fat binary containers worth searching (less is padding).
MIN_GAP = 16


def ranges(info: BinaryInfo, wanted: frozenset[str], size: int) -> list[tuple[int, int]]:
    """Merged file ranges [lo, hi) of the sections named in ``wanted``."""
    spans = []
    for s in info.sections:
        if s.name in wanted and s.file_size > 0 and 0 <= s.file_offset < size:
            spans.append((s.file_offset, min(size, s.file_offset + s.file_size)))
            check_section_size(s.name, *spans[-1])  # merged ranges never exceed the file; one claim may
    spans.sort()
    merged: list[list[int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def segments(buf: Buffer, lo: int, hi: int, magics: Magics | None = None) -> Iterator[tuple[int, int]]:
    """[lo, hi) minus the fat binary containers in it (not read, just skipped)."""
    pos = search = lo
    magics = magics or Magics(buf)
    while search < hi:
        m = magics.next(search, hi)
        if m < 0:
            break
        if m + 16 <= hi:
            _ver, hsize, rest = struct.unpack_from("<HHQ", buf, m + 4)
            if hsize == 16 and 0 < rest <= hi - m - 16:
                if m - pos >= MIN_GAP:  # padding between containers holds no name
                    yield pos, m
                pos = search = m + 16 + rest
                continue
        search = m + 4
    if pos < hi:
        yield pos, hi


def pe_directory_names(buf: Buffer) -> set[int]:
    """File offsets of the DLL-name strings of the import, delay-import and
    export directories (they are not by-name loads). Best effort: a broken
    directory just gives fewer offsets (the readers report such damage)."""
    out: set[int] = set()
    try:
        img = PEImage(BinView(buf))
        v = img.v
        rva, _ = img.dir(DIR_IMPORT)
        if rva:
            off = img.rva_to_offset(rva, "import directory")
            for i in range(MAX_DESCRIPTORS):
                _ilt, _ts, _fwd, name, iat = v.unpack("IIIII", off + 20 * i)
                if name == 0 or iat == 0:
                    break
                out.add(img.rva_to_offset(name, "imported DLL name"))
        rva, _ = img.dir(DIR_DELAY_IMPORT)
        if rva:
            off = img.rva_to_offset(rva, "delay-import directory")
            for i in range(MAX_DESCRIPTORS):
                attrs, name = v.unpack("II", off + 32 * i)
                if name == 0:
                    break
                base = 0 if attrs & 1 else img.image_base
                out.add(img.rva_to_offset(name - base, "delay-imported DLL name"))
        rva, _ = img.dir(DIR_EXPORT)
        if rva:
            off = img.rva_to_offset(rva, "export directory")
            (name,) = v.unpack("I", off + 12)
            if name:
                out.add(img.rva_to_offset(name, "exported DLL name"))
    except MalformedBinary:
        pass
    return out


#: A segment longer than 2 * CHUNK is searched in pieces, cut in the middle of a run of
#: this many NULs, and a pass hands each piece's pages back once it has read them (the
#: next pass maps them again: :func:`pieces`). No string, suffix or marker a pass looks for holds more than three
#: NULs in a row (UTF-16LE's two-byte terminator after a character's zero high byte), so
#: no match crosses a cut, and a name's text is bounded by the NULs on both sides of it:
#: each piece gives what the segment gave there (tests/unit/test_byname_pieces.py).
_CUT = b"\0" * 8


def pieces(buf: Buffer, spans: Iterable[tuple[int, int]], pages: Pages) -> Iterator[tuple[int, int]]:
    """The spans, each cut into pieces of about CHUNK bytes where it is longer (at
    runs of NULs: _CUT); the pages of a piece are handed back once it is searched."""
    for a, b in spans:
        while b - a > 2 * CHUNK:
            run = buf.find(_CUT, a + CHUNK, b - CHUNK)
            if run < 0:
                break
            cut = run + len(_CUT) // 2
            yield a, cut
            pages.release(a, cut)
            a = cut
        yield a, b
        if b - a > CHUNK:
            pages.release(a, b)
