"""Discovery leaves data-named files unopened, and that never changes a report.

Each case is scanned with the skip (DATA_EXTENSIONS) and without it (an
empty set: every file sniffed), and the reports must be byte-identical.
The ELF libraries under data names are built here with gcc.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from cuda4amd.cli import main
from cuda4amd.scan import discover as discovery

PE = FIXTURES / "pe" / "plain.dll"
ELF = FIXTURES / "elf" / "libplain.so"


def report(target, monkeypatch, skip: bool) -> str:
    with monkeypatch.context() as patch:
        if not skip:
            patch.setattr(discovery, "DATA_EXTENSIONS", frozenset())
        result = CliRunner().invoke(main, ["scan", str(target), "--format", "json", "--host", "none", "--no-cache"])
    assert result.output.startswith("{"), result.output
    return result.output


def same_with_and_without_skip(target, monkeypatch) -> str:
    skipped = report(target, monkeypatch, skip=True)
    assert skipped == report(target, monkeypatch, skip=False)
    return skipped


def gcc(*args: str) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    subprocess.run(["gcc", *args], check=True, capture_output=True)


@pytest.mark.parametrize("folder", ["demo", "pe", "elf", "byname", "kernels", "corrupt", "."])
def test_fixture_reports_do_not_depend_on_the_skip(folder, monkeypatch):
    same_with_and_without_skip(FIXTURES / folder, monkeypatch)


def test_data_named_files_are_not_opened(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    for name in ("__init__.py", "mod.pyc", "README.md", "api.h", "data.json"):
        (tmp_path / "pkg" / name).write_bytes(b"MZ" + b"\0" * 100)
    shutil.copy(PE, tmp_path / "pkg" / "plain.dll")
    opened: list[str] = []
    real_open = os.open

    def spy(path, *args, **kwargs):
        opened.append(os.path.basename(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(discovery.os, "open", spy)
    found = discovery.discover(discovery.resolve_target(str(tmp_path)))
    assert opened == ["plain.dll"]
    assert found.files_seen == 6
    assert sorted(found.skipped) == ["__init__.py", "api.h", "data.json", "mod.pyc", "readme.md"]


def test_a_library_imported_under_a_data_name_is_still_found(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "dep.c").write_text("int dep(void) { return 1; }\n")
    (src / "user.c").write_text("int dep(void);\nint user(void) { return dep(); }\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    gcc("-shared", "-fPIC", "-o", str(tree / "libdep.txt"), str(src / "dep.c"), "-Wl,-soname,libdep.txt")
    gcc("-shared", "-fPIC", "-o", str(tree / "libuser.so"), str(src / "user.c"), str(tree / "libdep.txt"))
    os.chmod(tree / "libdep.txt", 0o644)  # ld makes its output executable, and an executable file is always sniffed
    found = discovery.discover(discovery.resolve_target(str(tree)))
    assert [b.path for b in found.binaries] == ["libuser.so"]
    assert [b.path for b in discovery.named_skipped(found, {"libdep.txt"})] == ["libdep.txt"]
    assert [b.path for b in found.binaries] == ["libdep.txt", "libuser.so"]

    document = same_with_and_without_skip(tree, monkeypatch)
    assert '"libdep.txt"' in document
    # a link under a library name to the data-named file: the file is read under its own name
    (tree / "libalias.so").symlink_to("libdep.txt")
    same_with_and_without_skip(tree, monkeypatch)
    # and as a wheel
    wheel = tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(tree / "libdep.txt", "pkg/libdep.txt")
        zf.write(tree / "libuser.so", "pkg/libuser.so")
    assert '"pkg/libdep.txt"' in same_with_and_without_skip(wheel, monkeypatch)
    # one binary as the target: its folder is walked and only what it asks for is read, data-named or not
    single = json.loads(same_with_and_without_skip(tree / "libuser.so", monkeypatch))
    assert sorted(b["path"] for b in single["binaries"]) == ["libdep.txt", "libuser.so"]
    # a wheel inside a folder: its members are scanned under the wheel's path
    holder = tmp_path / "holder"
    holder.mkdir()
    shutil.copy(wheel, holder / wheel.name)
    assert f'"{wheel.name}/pkg/libdep.txt"' in same_with_and_without_skip(holder, monkeypatch)


@pytest.mark.skipif(os.name == "nt", reason="execute bits are POSIX")
def test_an_executable_under_a_data_name_is_sniffed(tmp_path, monkeypatch):
    shutil.copy(ELF, tmp_path / "tool.py")
    shutil.copy(ELF, tmp_path / "notes.txt")
    os.chmod(tmp_path / "tool.py", 0o755)
    os.chmod(tmp_path / "notes.txt", 0o644)
    found = discovery.discover(discovery.resolve_target(str(tmp_path)))
    assert [b.path for b in found.binaries] == ["tool.py"]  # notes.txt: named by no import, never run


