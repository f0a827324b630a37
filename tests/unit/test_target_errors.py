"""A target the command cannot use is one line and exit 2, never a traceback (docs/exit-status.md)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: as root, mode 000 still reads: the commands run without the capabilities that let root pass permission
#: checks (capabilities(7): CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so root meets them as any user does
WITHOUT_ROOT_PASS = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []


def cuda4amd(*args: str, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [*(prefix or []), sys.executable, "-m", "cuda4amd", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture
def unreadable(tmp_path: Path):
    folder = tmp_path / "noperm"
    folder.mkdir()
    (folder / "tool.dll").write_bytes(b"MZ")
    folder.chmod(0)
    yield folder
    folder.chmod(0o700)


@pytest.mark.skipif(sys.platform == "win32" or (os.geteuid() == 0 and not shutil.which("setpriv")),
                    reason="needs POSIX permissions, and setpriv (util-linux) when run as root")
@pytest.mark.parametrize("command", ["scan", "undo", "verify"])
def test_a_target_this_user_cannot_read_is_permission_denied(unreadable, command):
    done = cuda4amd(command, str(unreadable), prefix=WITHOUT_ROOT_PASS)
    assert done.returncode == 2, done.stderr
    assert "permission denied" in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1


def test_an_empty_target_is_a_usage_error():
    done = cuda4amd("scan", "")
    assert done.returncode == 2
    assert done.stderr == "cuda4amd: the target is empty: name a folder, a file or an archive\n"


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need a privilege on Windows")
def test_a_link_loop_is_named_as_one(tmp_path: Path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    done = cuda4amd("scan", str(tmp_path / "a"))
    assert done.returncode == 2
    assert done.stderr.endswith(": symbolic link loop\n")


def test_an_empty_file_named_like_a_library_is_listed_as_unread(tmp_path: Path):
    for name in ("a.dll", "b.so", "c.so.12", "d.pyd", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    done = cuda4amd("scan", str(tmp_path), "--format", "json", "-o", "-", "--host", "none")
    errors = {e["path"]: e["message"] for e in json.loads(done.stdout)["errors"]}
    assert sorted(errors) == ["a.dll", "b.so", "c.so.12", "d.pyd"]
    assert all("empty file" in message for message in errors.values())
