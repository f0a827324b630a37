"""tools/profile_scan.py: one command-line scan under cProfile, on a fixture tree (no timing asserted)."""
from __future__ import annotations

import subprocess
import sys

from conftest import FIXTURES, REPO


def test_the_profile_lists_the_scans_own_functions_both_ways() -> None:
    done = subprocess.run([sys.executable, str(REPO / "tools" / "profile_scan.py"), "--top", "60",
                           str(FIXTURES / "byname"), "--", "--host", "none", "--no-cache"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    first = next(line for line in text.splitlines() if line.startswith("# "))  # after the scan's own summary
    assert first.startswith(f"# cuda4amd scan {FIXTURES / 'byname'} --format json -o ")
    assert first.endswith("s under the profiler") and "--host none --no-cache" in first
    by_own, by_below = text.split("## by tottime\n")[1].split("## by cumulative\n")
    for listing in (by_own, by_below):
        rows = listing.splitlines()
        assert rows[0].split()[:2] == ["ncalls", "tottime"] and 1 < len(rows) <= 61
    assert "(entry_point)" in by_below and "(run_scan)" in by_below
