"""Mutated binaries: the fast reader returns a BinaryInfo or raises
MalformedBinary — no other exception, no hang.

Seeds are the project fixtures (by magic) plus the locally built samples;
mutations are random byte flips, truncations, targeted overwrites of header
fields with boundary values, and splices of random bytes.
"""
from __future__ import annotations

import struct
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_readers import CUDA_ELF, build_samples, fixture_binaries, make_elf

from cuda4amd.model import BinaryInfo
from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.engine import read_bytes, read_path, sniff_file

MAX_SEED = 2 * 1024 * 1024  # keep each example cheap to copy and mutate

INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFF0, 0x7FFFFFFF, 0x80000000,
               0xFFFFFFFF, 0x10000, 0x1000, 0x40]


@lru_cache(maxsize=1)
def seeds() -> dict[str, tuple[bytes, ...]]:
    """{"PE": (...), "ELF": (...)} — one copy of each distinct seed binary."""
    import tempfile

    files = [p for p in fixture_binaries() if p.stat().st_size <= MAX_SEED]
    tmp = Path(tempfile.mkdtemp(prefix="cuda4amd_fuzz_"))
    files += [p for p in build_samples(tmp).values() if p.stat().st_size <= MAX_SEED]
    out: dict[str, list[bytes]] = {"PE": [], "ELF": []}
    seen = set()
    for p in files:
        data = p.read_bytes()
        if data in seen:
            continue
        seen.add(data)
        with open(p, "rb") as f:
            kind = sniff_file(f)
        if kind:
            out[kind].append(data)
    out["ELF"].append(make_elf(bits=32, little=False, machine=20, **CUDA_ELF))
    return {k: tuple(v) for k, v in out.items()}


def header_fields(data: bytes) -> list[tuple[int, int]]:
    """(offset, width) of the header fields worth hitting with boundary values."""
    fields: list[tuple[int, int]] = []
    if data[:4] == b"\x7fELF":
        if data[4:5] == b"\x02":  # ELF64
            fields += [(16, 2), (18, 2), (32, 8), (40, 8), (54, 2), (56, 2), (58, 2), (60, 2), (62, 2)]
        else:
            fields += [(16, 2), (18, 2), (28, 4), (32, 4), (42, 2), (44, 2), (46, 2), (48, 2), (50, 2)]
        fields += [(4, 1), (5, 1)]
        return fields
    if data[:2] == b"MZ" and len(data) >= 0x40:
        pe = struct.unpack_from("<I", data, 0x3C)[0]
        fields.append((0x3C, 4))
        coff = pe + 4
        fields += [(coff, 2), (coff + 2, 2), (coff + 8, 4), (coff + 12, 4), (coff + 16, 2), (coff + 18, 2)]
        opt = coff + 20
        if opt + 2 <= len(data):
            fields.append((opt, 2))
            magic = struct.unpack_from("<H", data, opt)[0]
            dd = opt + (112 if magic == 0x20B else 96)
            fields += [(dd - 4, 4)]
            for index in (0, 1, 12, 13):  # export, import, IAT, delay import: RVA and size
                fields += [(dd + 8 * index, 4), (dd + 8 * index + 4, 4)]
            nsec_off = coff + 2
            if nsec_off + 2 <= len(data):
                nsec = struct.unpack_from("<H", data, nsec_off)[0]
                sec0 = opt + struct.unpack_from("<H", data, coff + 16)[0]
                for i in range(min(nsec, 8)):
                    base = sec0 + 40 * i
                    fields += [(base, 4), (base + 8, 4), (base + 12, 4), (base + 16, 4), (base + 20, 4)]
    return [(o, w) for o, w in fields if o + w <= len(data)]


@st.composite
def mutated(draw, fmt: str) -> bytes:
    pool = seeds()[fmt]
    if not pool:
        return b""
    data = bytearray(draw(st.sampled_from(pool)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "field", "splice", "head_flip"]))
        if not data:
            break
        if kind == "flip":
            for _ in range(draw(st.integers(1, 16))):
                i = draw(st.integers(0, len(data) - 1))
                data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "head_flip":  # the first 4 KB hold every header and most directories
            i = draw(st.integers(0, min(len(data), 4096) - 1))
            data[i] = draw(st.integers(0, 255))
        elif kind == "truncate":
            data = data[: draw(st.integers(0, len(data)))]
        elif kind == "field":
            fields = header_fields(bytes(data))
            if fields:
                off, width = draw(st.sampled_from(fields))
                value = draw(st.sampled_from(INTERESTING) | st.integers(0, (1 << (8 * width)) - 1))
                data[off : off + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
        else:  # splice random bytes somewhere
            i = draw(st.integers(0, len(data)))
            data[i : i + 16] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


def check(data: bytes) -> None:
    try:
        info = read_bytes(data)
    except MalformedBinary as exc:
        assert str(exc), "MalformedBinary without a message"
        event("malformed")
        return
    assert isinstance(info, BinaryInfo)
    event("parsed")


FUZZ = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])


@pytest.mark.parametrize("fmt", ["PE", "ELF"])
def test_seeds_exist(fmt):
    if not seeds()[fmt]:
        pytest.skip(f"no {fmt} seed binaries (no fixtures and no compiler)")
    for data in seeds()[fmt]:
        assert isinstance(read_bytes(data), BinaryInfo)


@FUZZ
@given(data=mutated("PE"))
def test_fuzz_pe(data):
    check(data)


@FUZZ
@given(data=mutated("ELF"))
def test_fuzz_elf(data):
    check(data)


@settings(max_examples=150, deadline=2000)
@given(data=st.binary(max_size=512), prefix=st.sampled_from([b"MZ", b"\x7fELF\x01\x01", b"\x7fELF\x02\x02", b""]))
def test_fuzz_random_bytes(data, prefix):
    check(prefix + data)


@settings(max_examples=60, deadline=2000, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(data=st.one_of(mutated("PE"), mutated("ELF")))
def test_fuzz_through_mmap(data):
    """Same contract through read_path (mmap buffer instead of bytes)."""
    import os
    import tempfile

    fd, name = tempfile.mkstemp(prefix="cuda4amd_fuzz_")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            via_path = read_path(name)
        except MalformedBinary as exc:
            with pytest.raises(MalformedBinary):
                read_bytes(data)
            assert str(exc)
            return
        assert via_path == read_bytes(data)
    finally:
        os.unlink(name)
