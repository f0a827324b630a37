"""tools/bench.py runs end to end on a small tree and reports every goal row (no timing is asserted)."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import FIXTURES, REPO


def test_bench_reports_each_goal_on_a_fixture_tree(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "bench.py"), "--tree", str(FIXTURES / "byname"),
         "--runs", "1", "--lief-runs", "1", "--cold", "0"],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    table = done.stdout
    for row in ("full scan, warm, `--no-cache` (jobs =", "full scan, warm, `--no-cache --jobs 1`",
                "`--no-cache --engine lief --jobs", "lief ÷ fast (medians, same run)",
                "re-scan, unchanged tree, warm facts cache"):
        assert row in table, row
    if os.path.exists("/proc/self/smaps_rollup"):
        assert "peak memory, main process (VmHWM)" in table and "summed PSS" in table
    assert "output identical to `--jobs 1 --no-cache` in every fast run: yes" in table
