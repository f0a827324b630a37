"""Issue 31, item 9: a file the loader refuses is a per-file error, not a verdict: an ELF whose
e_phentsize is not sizeof(Elf64_Phdr) (glibc elf/dl-load.c: "ELF file's phentsize not the expected
size") and a PE whose section raw data runs past the end of the file (STATUS_INVALID_IMAGE_FORMAT)."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.engine import read_bytes

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ELF = next(iter(sorted((FIXTURES / "elf").glob("*.so*"))), None)
PE = FIXTURES / "pe" / "trt_plugin.dll"


@pytest.mark.skipif(ELF is None, reason="fixtures not built")
@pytest.mark.parametrize("size", [0, 55, 57, 63, 64])
def test_an_elf_with_another_phentsize_is_refused(size):
    data = bytearray(ELF.read_bytes())
    assert data[4] == 2 and struct.unpack_from("<H", data, 54)[0] == 56  # a 64-bit little-endian file
    read_bytes(bytes(data))  # as built: read
    struct.pack_into("<H", data, 54, size)
    with pytest.raises(MalformedBinary, match="phentsize not the expected size"):
        read_bytes(bytes(data))


@pytest.mark.skipif(not PE.is_file(), reason="fixtures not built")
def test_a_pe_whose_section_data_runs_past_the_end_is_refused():
    data = bytearray(PE.read_bytes())
    read_bytes(bytes(data))
    lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    coff = lfanew + 4
    nsections, opt_size = struct.unpack_from("<H", data, coff + 2)[0], struct.unpack_from("<H", data, coff + 16)[0]
    last = coff + 20 + opt_size + 40 * (nsections - 1)
    rptr = struct.unpack_from("<I", data, last + 20)[0]
    struct.pack_into("<I", data, last + 16, len(data) - rptr + 0x200)
    with pytest.raises(MalformedBinary, match="STATUS_INVALID_IMAGE_FORMAT"):
        read_bytes(bytes(data))
