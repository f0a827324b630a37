"""Wrapper records in a PE ``.nvFatBi`` with zero padding between them (issue 30, item 3).

Each object file's wrapper record is its own contribution to the section, placed at that
contribution's alignment (PE/COFF: IMAGE_SCN_ALIGN_*), and the CUDA runtime is handed each
record's address (nvcc's host stub: ``__cudaRegisterFatBinary(&__fatDeviceText)``), so records
need not sit back to back. Padding of zeros before an aligned record is not damage; anything
else still is. Built from fixtures/kernels/pe/axpy_fatb.dll (two records back to back).
"""
from __future__ import annotations

import struct

import pytest
from conftest import FIXTURES

from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.engine import read_bytes
from cuda4amd.scan.read.fatbin import analyse_kernels

DLL = FIXTURES / "kernels" / "pe" / "axpy_fatb.dll"
RECORD = 24  # 64-bit: magic, version, data pointer, unused pointer


def with_records_at(offsets: tuple[int, int], fill: bytes = b"") -> bytes:
    """The DLL with its two wrapper records moved to ``offsets`` (from the section's start),
    zeros elsewhere in the section but ``fill`` right after the first record; the section's
    VirtualSize grown to its raw size (a linker counts the padding in it)."""
    data = bytearray(DLL.read_bytes())
    wrapper = next(s for s in read_bytes(bytes(data)).sections if s.name == ".nvFatBi")
    header = data.index(b".nvFatBi")  # IMAGE_SECTION_HEADER: Name[8], VirtualSize, ...
    assert header < 0x400 and struct.unpack_from("<I", data, header + 8)[0] == wrapper.virtual_size
    struct.pack_into("<I", data, header + 8, wrapper.file_size)
    start = wrapper.file_offset
    records = [bytes(data[start + RECORD * i:start + RECORD * (i + 1)]) for i in range(2)]
    data[start:start + wrapper.file_size] = bytes(wrapper.file_size)
    for at, record in zip(offsets, records, strict=True):
        data[start + at:start + at + RECORD] = record
    data[start + offsets[0] + RECORD:start + offsets[0] + RECORD + len(fill)] = fill
    return bytes(data)


def report(data: bytes) -> tuple:
    found = analyse_kernels(data, read_bytes(data))
    return found.state, found.containers, found.entries


@pytest.mark.parametrize("offsets", [(0, 32), (0, 28), (8, 40), (16, 200)])
def test_records_after_zero_padding_are_read_as_back_to_back_ones(offsets):
    assert report(with_records_at(offsets)) == report(DLL.read_bytes())


@pytest.mark.parametrize("offsets, fill", [
    ((0, 26), b""),  # the second record off the 4-byte grid
    ((0, 32), b"\x01"),  # a non-zero byte in the padding
    ((0, 512 - 16), b""),  # the second record cut by the section's end
])
def test_anything_else_in_the_wrapper_section_is_still_a_damaged_wrapper(offsets, fill):
    with pytest.raises(MalformedBinary, match="damaged wrapper"):
        analyse_kernels(with_records_at(offsets, fill), read_bytes(with_records_at(offsets, fill)))
