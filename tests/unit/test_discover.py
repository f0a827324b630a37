from __future__ import annotations

import dataclasses
import os
import shutil
import zipfile
from pathlib import Path

import pytest
from conftest import FIXTURES

from cuda4amd.scan import discover as discovery
from cuda4amd.scan.read.engine import read_path
from cuda4amd.scan.read.stage import read_all

PE = FIXTURES / "pe" / "plain.dll"
ELF = FIXTURES / "elf" / "libplain.so"


def found_paths(target) -> list[str]:
    return [b.path for b in discovery.discover(discovery.resolve_target(str(target))).binaries]


def test_binaries_are_found_by_magic_not_extension(tmp_path):
    shutil.copy(PE, tmp_path / "renamed.txt")
    shutil.copy(ELF, tmp_path / "noext")
    (tmp_path / "fake.dll").write_text("not a binary")
    (tmp_path / "dos.exe").write_bytes((FIXTURES / "corrupt" / "dos_only.exe").read_bytes())
    found = discovery.discover(discovery.resolve_target(str(tmp_path)))
    assert [(b.path, b.format) for b in found.binaries] == [("noext", "ELF"), ("renamed.txt", "PE")]
    assert found.files_seen == 4
    assert found.errors == []


def test_folder_is_walked_recursively_with_posix_relative_paths(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    shutil.copy(PE, tmp_path / "a" / "b" / "x.dll")
    shutil.copy(PE, tmp_path / "top.dll")
    assert found_paths(tmp_path) == ["a/b/x.dll", "top.dll"]


def test_symlink_loops_end_and_duplicates_become_aliases(tmp_path):
    (tmp_path / "lib").mkdir()
    shutil.copy(ELF, tmp_path / "lib" / "libplain.so.1")
    (tmp_path / "lib" / "libplain.so").symlink_to("libplain.so.1")
    (tmp_path / "lib" / "loop").symlink_to("..", target_is_directory=True)
    (tmp_path / "dangling.so").symlink_to("nowhere")
    found = discovery.discover(discovery.resolve_target(str(tmp_path)))
    assert [b.path for b in found.binaries] == ["lib/libplain.so.1"]
    assert found.aliases == {"lib/libplain.so": "lib/libplain.so.1"}
    assert found.errors == []


def test_non_utf8_file_names_are_reported_printably(tmp_path):
    raw = os.fsencode(tmp_path) + b"/caf\xe9-\xff.dll"
    with open(raw, "wb") as handle:
        handle.write(PE.read_bytes())
    found = discovery.discover(discovery.resolve_target(str(tmp_path)))
    (binary,) = found.binaries
    assert binary.path == "caf\\xe9-\\xff.dll"  # the bytes, visibly (issue 11 item 10)
    binaries, errors = read_all(found.target, found.binaries, "fast")
    assert errors == [] and binaries[0].info.format == "PE"


def test_unreadable_file_is_one_error_and_the_walk_goes_on(tmp_path, monkeypatch):
    shutil.copy(PE, tmp_path / "locked.dll")
    shutil.copy(PE, tmp_path / "open.dll")
    real_open = discovery.open_regular_fd  # discovery sniffs through it (root ignores chmod 000)

    def guarded_open(path, *args, **kwargs):
        if str(path).endswith("locked.dll"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(discovery, "open_regular_fd", guarded_open)
    found = discovery.discover(discovery.resolve_target(str(tmp_path)))
    assert [b.path for b in found.binaries] == ["open.dll"]
    assert [(e.path, e.stage, e.message) for e in found.errors] == [("locked.dll", "discover", "permission denied")]


def test_file_vanishing_mid_scan_is_one_error(tmp_path):
    shutil.copy(PE, tmp_path / "gone.dll")
    shutil.copy(PE, tmp_path / "kept.dll")
    target = discovery.resolve_target(str(tmp_path))

    def vanish():
        (tmp_path / "gone.dll").unlink(missing_ok=True)

    found = discovery.discover(target, on_file=vanish)
    assert [b.path for b in found.binaries] == ["kept.dll"]
    assert [(e.path, e.message) for e in found.errors] == [("gone.dll", "vanished during the scan")]


def test_file_vanishing_before_it_is_read_is_one_error(tmp_path):
    shutil.copy(PE, tmp_path / "gone.dll")
    shutil.copy(PE, tmp_path / "kept.dll")
    found = discovery.discover(discovery.resolve_target(str(tmp_path)))
    (tmp_path / "gone.dll").unlink()
    binaries, errors = read_all(found.target, found.binaries, "fast")
    assert [b.path for b in binaries] == ["kept.dll"]
    assert [(e.path, e.stage, e.message) for e in errors] == [("gone.dll", "read", "vanished during the scan")]


def test_venv_target_walks_its_site_packages(tmp_path):
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    site = tmp_path / "lib" / "python3.12" / "site-packages" / "pkg"
    site.mkdir(parents=True)
    shutil.copy(PE, site / "ext.pyd")
    (tmp_path / "bin").mkdir()
    shutil.copy(ELF, tmp_path / "bin" / "python")
    target = discovery.resolve_target(str(tmp_path))
    assert target.kind == "venv"
    assert found_paths(tmp_path) == ["lib/python3.12/site-packages/pkg/ext.pyd"]


def test_windows_venv_layout(tmp_path):
    (tmp_path / "pyvenv.cfg").write_text("home = C:\\Python312\n")
    site = tmp_path / "Lib" / "site-packages"
    site.mkdir(parents=True)
    shutil.copy(PE, site / "x.pyd")
    assert found_paths(tmp_path) == ["Lib/site-packages/x.pyd"]


def test_single_file_target(tmp_path):
    shutil.copy(PE, tmp_path / "one.dll")
    target = discovery.resolve_target(str(tmp_path / "one.dll"))
    assert target.kind == "file"
    assert found_paths(tmp_path / "one.dll") == ["one.dll"]


def test_wheel_is_read_in_place(tmp_path):
    archive = tmp_path / "pkg-1.0-py3-none-win_amd64.whl"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(PE, "pkg/bin/plain.dll")
        zf.write(ELF, "pkg/lib/libplain.so")
        zf.writestr("pkg/__init__.py", "")
    target = discovery.resolve_target(str(archive))
    assert target.kind == "archive"
    found = discovery.discover(target)
    assert [(b.path, b.format) for b in found.binaries] == [("pkg/bin/plain.dll", "PE"), ("pkg/lib/libplain.so", "ELF")]
    binaries, errors = read_all(target, found.binaries, "fast")
    assert errors == [] and len(binaries) == 2


def test_large_archive_members_are_spooled_not_held(tmp_path, monkeypatch):
    import cuda4amd.scan.read.item as scan_module

    archive = tmp_path / "big.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(PE, "plain.dll")
    monkeypatch.setattr(scan_module, "IN_MEMORY_MEMBER_LIMIT", 10)
    target = discovery.resolve_target(str(archive))
    binaries, errors = read_all(target, discovery.discover(target).binaries, "fast")
    # the member read whole from its spooled copy: the facts of the file itself (a scan leaves exports out)
    assert errors == [] and binaries[0].info == dataclasses.replace(read_path(PE), exports=())


def test_windows_style_relative_path_is_accepted(tmp_path, monkeypatch):
    (tmp_path / "Apps" / "Tool").mkdir(parents=True)
    shutil.copy(PE, tmp_path / "Apps" / "Tool" / "a.dll")
    monkeypatch.chdir(tmp_path)
    target = discovery.resolve_target("Apps\\Tool")
    assert target.path == Path("Apps/Tool") and target.display == "Apps\\Tool"


def test_windows_drive_path_on_linux_says_what_to_do():
    with pytest.raises(discovery.TargetError, match=r"a Windows path"):
        discovery.resolve_target("Q:\\Apps\\Tool")


def test_missing_target_is_a_target_error(tmp_path):
    with pytest.raises(discovery.TargetError, match="no such file or folder"):
        discovery.resolve_target(str(tmp_path / "nope"))


def test_cuda4amd_own_folder_is_not_scanned(tmp_path):
    (tmp_path / ".cuda4amd" / "zluda").mkdir(parents=True)
    shutil.copy(PE, tmp_path / ".cuda4amd" / "zluda" / "nvcuda.dll")
    shutil.copy(PE, tmp_path / "app.dll")
    assert found_paths(tmp_path) == ["app.dll"]
