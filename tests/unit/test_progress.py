"""Progress goes by bytes (a wheel's one 1 GB library is most of its reading), on a terminal only, and not
with -q (as ruff). The terminal is a real pseudo-terminal."""
from __future__ import annotations

import os
import select
import subprocess
import sys

import pytest
from conftest import FIXTURES

from cuda4amd.scan.pipeline import Progress, ScanOptions, run_scan

DEMO = FIXTURES / "demo" / "Tool"


class Recorder(Progress):
    def __init__(self) -> None:
        self.total = 0
        self.read = 0

    def reading(self, total_bytes: int) -> None:
        self.total = total_bytes

    def advance(self, read_bytes: int) -> None:
        self.read += read_bytes


@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_counts_the_bytes_of_the_binaries(jobs):
    recorder = Recorder()
    result = run_scan(ScanOptions(str(DEMO), jobs=jobs), recorder)
    assert recorder.total == sum(b.size for b in result.binaries) > 0
    assert recorder.read == recorder.total


def stderr_on_a_terminal(*args: str) -> bytes:
    import pty

    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "cuda4amd", "scan", str(DEMO), "--host", "none", *args],
                               stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while select.select([master], [], [], 30)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the other end closed (Linux: EIO)
            break
        if not chunk:
            break
        seen += chunk
    process.communicate(timeout=60)
    os.close(master)
    return seen


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
def test_the_bar_shows_on_a_terminal_and_not_with_quiet():
    assert b"finding binaries" in stderr_on_a_terminal()
    assert stderr_on_a_terminal("-q") == b""
