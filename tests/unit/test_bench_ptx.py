"""tools/bench_ptx.py over a fixture with one registered PTX text (fixtures/gpupaths, built by nvcc): what it
reads, the outcome at each release, and the floor's passes (never a time)."""
from __future__ import annotations

import subprocess
import sys

from conftest import FIXTURES, REPO


def test_bench_ptx_reads_the_text_judges_it_at_every_release_and_times_the_floor():
    done = subprocess.run([sys.executable, str(REPO / "tools" / "bench_ptx.py"), "--floor", str(FIXTURES / "gpupaths")],
                          capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("1 files, 1 PTX texts"), lines[0]
    assert lines[1].startswith("PTX stage (4 releases):") and "MB/s per core" in lines[1], lines[1]
    floor = [line.split(":")[1].split()[0] for line in lines if line.startswith("  floor:")]
    assert floor == ["sha256", "translate", "split", "functions", "all"], floor
    assert [line.strip() for line in lines if line.startswith("  v")] == [
        "v5: ok 1", "v6: ok 1", "v6-preview.69: ok 1", "v7-preview.9: ok 1"]
