"""Which reader a file needs, from its first bytes: "PE", "ELF" or None.

Its own module so that both readers (and discovery) can ask without importing
the engine that dispatches to them.
"""
from __future__ import annotations

import struct
from typing import IO

__all__ = ["PE_MACHINES", "SNIFF_BYTES", "misplaced_pe_header", "sniff", "sniff_file"]

#: Enough leading bytes for :func:`sniff` to see the PE signature of any
#: ordinary image (e_lfanew is almost always < 0x400); :func:`sniff_file`
#: follows e_lfanew wherever it points.
SNIFF_BYTES = 4096


def sniff(first_bytes: bytes) -> str | None:
    """"PE", "ELF" or None from the leading bytes of a file.

    "PE" needs the "MZ" header *and* "PE\\0\\0" at e_lfanew, so plain DOS
    programs are not PE; if e_lfanew lies beyond ``first_bytes`` the answer
    is None — use :func:`sniff_file` for an exact answer.
    """
    if first_bytes[:4] == b"\x7fELF":
        return "ELF"
    if first_bytes[:2] == b"MZ" and len(first_bytes) >= 0x40:
        (e_lfanew,) = struct.unpack_from("<I", first_bytes, 0x3C)
        if first_bytes[e_lfanew : e_lfanew + 4] == b"PE\0\0":
            return "PE"
    return None


def sniff_file(f: IO[bytes]) -> str | None:
    """Like :func:`sniff` for a seekable binary file object (its position is restored).

    An MZ file whose header or e_lfanew runs past the end of the file counts
    as PE: it is far more likely a truncated DLL than a DOS program, and the
    reader then reports it as one per-file error instead of skipping it.
    A DOS program (PE signature absent where e_lfanew points) is not PE.
    """
    pos = f.tell()
    try:
        f.seek(0)
        head = f.read(0x40)
        if head[:4] == b"\x7fELF":
            return "ELF"
        if head[:2] != b"MZ":
            return None
        if len(head) < 0x40:
            return "PE"
        (e_lfanew,) = struct.unpack_from("<I", head, 0x3C)
        f.seek(e_lfanew)
        signature = f.read(4)
        if signature == b"PE\0\0" or len(signature) < 4:
            return "PE"
        f.seek(0)
        return "PE" if misplaced_pe_header(f.read(SNIFF_BYTES)) is not None else None
    finally:
        f.seek(pos)


#: IMAGE_FILE_MACHINE_* of the images a CUDA library is built for (winnt.h): I386, AMD64, ARM64
PE_MACHINES = (0x014C, 0x8664, 0xAA64)


def misplaced_pe_header(head: bytes) -> int | None:
    """Offset of a PE header ("PE\\0\\0" and a known COFF machine, 8-aligned as
    linkers place it) in the first bytes of an MZ file whose e_lfanew points
    elsewhere: a PE image with a damaged e_lfanew, not a DOS program (whose
    stub never carries a COFF header). The Windows loader reads only e_lfanew
    and refuses such a file, so it is reported, not skipped."""
    pos = head.find(b"PE\0\0", 0x40)
    while 0 <= pos <= len(head) - 6:
        if not pos & 7 and struct.unpack_from("<H", head, pos + 4)[0] in PE_MACHINES:
            return pos
        pos = head.find(b"PE\0\0", pos + 1)
    return None
