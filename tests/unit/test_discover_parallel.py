"""A walk split over worker processes finds exactly what a one-process walk finds.

Every field of the Discovery (binaries, aliases, errors and their order,
files seen, skipped names and their order, inodes, archives) is compared
between ``jobs=1`` and walks over several workers: on a tree built here with
the awkward cases (hard links across subtrees, symlinks to files and to
folders elsewhere in the tree, a symlink loop, data-named executables, a
FIFO, names that are not UTF-8) and on this Python's own site-packages, a
real tree of thousands of files.
"""
from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

import pytest
from conftest import FIXTURES

from cuda4amd.scan import discover as discovery
from cuda4amd.scan.workers import forks

PE = FIXTURES / "pe" / "plain.dll"
ELF = FIXTURES / "elf" / "libplain.so"

pytestmark = pytest.mark.skipif(not forks(), reason="the split walk runs only where workers fork")


def state(found: discovery.Discovery) -> tuple:
    return (found.binaries, list(found.aliases.items()), found.errors, found.files_seen,
            list(found.skipped.items()), list(found.inodes.items()), found.archives)


def walk(path: Path, jobs: int, **kwargs) -> tuple:
    return state(discovery.discover(discovery.resolve_target(str(path)), jobs=jobs, **kwargs))


def build_tree(root: Path) -> None:
    """Enough folders and files in the first two levels for the walk to split (PARALLEL_WALK_ENTRIES)."""
    for p in range(12):
        package = root / f"pkg{p:02d}"
        for s in range(4):
            deep = package / f"sub{s}" / "deeper" / "deepest"
            deep.mkdir(parents=True)
            for f in range(4):
                (package / f"sub{s}" / f"mod{f}.py").write_text("x = 1\n")
            shutil.copy(ELF if p % 2 else PE, deep / ("libthing.so" if p % 2 else "thing.dll"))
        for f in range(20):
            (package / f"file{f}.txt").write_text("text\n")
    libs = root / "pkg00" / "sub0" / "deeper"
    # a hard link in another subtree: an alias of the name met first
    os.link(root / "pkg01" / "sub0" / "deeper" / "deepest" / "libthing.so", root / "pkg07" / "libhard.so")
    # a symlinked file, a soname link, and a data-named file with a link to it under a library name
    os.symlink(root / "pkg03" / "sub1" / "deeper" / "deepest" / "libthing.so", libs / "libthing.so.1")
    shutil.copy(ELF, root / "pkg05" / "payload.json")
    os.symlink(root / "pkg05" / "payload.json", root / "pkg02" / "libpayload.so")
    # an executable under a data name is sniffed; a non-executable one is not
    shutil.copy(ELF, root / "pkg04" / "tool.py")
    os.chmod(root / "pkg04" / "tool.py", 0o755)
    shutil.copy(ELF, root / "pkg04" / "quiet.py")
    # a FIFO, a dangling link, a name that is not UTF-8, a wheel-named file, our own folder
    os.mkfifo(root / "pkg06" / "pipe.so")
    os.symlink(root / "nowhere", root / "pkg06" / "dangling.so")
    shutil.copy(ELF, os.fsencode(root / "pkg08") + b"/lib\xff.so")
    (Path(os.fsdecode(os.fsencode(root / "pkg08") + b"/notes\xfe.txt"))).write_text("text\n")
    (root / "pkg09" / "old.whl").write_bytes(b"not a zip")
    (root / "pkg09" / ".cuda4amd").mkdir()
    shutil.copy(PE, root / "pkg09" / ".cuda4amd" / "nvcuda.dll")
    # a loop: a folder linked into itself
    os.symlink(root / "pkg10", root / "pkg10" / "sub0" / "loop")


def test_the_tree_splits_at_all(tmp_path):
    build_tree(tmp_path)
    assert len(discovery._walk_tree(str(tmp_path), "", None, None, 1)) == 1  # one process: one part
    # over workers: the first levels' folders here, each folder below them a part walked by a worker
    assert len(discovery._walk_tree(str(tmp_path), "", None, None, 3)) > 12


@pytest.mark.parametrize("jobs", [2, 3, 5])
def test_split_walk_matches_one_process(tmp_path, jobs):
    build_tree(tmp_path)
    serial = walk(tmp_path, 1)
    assert serial[0], "the tree holds binaries"
    assert serial[1], "and aliases"
    assert walk(tmp_path, jobs) == serial
    assert walk(tmp_path, jobs, follow_links=True) == walk(tmp_path, 1, follow_links=True)


@pytest.mark.parametrize(("link", "folder"), [
    ("pkg12", "pkg00"),  # listed after pkg00, so walked first: pkg00 itself is then skipped
    ("pkg11/sub0/deeper/other", "pkg03/sub2"),  # below the split, in another worker's part
    ("pkg01/sub3/deeper/back", "pkg09"),  # a folder listed after the split point
])
def test_a_folder_reached_twice_is_walked_in_one_process_order(tmp_path, link, folder):
    build_tree(tmp_path)
    os.symlink(tmp_path / folder, tmp_path / link)
    serial = walk(tmp_path, 1)
    assert any(b.path.startswith(link + "/") for b in serial[0]) != any(
        b.path.startswith(folder + "/") for b in serial[0])
    assert walk(tmp_path, 4) == serial


def test_a_real_site_packages_walks_the_same_split(tmp_path):
    site = Path(sysconfig.get_paths()["purelib"])
    one = walk(site, 1)
    assert one[3] > 1000, "a real tree of thousands of files"
    assert walk(site, 4) == one


def test_a_small_tree_is_walked_here(tmp_path, monkeypatch):
    shutil.copy(PE, tmp_path / "plain.dll")
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    shutil.copy(ELF, tmp_path / "a" / "b" / "c" / "libplain.so")

    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was started for a small tree")

    monkeypatch.setattr("concurrent.futures.ProcessPoolExecutor", no_pool)
    assert walk(tmp_path, 4) == walk(tmp_path, 1)


def test_a_scan_whose_walk_splits_reports_as_one_process(tmp_path, monkeypatch):
    # the walk split over workers (--jobs 3), then the read: the report a one-process scan gives
    import json

    from click.testing import CliRunner

    from cuda4amd.cli import main

    if not forks():  # decided now: an earlier test (the census's Dask client) may have left threads running
        pytest.skip("other threads run in this process: the walk would not fork its workers")
    build_tree(tmp_path / "tree")
    started = []
    real_walk_tree = discovery._walk_tree

    def spy(*args):
        parts = real_walk_tree(*args)
        started.append(len(parts))
        return parts

    monkeypatch.setattr(discovery, "_walk_tree", spy)

    def scan(jobs: str) -> dict:
        result = CliRunner().invoke(main, ["scan", str(tmp_path / "tree"), "--format", "json", "--host", "none",
                                           "--no-cache", "--jobs", jobs])
        document = json.loads(result.output)
        document.pop("command")
        return document

    serial = scan("1")
    assert serial["binaries"]
    assert scan("3") == serial
    assert started[0] == 1 and started[1] > 12  # the second scan's walk was split over the workers
