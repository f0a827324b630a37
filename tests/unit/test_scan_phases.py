"""tools/scan_phases.py: each phase of a fresh command-line scan, end to end on a fixture tree (no timing asserted)."""
from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import FIXTURES, REPO

sys.path.insert(0, str(REPO / "tools"))
from scan_phases import PhasesError, phases, summary

STAMPS = {"up": 10.0, "imported": 10.5, "run_scan in": 11.0, "run_scan out": 13.0, "emit out": 13.25,
          "exit": 13.5, "timings": {"discover": 0.5, "read": 1.25}}


def test_phases_split_the_parents_clock_at_the_processs_stamps() -> None:
    row = phases(STAMPS, before=9.75, after=14.0)
    assert row == {"start to interpreter up": 0.25, "imports (cuda4amd.cli)": 0.5, "to run_scan": 0.5,
                   "run_scan": 2.0, "to the report written": 0.25, "to SystemExit": 0.25, "exit": 0.5,
                   "total": 4.25, "  run_scan: discover": 0.5, "  run_scan: read": 1.25}
    assert summary([row, {**row, "total": 5.25}])[7].split() == ["total", "4750.0", "(4250.0,", "5250.0)"]


def test_a_missing_stamp_is_an_error_that_names_it() -> None:
    with pytest.raises(PhasesError, match="emit out"):
        phases({k: v for k, v in STAMPS.items() if k != "emit out"}, before=9.75, after=14.0)
    with pytest.raises(PhasesError, match="not a time"):
        phases({**STAMPS, "exit": "late"}, before=9.75, after=14.0)


def test_the_tool_times_a_real_scan_of_a_fixture_tree() -> None:
    done = subprocess.run([sys.executable, str(REPO / "tools" / "scan_phases.py"), "--rounds", "1",
                           str(FIXTURES / "byname"), "--", "--host", "none", "--no-cache"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("1 fresh processes, median (min, max) ms")
    measured = {line[:32].rstrip(): float(line[32:].split()[0]) for line in lines[1:]}
    assert list(measured)[:8] == ["start to interpreter up", "imports (cuda4amd.cli)", "to run_scan", "run_scan",
                                  "to the report written", "to SystemExit", "exit", "total"]
    assert "  run_scan: read" in measured
    assert all(value >= 0 for value in measured.values())
    assert measured["total"] >= measured["run_scan"] > 0
