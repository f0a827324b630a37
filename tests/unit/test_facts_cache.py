"""The facts cache trusts only what is the user's alone (issue 31, items 2 and 3).

The folder and each entry must be private, ssh's rule: a folder of someone else's, writable by others or a link is
refused with one line; an entry that is a FIFO, a link (to /dev/zero), too big, garbage, or someone else's or
writable by others is ignored and the file read again. The hostile scans run in a process of their own, bounded in
time and address space: the sqlite cache before this one waited forever on a FIFO and read /dev/zero until the
OOM killer came.
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import time

import pytest
from conftest import FIXTURES
from test_hostile_scan import finishes

from cuda4amd import userdirs
from cuda4amd.scan.read import cache as facts
from cuda4amd.userdirs import SEAL_BYTES

resource = pytest.importorskip("resource", reason="the hostile scans are bounded with POSIX resource limits")

TREE = FIXTURES / "demo" / "Tool"
#: someone else: the "nobody" user of most systems
OTHER_UID = 65534
#: what a hostile scan may take: a scan of TREE takes a second and well under this
SECONDS = 60
ADDRESS_SPACE = 4 << 30

needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="giving a file to another user takes root")
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")


def limited() -> None:  # in the child, before the scan starts
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def scan(cache_dir, *options: str) -> tuple[str, str, float]:
    """(report without its command line, stderr, seconds) of a scan of TREE in a bounded process of its own."""
    env = {**os.environ, userdirs.FACTS_VARIABLE: str(cache_dir)}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cuda4amd", "scan", str(TREE), "--format", "json", "--host", "none",
                           "--jobs", "1", *options], capture_output=True, text=True, env=env, timeout=SECONDS,
                          preexec_fn=limited)
    took = time.monotonic() - start
    assert done.returncode in (0, 3, 4, 9), done.stderr
    document = json.loads(done.stdout)
    document.pop("command")
    return json.dumps(document, indent=2), done.stderr, took


@pytest.fixture(scope="module")
def expected(tmp_path_factory) -> str:
    report, errors, _ = scan(tmp_path_factory.mktemp("unused"), "--no-cache")
    assert errors == ""
    return report


def entries(cache_dir) -> list:
    return sorted(cache_dir.glob("*" + facts.SUFFIX))


def warm(cache_dir, expected: str) -> list:
    """``cache_dir`` filled by a scan of TREE: its files (entries, and whatever else the cache keeps)."""
    report, errors, _ = scan(cache_dir)
    assert (report, errors) == (expected, "")
    files = sorted(p for p in cache_dir.iterdir() if p.is_file())
    assert files
    return files


def forged(entry) -> bytes:
    """A well-formed entry for ``entry``'s key whose facts say the binary imports nothing (another verdict)."""
    import dataclasses
    import hashlib

    data = entry.read_bytes()
    record = pickle.loads(data[SEAL_BYTES:])  # the test's own cache
    info = dataclasses.replace(record[2], imports=())
    body = pickle.dumps((*record[:2], info, *record[3:]), protocol=5)
    return hashlib.sha256(body).digest() + body


# -- the folder -----------------------------------------------------------------------------------------------------


def test_a_missing_folder_is_made_private(tmp_path):
    folder = tmp_path / "a" / "b" / "facts"
    old = os.umask(0)
    try:
        assert userdirs.private_folder(folder) == folder
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert userdirs.private_folder(folder) == folder  # as found the next time


@pytest.mark.parametrize("how", ["group-writable", "others-writable", "someone-elses", "link"])
def test_a_folder_that_is_not_private_is_refused_with_one_line(how, tmp_path, expected, capsys):
    """Fails on the sqlite cache: it used any folder as found, and wrote its database into it."""
    folder = tmp_path / "facts"
    folder.mkdir(mode=0o700)
    used = folder
    if how == "group-writable":
        folder.chmod(0o770)
    elif how == "others-writable":
        folder.chmod(0o703)
    elif how == "someone-elses":
        if os.geteuid() != 0:
            pytest.skip("giving a folder to another user takes root")
        os.chown(folder, OTHER_UID, OTHER_UID)
    else:
        used = tmp_path / "link"
        used.symlink_to(folder, target_is_directory=True)
    assert userdirs.private_folder(used) is None
    line = capsys.readouterr().err
    assert line.count("\n") == 1 and line.startswith(f"cuda4amd: not using {used}: ")
    report, errors, _ = scan(used)
    assert report == expected
    assert errors.count("\n") == 1 and f"not using {used}: " in errors
    # no facts written into it (rules/parsed.py, on its way out, still keeps its rules-N folder there)
    assert [p for p in folder.iterdir() if not p.name.startswith("rules-")] == []


def test_a_folder_that_cannot_be_made_turns_the_cache_off_quietly(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert userdirs.private_folder(tmp_path / "file" / "facts") is None
    assert userdirs.private_folder(tmp_path / "file") is None
    assert capsys.readouterr().err.count("\n") <= 1  # "not a folder": said once, when the path names a file


# -- the entries ----------------------------------------------------------------------------------------------------


def fifo(path) -> None:
    path.unlink()
    os.mkfifo(path)


def zero_link(path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def oversized(path) -> None:
    with open(path, "r+b") as f:  # a sparse file: no disk used
        f.truncate(8 << 30)


def garbage(path) -> None:
    path.write_bytes(os.urandom(max(64, path.stat().st_size)))


def group_writable(path) -> None:
    if path.name.endswith(facts.SUFFIX):
        path.write_bytes(forged(path))
    path.chmod(0o660)


def someone_elses(path) -> None:
    if path.name.endswith(facts.SUFFIX):
        path.write_bytes(forged(path))
    os.chown(path, OTHER_UID, OTHER_UID)


HOSTILE = {
    # fails on the sqlite cache: a FIFO as facts.key blocked the scan forever (here: the time limit)
    "fifo": pytest.param(fifo, marks=needs_fifo),
    # fails on the sqlite cache: facts.key -> /dev/zero was read until memory ran out (here: a MemoryError)
    "link-to-dev-zero": zero_link,
    # fails on the sqlite cache: an 8 GiB facts.key was read whole (here: a MemoryError)
    "oversized": oversized,
    # passes on the sqlite cache too (a garbage database turned it off): kept as the baseline of damage
    "garbage": garbage,
    # fail on the sqlite cache: it used files others could write (and left them so)
    "group-writable": group_writable,
    "someone-elses": pytest.param(someone_elses, marks=needs_root),
}


@pytest.mark.parametrize("damage", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_entries_are_ignored_and_the_scan_is_right_and_fast(damage, tmp_path, expected):
    cache_dir = tmp_path / "facts"
    files = warm(cache_dir, expected)
    for path in files:
        damage(path)
    report, errors, took = scan(cache_dir)
    assert (report, errors) == (expected, "")
    assert took < SECONDS / 2
    # each entry was read again and written anew, the user's alone; nothing is left that others could write
    for path in cache_dir.iterdir():
        info = path.lstat()
        if stat.S_ISDIR(info.st_mode) and path.name.startswith("rules-"):
            continue  # rules/parsed.py's, on its way out
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.geteuid()
    assert len(entries(cache_dir)) == len([p for p in files if p.name.endswith(facts.SUFFIX)])
    report, errors, _ = scan(cache_dir)
    assert (report, errors) == (expected, "")


def test_read_private_takes_only_a_private_regular_file_within_the_limit(tmp_path):
    path = tmp_path / "entry"
    userdirs.write_private(path, b"facts")
    assert userdirs.read_private(path, 5) == b"facts"
    assert userdirs.read_private(path, 4) is None  # too big
    assert userdirs.read_private(tmp_path / "missing", 5) is None
    assert userdirs.read_private(tmp_path, 5) is None  # a folder
    link = tmp_path / "link"
    link.symlink_to(path)
    assert userdirs.read_private(link, 5) is None  # a link, even to a private file
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    assert userdirs.read_private(zero, 1 << 20) is None
    path.chmod(0o620)
    assert userdirs.read_private(path, 5) is None
    path.chmod(0o602)
    assert userdirs.read_private(path, 5) is None
    path.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(path, OTHER_UID, OTHER_UID)
        assert userdirs.read_private(path, 5) is None


def test_on_windows_the_owner_and_mode_checks_are_skipped_and_links_still_refused(tmp_path, monkeypatch):
    """Windows keeps who may write in ACLs, which st_uid and st_mode do not show (modelled here on POSIX)."""
    path = tmp_path / "entry"
    userdirs.write_private(path, b"facts")
    path.chmod(0o666)
    (tmp_path / "link").symlink_to(path)
    tmp_path.chmod(0o777)
    monkeypatch.setattr(os, "name", "nt")
    assert userdirs.read_private(path, 5) == b"facts"
    assert userdirs.read_private(tmp_path / "link", 5) is None
    assert userdirs.private_folder(tmp_path) == tmp_path
    monkeypatch.undo()
    tmp_path.chmod(0o700)


@needs_fifo
def test_read_private_never_waits_on_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    assert finishes(lambda: userdirs.read_private(tmp_path / "fifo", 1 << 20), seconds=5) is None


def test_write_private_writes_whole_files_0600_and_leaves_no_temporary(tmp_path):
    old = os.umask(0)
    try:
        userdirs.write_private(tmp_path / "entry", b"one")
        userdirs.write_private(tmp_path / "entry", b"two")
    finally:
        os.umask(old)
    assert (tmp_path / "entry").read_bytes() == b"two"
    assert stat.S_IMODE((tmp_path / "entry").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]
    with pytest.raises(OSError):
        userdirs.write_private(tmp_path / "missing" / "entry", b"x")
    (tmp_path / "folder").mkdir()
    with pytest.raises(OSError):
        userdirs.write_private(tmp_path / "folder", b"x")  # renamed over a folder: refused
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry", "folder"]


# -- what the cache answers -----------------------------------------------------------------------------------------


def hits(target, cache_dir, rules) -> int:
    from cuda4amd.scan import discover as discovery
    from cuda4amd.scan.read.parallel import read_binaries
    from cuda4amd.scan.read.payload import PayloadInspector

    inspector = PayloadInspector(rules, rules.release(rules.default_release))
    found = discovery.discover(discovery.resolve_target(str(target))).binaries
    cache = facts.FactCache.open("fast", inspector, cache_dir)
    assert cache is not None
    try:
        read_binaries(None, found, "fast", inspector=inspector, jobs=1, cache=cache)
    finally:
        cache.close()
    return cache.hits


def test_a_changed_size_or_mtime_is_a_miss(tmp_path, rules):
    target = tmp_path / "tree"
    target.mkdir()
    shutil.copy(FIXTURES / "pe" / "plain.dll", target / "a.dll")
    shutil.copy(FIXTURES / "pe" / "plain.dll", target / "b.dll")
    cache_dir = tmp_path / "facts"
    assert hits(target, cache_dir, rules) == 0
    assert hits(target, cache_dir, rules) == 2
    info = (target / "a.dll").stat()
    os.utime(target / "a.dll", ns=(info.st_atime_ns, info.st_mtime_ns + 1))  # same bytes, another mtime
    assert hits(target, cache_dir, rules) == 1
    with open(target / "b.dll", "ab") as f:
        f.write(b"\0")  # another size
    assert hits(target, cache_dir, rules) == 1
    assert hits(target, cache_dir, rules) == 2


def test_stale_entries_and_the_old_database_go_when_the_cache_is_written(tmp_path, rules):
    target = tmp_path / "tree"
    target.mkdir()
    shutil.copy(FIXTURES / "pe" / "plain.dll", target / "a.dll")
    cache_dir = tmp_path / "facts"
    cache_dir.mkdir(mode=0o700)
    stale = cache_dir / ("0" * 64 + facts.SUFFIX)
    left = cache_dir / ".killed-write.tmp"
    for path in (stale, left):
        userdirs.write_private(path, b"old")
        os.utime(path, (1, 1))
    for name in facts.LEGACY:
        (cache_dir / name).write_bytes(b"sqlite")
    (cache_dir / "kept.txt").write_bytes(b"not ours")
    assert hits(target, cache_dir, rules) == 0
    names = sorted(p.name for p in cache_dir.iterdir())
    assert len(names) == 2 and "kept.txt" in names and names[0].endswith(facts.SUFFIX)


def test_an_edited_ptx_rule_file_is_another_key(tmp_path, rules):
    # each release's PTX check is a fact of the file: facts checked with other PTX rules are not reused
    import dataclasses
    import shutil

    from cuda4amd.scan.read.payload import PayloadInspector

    kernels = tmp_path / "kernels"
    shutil.copytree(rules.kernel_dirs[0], kernels)
    own = dataclasses.replace(rules, kernel_dirs=(kernels,))

    def context() -> str:
        return facts.scan_context("fast", PayloadInspector(own, own.release(own.default_release)))

    before = context()
    assert context() == before
    edited = kernels / "ptx-v6.toml"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert context() != before
