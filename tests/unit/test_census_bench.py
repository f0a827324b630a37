"""tools/census_bench.py runs end to end on fixture wheels and prints every figure (no timing is asserted)."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO

pytest.importorskip("distributed", reason='the census extra: pip install ".[census]"')


def test_the_census_bench_prints_each_figure(tmp_path: Path) -> None:
    for name, binary in (("appready", "pe/app_ready.exe"), ("blasmix", "pe/blas_mixed.dll")):
        with zipfile.ZipFile(tmp_path / f"{name}-1.0-py3-none-win_amd64.whl", "w") as z:
            z.writestr(f"{name}/{Path(binary).name}", (FIXTURES / binary).read_bytes())
            z.writestr(f"{name}-1.0.dist-info/METADATA", f"Name: {name}\nVersion: 1.0\n")
    log = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(REPO / "tools" / "census_bench.py"), str(tmp_path), "--workers", "2",
                           "--zluda-release", "v6", "--log", str(log), "--ab"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "2 wheels (2 with CUDA binaries)" in done.stdout and "reports equal: True" in done.stdout
    for row in ("| serial |", "| cluster |", "| resumed |", "| ab defaults |", "| ab quiet |", "task-time ratio",
                "memory: each worker bounded to", "speed-up projected for free cores", "other processes took"):
        assert row in done.stdout
    figures = json.loads(log.read_text())
    assert figures["ab quiet"]["scanned"] == figures["ab defaults"]["scanned"] == 2
    assert figures["worker_memory_limit_bytes"] > 0 and figures["worker_peak_rss_bytes"] > 0
    assert figures["resumed"]["scanned"] == 0 and figures["resumed"]["skipped"] == figures["tasks"] == 2
