"""The real-wheel (acceptance) tests of tests/unit/test_reader_agreement.py: CUDA wheels from PyPI, downloaded on demand."""
from __future__ import annotations

import tempfile
import time
import zipfile
from pathlib import Path

import pytest
from test_reader_agreement import EXPECTED_WHEELS, cached_wheels, explain, fast_view, pe_view, wheel_cache

from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.engine import read_path, sniff


@pytest.mark.acceptance
def test_real_wheels_fast_equals_lief(tmp_path):
    """Every PE/ELF member of the cached CUDA wheels: fast == lief.

    lief reads whole files (the cuFFT DLL is ~290 MB, ≈2x that in memory),
    so this takes a while; the timings are reported on failure and in -s
    output.
    """
    wheels = cached_wheels()
    if not wheels:
        pytest.skip(f"no wheels cached in {wheel_cache()} (expected {', '.join(EXPECTED_WHEELS)}; "
                    "set CUDA4AMD_WHEEL_CACHE)")
    missing = [w for w in EXPECTED_WHEELS if not any(p.name.startswith(w + "-") for p in wheels)]
    compared, t_fast, t_lief = 0, 0.0, 0.0
    failures = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            for member in zf.infolist():
                if member.is_dir() or member.file_size < 64:
                    continue
                with zf.open(member) as f:
                    head = f.read(4096)
                if sniff(head) is None:
                    continue
                with tempfile.TemporaryDirectory(dir=tmp_path) as d:
                    path = Path(zf.extract(member, d))
                    t0 = time.perf_counter()
                    try:
                        fast = read_path(path)
                    except MalformedBinary as exc:
                        failures.append(f"{wheel.name}!{member.filename}: fast reader failed: {exc}")
                        continue
                    t1 = time.perf_counter()
                    ref = read_path(path, engine="lief")
                    t2 = time.perf_counter()
                    if fast.format == "PE":
                        ours, theirs = fast_view(fast), pe_view(path)
                        if ours != theirs:
                            failures.append(f"{wheel.name}!{member.filename}: pefile differs in "
                                            f"{sorted(k for k in ours if ours[k] != theirs[k])}")
                t_fast += t1 - t0
                t_lief += t2 - t1
                compared += 1
                if fast != ref:
                    failures.append(f"{wheel.name}!{member.filename}: {explain(fast, ref)}")
    print(f"\ncompared {compared} binaries from {len(wheels)} wheels: fast {t_fast:.2f} s, lief {t_lief:.2f} s"
          + (f"; not cached: {', '.join(missing)}" if missing else ""))
    assert compared > 0, f"no PE/ELF members in {[w.name for w in wheels]}"
    assert not failures, "\n".join(failures)
