"""tools/byname_bench.py compares the by-name search with another version of it:
a byname/ package folder, a one-module byname.py, or a git revision holding either."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES, REPO

PACKAGE = REPO / "scanner" / "scan" / "read" / "byname"


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "tools" / "byname_bench.py"), "--repeat", "1", *args, str(FIXTURES / "byname")],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False)


def test_against_a_package_folder_runs_that_folders_code(tmp_path):
    same = tmp_path / "byname"
    shutil.copytree(PACKAGE, same, ignore=shutil.ignore_patterns("__pycache__"))
    done = bench("--against", str(same))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith(", 0 with different results"), done.stdout
    # a copy that finds nothing: its results, not the current package's, are compared
    find = same / "find.py"
    find.write_text(find.read_text(encoding="utf-8").replace("return tuple(sorted(found))", "return ()"),
                    encoding="utf-8")
    done = bench("--against", str(same))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "DIFFERENT" in done.stdout and " 0 with different results" not in done.stdout


def test_against_one_module(tmp_path):
    module = tmp_path / "byname.py"
    module.write_text("from cuda4amd.scan.read.byname import NamePatterns, find_library_names\n", encoding="utf-8")
    done = bench("--against", str(module))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith(", 0 with different results"), done.stdout


def test_against_a_git_revision():
    if shutil.which("git") is None or subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                                                     capture_output=True, check=False).returncode:
        pytest.skip("not a git checkout")
    done = bench("--against", "HEAD")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith(", 0 with different results"), done.stdout
    done = bench("--against", "no-such-revision-anywhere")
    assert done.returncode != 0
