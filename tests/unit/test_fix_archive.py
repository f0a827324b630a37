"""Safe unpacking: the fixture releases unpack and check; hostile archives are refused."""
from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import pytest
from test_fix_support import HOSTILE, LINUX_TGZ, TAG, WIN_ZIP, sha256, snapshot

from cuda4amd.fix.archive import ArchiveError, extract_archive, inspect_archive, open_folder, prepare_store
from cuda4amd.fix.release import ReleaseSource


@pytest.fixture(scope="module")
def release(rules):
    return rules.release(TAG)


def source(kind: str, path: Path, platform: str, sha: str | None = None) -> ReleaseSource:
    return ReleaseSource(TAG, platform, kind, str(path), path.name, None, sha)


def test_windows_fixture_unpacks_with_every_table_file(release, tmp_path):
    files, links, _executable, missing = extract_archive(WIN_ZIP, tmp_path / "out", release, "windows",
                                                        required=["nvcuda.dll", "zluda.exe"])
    listed = {f.path for f in release.files if f.platform == "windows"}
    assert set(files) == listed and not links and missing == ()
    assert files["nvcuda.dll"] == sha256(tmp_path / "out" / "nvcuda.dll")
    assert (tmp_path / "out" / "trace" / "nvcuda.dll").is_file()


def test_linux_fixture_unpacks_its_soname_links(release, tmp_path):
    _files, links, executable, _missing = extract_archive(LINUX_TGZ, tmp_path / "out", release, "linux")
    assert links["libcuda.so.1"] == "libnvcuda.so"
    assert links["trace/libcublas.so"] == "../libzluda_trace_blas.so"
    out = tmp_path / "out"
    assert os.readlink(out / "libcuda.so.1") == "libnvcuda.so"
    assert (out / "trace" / "libcublas.so").resolve() == (out / "libzluda_trace_blas.so").resolve()
    assert "ptxas" in executable and os.access(out / "ptxas", os.X_OK)
    assert not os.access(out / "libnvcuda.so", os.X_OK)


@pytest.mark.parametrize("name, message", [
    ("abs-path.zip", "absolute path"),
    ("drive-path.zip", "drive, colon"),
    ("dotdot.zip", r"'\.\.' path part"),
    ("backslash.zip", "backslash"),
    ("symlink.zip", "symbolic link: refused"),
    ("missing-file.zip", "lacks nvcuda.dll"),
    ("no-top-folder.zip", "outside the top folder"),
    ("truncated.zip", "damaged or unreadable"),
    ("symlink-escape.tar.gz", "does not name 'libnvcuda.so'"),
    ("unlisted-symlink.tar.gz", "symbolic link the release table does not list"),
    ("wrong-link-target.tar.gz", "does not name 'libnvcuda.so'"),
    ("hardlink.tar.gz", "hard link: refused"),
    ("device.tar.gz", "device, fifo"),
    ("fifo.tar.gz", "device, fifo"),
    ("dotdot.tar.gz", r"'\.\.' path part"),
    ("abs-path.tar.gz", "absolute path"),
])
def test_hostile_archives_are_refused_and_write_nothing_outside(release, tmp_path, name, message):
    platform = "windows" if name.endswith(".zip") else "linux"
    required = ["nvcuda.dll"] if platform == "windows" else ["libnvcuda.so"]
    before = snapshot(tmp_path)
    with pytest.raises(ArchiveError, match=message):
        inspect_archive(HOSTILE / name, release, platform, required)
    assert snapshot(tmp_path) == before  # checking writes nothing
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(ArchiveError, match=message):
        extract_archive(HOSTILE / name, work / "out", release, platform, required)
    # whatever was unpacked before the refusal is inside the staging folder
    assert set(snapshot(tmp_path)) - set(before) <= {"work", *(f"work/{k}" for k in snapshot(work))}
    assert not Path("/tmp/cuda4amd-evil.dll").exists() and not Path("/tmp/cuda4amd-evil.sh").exists()
    assert not (tmp_path / "evil.dll").exists() and not (tmp_path.parent / "evil.dll").exists()


def test_prepare_store_unpacks_once_and_reuses(release, tmp_path):
    src = source("archive", WIN_ZIP, "windows")
    digest = sha256(WIN_ZIP)
    store = prepare_store(src, WIN_ZIP, digest, release, "windows", required=["nvcuda.dll"], cache=tmp_path)
    assert store.root == tmp_path / "zluda" / "store" / digest / "zluda"
    assert store.sha256 == digest and store.sha_of("nvcuda.dll") == sha256(store.root / "nvcuda.dll")
    assert [p.name for p in (tmp_path / "zluda" / "store").iterdir()] == [digest]  # no staging left
    mtime = (store.root / "nvcuda.dll").stat().st_mtime_ns
    again = prepare_store(src, WIN_ZIP, digest, release, "windows", required=["nvcuda.dll"], cache=tmp_path)
    assert again.files == store.files and (again.root / "nvcuda.dll").stat().st_mtime_ns == mtime
    (store.root / "nvcuda.dll").unlink()  # a damaged store is unpacked again
    third = prepare_store(src, WIN_ZIP, digest, release, "windows", required=["nvcuda.dll"], cache=tmp_path)
    assert (third.root / "nvcuda.dll").is_file()
    dry = prepare_store(src, WIN_ZIP, digest, release, "windows", required=["nvcuda.dll"], cache=tmp_path / "x",
                        unpack=False)
    assert dry.files == store.files and not (tmp_path / "x").exists()


def test_store_follows_links_inside_the_release(release, tmp_path):
    src = source("archive", LINUX_TGZ, "linux")
    store = prepare_store(src, LINUX_TGZ, sha256(LINUX_TGZ), release, "linux", cache=tmp_path)
    assert store.resolve("libcuda.so.1") == "libnvcuda.so"
    assert store.sha_of("libcuda.so.1") == store.files["libnvcuda.so"]
    assert store.resolve("trace/libcuda.so") == "libzluda_trace.so"


def test_unpacked_folder_is_used_in_place(release, tmp_path):
    with zipfile.ZipFile(WIN_ZIP) as z:
        z.extractall(tmp_path / "rel")
    src = source("folder", tmp_path / "rel", "windows")
    store = open_folder(src, release, "windows", ["nvcuda.dll"])
    assert store.root == tmp_path / "rel" / "zluda" and store.archive_sha256 is None
    assert store.sha256 == store.tree_sha256
    checked = open_folder(source("folder", tmp_path / "rel", "windows", store.tree_sha256), release, "windows")
    assert checked.files == store.files
    with pytest.raises(ArchiveError, match="tree sha256"):
        open_folder(source("folder", tmp_path / "rel", "windows", "0" * 64), release, "windows")
    os.symlink("/etc/passwd", tmp_path / "rel" / "zluda" / "evil.dll")
    with pytest.raises(ArchiveError, match="not a link the release table lists"):
        open_folder(src, release, "windows")
    os.unlink(tmp_path / "rel" / "zluda" / "evil.dll")
    (tmp_path / "rel" / "zluda" / "nvcuda.dll").unlink()
    with pytest.raises(ArchiveError, match=re.escape("lacks nvcuda.dll")):
        open_folder(src, release, "windows", ["nvcuda.dll"])


# -- issue 11, item 7: damage found while a member is read, and file/folder clashes ----------------

def _restored(src: Path, dest: Path, *, stored: bool = False, extra: list[tuple[str, bytes]] = ()) -> Path:
    with zipfile.ZipFile(src) as inp, zipfile.ZipFile(dest, "w", zipfile.ZIP_STORED if stored
                                                        else zipfile.ZIP_DEFLATED) as out:
        for info in inp.infolist():
            out.writestr(info, inp.read(info))
        for name, data in extra:
            out.writestr(name, data)
    return dest


def _bad_crc(tmp_path: Path) -> Path:
    path = _restored(WIN_ZIP, tmp_path / "bad-crc.zip", stored=True)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("zluda/nvcuda.dll")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0xFF  # stored: the sizes still agree, only the CRC does not
    path.write_bytes(bytes(data))
    return path


def _cut_tgz(tmp_path: Path) -> Path:
    path = tmp_path / "cut.tar.gz"
    data = LINUX_TGZ.read_bytes()
    path.write_bytes(data[: len(data) * 3 // 5])
    return path


@pytest.mark.parametrize("make, platform, message", [
    (_bad_crc, "windows", r"member 'nvcuda.dll' is damaged \(Bad CRC-32"),
    (_cut_tgz, "linux", "damaged"),
    (lambda tmp: _restored(WIN_ZIP, tmp / "file-then-folder.zip", extra=[("zluda/nvcuda.dll/x", b"x")]),
     "windows", "is both a file and a folder"),
    (lambda tmp: _restored(WIN_ZIP, tmp / "folder-then-file.zip", extra=[("zluda/trace", b"x")]),
     "windows", "is both a file and a folder"),
])
def test_damage_found_while_reading_is_a_refusal(release, tmp_path, make, platform, message):
    path = make(tmp_path)
    with pytest.raises(ArchiveError, match=message):
        inspect_archive(path, release, platform)
    with pytest.raises(ArchiveError, match=message):
        extract_archive(path, tmp_path / "out", release, platform)
    cache = tmp_path / "cache"
    with pytest.raises(ArchiveError, match=message):
        prepare_store(source("archive", path, platform), path, sha256(path), release, platform, cache=cache)
    assert not (cache / "zluda" / "store" / sha256(path)).exists()  # nothing half-unpacked is kept


def test_a_damaged_release_is_refused_by_scan_fix_with_exit_5(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from test_fix_support import WIN_HOST, demo_copy

    from cuda4amd.cli import main

    monkeypatch.setenv("CUDA4AMD_CACHE", str(tmp_path / "cache"))
    tool = demo_copy(tmp_path)
    before = snapshot(tool)
    res = CliRunner().invoke(main, ["scan", str(tool), "--host", str(WIN_HOST), "--fix", "--zluda",
                                    str(_bad_crc(tmp_path)), "--yes"])
    assert res.exit_code == 5 and "is damaged" in res.output and "Aborted" not in res.output, res.output
    assert snapshot(tool) == before
