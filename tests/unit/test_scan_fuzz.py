"""Whole-scan fuzzing: mutated fixture binaries in one folder never stop a scan.

Every file is either read (a binary in the report) or exactly one per-file
error; nothing escapes, and the scan finishes.
"""
from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda4amd.report.document import build
from cuda4amd.scan.pipeline import ScanOptions, run_scan

SEEDS = [
    FIXTURES / "pe" / "blas_mixed.dll",
    FIXTURES / "pe" / "delay_solver.dll",
    FIXTURES / "pe" / "plain.dll",
    FIXTURES / "elf" / "libuser_blas.so",
    FIXTURES / "elf" / "app_driver",
    FIXTURES / "kernels" / "pe" / "axpy_fatb.dll",
    FIXTURES / "kernels" / "elf" / "libaxpy_mixed.so",
    FIXTURES / "byname" / "loader.dll",
]

mutation = st.tuples(
    st.sampled_from(range(len(SEEDS))),
    st.sampled_from(["flip", "truncate", "overwrite", "zero-run"]),
    st.integers(min_value=0, max_value=2**32 - 1),
)


def mutate(data: bytes, how: str, seed: int) -> bytes:
    rng = random.Random(seed)
    buf = bytearray(data)
    if how == "truncate":
        return bytes(buf[: rng.randrange(2, len(buf))])
    if how == "flip":
        for _ in range(rng.randint(1, 64)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    elif how == "overwrite":
        at = rng.randrange(0x40, len(buf) - 8)  # keep the magic: these must be read as binaries
        buf[at : at + 8] = rng.choice([b"\xff" * 8, b"\x00" * 8, rng.randbytes(8)])
    else:
        at = rng.randrange(0x40, len(buf))
        buf[at : at + rng.randint(16, 4096)] = b"\x00" * len(buf[at : at + 4096])
    return bytes(buf)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutation, min_size=1, max_size=6))
def test_a_scan_of_mutated_binaries_always_finishes(rules, mutations):
    folder = Path(tempfile.mkdtemp(prefix="cuda4amd-fuzz-"))
    try:
        names = []
        for n, (index, how, seed) in enumerate(mutations):
            name = f"{n}-{SEEDS[index].name}"
            (folder / name).write_bytes(mutate(SEEDS[index].read_bytes(), how, seed))
            names.append(name)
        document = build(run_scan(ScanOptions(target=str(folder)), rules=rules))
        read = {b["path"] for b in document["binaries"]}
        unreadable = [e["path"] for e in document["errors"] if e["stage"] in ("discover", "read")]
        assert len(unreadable) == len(set(unreadable)), "one error per bad file"
        assert not read & set(unreadable)
        # a file is a binary, an error, or (its magic destroyed by truncation) not a binary at all
        assert read | set(unreadable) <= set(names)
        assert document["verdict"] in ("ready", "partial", "incomplete", "blocked", "no-cuda")
    finally:
        shutil.rmtree(folder)
