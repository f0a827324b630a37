"""Issue 31, item 4: `trace explain` bounds the objects it builds, not only the bytes it reads, says
what it cut, and reads the rest of a trace when one side file is damaged."""
from __future__ import annotations

import io
import subprocess
import sys
import time
import zipfile

import pytest

from cuda4amd.trace.read import MAX_ENTRIES, open_trace

LINE = b"cuDeviceGet(device: 0x1, ordinal: 0) -> CUDA_SUCCESS\n"


SHORT = b"x\n"  # a note line each: an entry each, as a call line is


def bomb(path, size=32 << 20):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("app/log.txt", SHORT * (size // len(SHORT)))
    return path


@pytest.mark.skipif(sys.platform == "win32", reason="resource limits")
def test_a_zip_of_32_mib_of_short_lines_takes_bounded_memory_and_time(tmp_path):
    path = bomb(tmp_path / "trace.zip")
    assert path.stat().st_size < 64 << 10
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "from cuda4amd.cli import entry_point; sys.argv = ['cuda4amd', 'trace', 'explain', sys.argv[1], "
            "'--format', 'json']; entry_point()")
    import resource

    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert f"more lines past the first {MAX_ENTRIES}" in done.stderr  # what was cut is said
    assert peak < 400 << 20, peak  # was 1.49 GB
    assert seconds < 60


def test_the_entries_are_capped_and_the_rest_counted(tmp_path):
    [run] = open_trace(bomb(tmp_path / "trace.zip", 8 << 20))
    total = (8 << 20) // len(SHORT)
    assert run.lines == MAX_ENTRIES and run.lines + run.cut == total
    assert sum(1 for _ in run.walk()) == MAX_ENTRIES


def test_one_damaged_side_file_does_not_refuse_the_trace(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("app/log.txt", LINE * 3)
        archive.writestr("app/module_0001.log", b"PTX_ERROR_MARKER " * 10)
        archive.writestr("app/module_0002.log", b"error: unknown directive\n")
    data = buf.getvalue().replace(b"PTX_ERROR_MARKER", b"PTX_ERROR_MARKEX", 1)  # a bad CRC on reading
    path = tmp_path / "trace.zip"
    path.write_bytes(data)
    [run] = open_trace(path)
    assert run.lines == 3
    assert "module_0001.log" in run.unreadable and "module_0002.log" in run.side
    done = subprocess.run([sys.executable, "-m", "cuda4amd", "trace", "explain", str(path)], capture_output=True,
                          text=True)
    assert done.returncode == 0 and "module_0001.log not read" in done.stderr, done.stderr


def test_a_line_longer_than_the_cap_is_cut(tmp_path):
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "log.txt").write_bytes(b"x" * (1 << 20) + b"\n" + LINE)
    [run] = open_trace(folder)
    assert run.lines == 2 and len(run.calls[0].text) <= 16 << 10 and run.calls[1].name == "cuDeviceGet"
