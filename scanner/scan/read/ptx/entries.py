"""The PTX texts of one fat binary container, as ZLUDA gets them (dark_api/src/fatbin.rs at each tag).

    texts = ptx_texts(buf, offset)   # the container at `offset` (already checked by scan/read/fatbin.py)

ZLUDA walks the container's entries (FatbinFileIterator); an entry whose
header version is not HEADER_VERSION_CURRENT (0x101, cuda_types/src/
dark_api.rs:95@v6) is an error it skips; a PTX entry (kind 1) is
decompressed by ``get_or_decompress_content`` (fatbin.rs:199-232@v6):
LZ4 when flag 0x2000 is set (``decompress_lz4``: a buffer of
max(1024, uncompressed size) bytes, doubled after each failure until it
would pass 64 MiB, MAX_MODULE_DECOMPRESSION_BOUND, fatbin.rs:273-298@v6),
else zstd when flag 0x8000 is set (``decompress_zstd``: into a buffer of
the uncompressed size, fatbin.rs:300-310@v6), else the payload as it is;
then trailing NUL bytes are cut. A text that is not UTF-8 is skipped
(module.rs, cow_bytes_to_str). Entries that fail to decompress are skipped.
The same at v5, v6-preview.69 and v7-preview.9 (fatbin.rs:199-310 at each).
"""
from __future__ import annotations

import struct

import lz4.block
import zstandard

from cuda4amd.scan.read.binview import Buffer

__all__ = ["MAX_DECOMPRESSED", "ptx_texts"]

HEADER_VERSION_CURRENT = 0x101
KIND_PTX = 1
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
#: MAX_MODULE_DECOMPRESSION_BOUND (dark_api/src/fatbin.rs:273@v6)
MAX_DECOMPRESSED = 64 * 1024 * 1024
_CONTAINER = struct.Struct("<IHHQ")
# kind, version, header size, padded payload size, compressed size; flags @0x28; uncompressed @0x38
_ENTRY = struct.Struct("<HHIQI20xQ8xQ")


def ptx_texts(buf: Buffer, offset: int) -> list[bytes]:
    """The UTF-8 PTX texts of the container at ``offset``, in file order (``buf``: the whole file)."""
    _magic, _version, hsize, size = _CONTAINER.unpack_from(buf, offset)
    pos, stop = offset + hsize, offset + hsize + size
    texts = []
    while pos + _ENTRY.size <= stop:
        kind, version, ehs, psize, csize, flags, unc = _ENTRY.unpack_from(buf, pos)
        payload = pos + ehs
        nxt = payload + psize
        if ehs < _ENTRY.size or nxt > stop:
            break  # fatbin.py has refused such a container already
        pos = nxt
        if version != HEADER_VERSION_CURRENT or kind != KIND_PTX:
            continue
        text = _content(bytes(buf[payload:payload + (csize if flags & (FLAG_LZ4 | FLAG_ZSTD) else psize)]),
                        flags, unc)
        if text is None:
            continue
        text = text.rstrip(b"\0")
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            continue
        texts.append(text)
    return texts


def _content(data: bytes, flags: int, uncompressed: int) -> bytes | None:
    if flags & FLAG_LZ4:
        capacity = max(1024, uncompressed)
        while True:
            try:
                return lz4.block.decompress(data, uncompressed_size=capacity)
            except lz4.block.LZ4BlockError:
                capacity *= 2
                if capacity > MAX_DECOMPRESSED:
                    return None
    if flags & FLAG_ZSTD:
        try:
            return zstandard.ZstdDecompressor().decompress(data, max_output_size=uncompressed)
        except zstandard.ZstdError:
            return None
    return data
