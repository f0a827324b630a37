"""The walk a forked child makes while the command line starts up is the walk the scan would make, or none.

Compared field by field with an in-process walk (test_discover_parallel.state) on the tree of awkward cases
(hard links, symlinks to files and folders, a loop, data-named executables, a FIFO, names that are not
UTF-8), on a machine of two cores as the tests make it (a walk in one process), and of eight (a walk
that the child splits over workers of its own); a walk of another target, a child that fails and a
walk never taken leave the scan to walk itself, and no child or walk worker behind.
"""
from __future__ import annotations

import json
import os
import threading
import time

try:
    import fcntl
except ImportError:  # Windows: no walk ahead (no fork), and no pipe sizes
    fcntl = None

import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from test_discover_parallel import build_tree, state

from cuda4amd.cli import main
from cuda4amd.scan import discover as discovery
from cuda4amd.scan import walk_ahead
from cuda4amd.scan.walk_ahead import WalkAhead
from cuda4amd.scan.workers import forks

pytestmark = pytest.mark.skipif(not forks(), reason="the walk goes ahead only where processes fork")


@pytest.fixture(autouse=True)
def two_cores(monkeypatch):
    """A machine of two usable cores, where the walk is one process's and goes ahead (whatever this one has)."""
    monkeypatch.setattr("cuda4amd.scan.workers.usable_cores", lambda: 2)
    monkeypatch.setattr(walk_ahead, "usable_cores", lambda: 2)


def record_takes(monkeypatch) -> list[tuple[bool, int]]:
    """WalkAhead.take spied on: (whether it gave a walk, the child's pid) for each call, in order."""
    taken: list[tuple[bool, int]] = []
    real_take = WalkAhead.take

    def take(self, *args):
        found = real_take(self, *args)
        taken.append((found is not None, self.pid))
        return found

    monkeypatch.setattr(WalkAhead, "take", take)
    return taken


def cli_scan(tree) -> dict:
    """`cuda4amd scan TREE --format json --host none --no-cache` in this process: its report, less the command line."""
    result = CliRunner().invoke(main, ["scan", str(tree), "--format", "json", "--host", "none", "--no-cache"])
    document = json.loads(result.output)
    document.pop("command")
    return document


def reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_the_walk_ahead_is_the_walk_the_scan_makes(tmp_path):
    build_tree(tmp_path / "tree")
    target = discovery.resolve_target(str(tmp_path / "tree"))
    ahead = WalkAhead.start(str(tmp_path / "tree"), follow_links=False, jobs=None)
    assert ahead is not None
    found = ahead.take(target, False, None)
    assert found is not None and found.binaries
    assert state(found) == state(discovery.discover(target, jobs=None))
    assert reaped(ahead.pid)


def test_a_walk_of_another_tree_or_with_other_options_is_not_taken(tmp_path):
    build_tree(tmp_path / "tree")
    other = discovery.resolve_target(str(FIXTURES / "demo" / "Tool"))
    ahead = WalkAhead.start(str(tmp_path / "tree"), follow_links=False, jobs=None)
    assert ahead is not None and ahead.take(other, False, None) is None and reaped(ahead.pid)
    same = discovery.resolve_target(str(tmp_path / "tree"))
    for follow_links, jobs in ((True, None), (False, 3)):
        ahead = WalkAhead.start(str(tmp_path / "tree"), follow_links=False, jobs=None)
        assert ahead is not None and ahead.take(same, follow_links, jobs) is None and reaped(ahead.pid)


def test_a_child_that_fails_leaves_the_walk_to_the_scan(tmp_path, monkeypatch):
    build_tree(tmp_path / "tree")

    def broken(*args, **kwargs):
        raise RuntimeError("the child's walk fails")

    monkeypatch.setattr(discovery, "discover", broken)  # the forked child inherits it
    ahead = WalkAhead.start(str(tmp_path / "tree"), follow_links=False, jobs=None)
    assert ahead is not None
    assert ahead.take(discovery.resolve_target(str(tmp_path / "tree")), False, None) is None
    assert reaped(ahead.pid)


def test_a_walk_never_taken_is_ended_and_reaped(tmp_path):
    build_tree(tmp_path / "tree")
    with WalkAhead.start(str(tmp_path / "tree"), follow_links=False, jobs=None) as ahead:
        pid = ahead.pid
    assert reaped(pid)
    ahead.close()  # twice is harmless
    assert ahead.take(discovery.resolve_target(str(tmp_path / "tree")), False, None) is None


def cores(monkeypatch, count: int) -> None:
    monkeypatch.setattr("cuda4amd.scan.workers.usable_cores", lambda: count)
    monkeypatch.setattr(walk_ahead, "usable_cores", lambda: count)


def test_no_walk_ahead_with_one_process(monkeypatch):
    """--jobs 1 is the one-process path, and one usable core would only be shared; two processes or
    more walk ahead, a walk split over workers too (the default on 4 cores or more, or --jobs N)."""
    tree = str(FIXTURES / "demo" / "Tool")
    assert WalkAhead.start(tree, follow_links=False, jobs=1) is None
    for jobs, count in ((None, 2), (2, 2), (None, 8), (3, 8)):
        cores(monkeypatch, count)
        with WalkAhead.start(tree, follow_links=False, jobs=jobs) as ahead:
            assert ahead is not None
    cores(monkeypatch, 1)
    assert WalkAhead.start(tree, follow_links=False, jobs=None) is None


#: where recording_walk_parts notes the process of each walk task (set by the tests that use it)
WALK_TASKS = "CUDA4AMD_TEST_WALK_TASKS"
real_walk_parts = discovery._walk_parts


def recording_walk_parts(*args, **kwargs):
    """discovery._walk_parts, noting which process runs each task (and waiting first, where asked):
    a module-level function, so a walk task that names it pickles."""
    with open(os.environ[WALK_TASKS], "a") as out:
        out.write(f"{os.getpid()}\n")
    time.sleep(float(os.environ.get("CUDA4AMD_TEST_WALK_WAIT", "0")))
    return real_walk_parts(*args, **kwargs)


@pytest.fixture
def split_walk(tmp_path, monkeypatch):
    """Eight cores, a walk split whatever the tree's size, its tasks recorded: the file that lists their pids."""
    cores(monkeypatch, 8)
    monkeypatch.setattr(discovery, "PARALLEL_WALK_ENTRIES", 0)  # the forked child inherits both
    monkeypatch.setattr(discovery, "_walk_parts", recording_walk_parts)
    tasks = tmp_path / "walk-tasks"
    monkeypatch.setenv(WALK_TASKS, str(tasks))
    return tasks


def test_a_split_walk_ahead_is_the_walk_the_scan_makes(tmp_path, split_walk):
    build_tree(tmp_path / "tree")
    target = discovery.resolve_target(str(tmp_path / "tree"))
    ahead = WalkAhead.start(str(tmp_path / "tree"), follow_links=False, jobs=None)
    assert ahead is not None
    found = ahead.take(target, False, None)
    assert found is not None and found.binaries and reaped(ahead.pid)
    walkers = set(split_walk.read_text().split())
    assert walkers and str(ahead.pid) not in walkers and str(os.getpid()) not in walkers  # the child's workers
    split_walk.unlink()
    assert state(found) == state(discovery.discover(target, jobs=None))


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="processes are looked up in /proc")
def test_a_child_killed_mid_walk_leaves_no_walker_behind(tmp_path, split_walk, monkeypatch):
    """take() of a child that died mid-walk (killed, say) gets no walk, and ends the walkers it left."""
    import signal

    build_tree(tmp_path / "tree")
    monkeypatch.setenv("CUDA4AMD_TEST_WALK_WAIT", "30")
    ahead = WalkAhead.start(str(tmp_path / "tree"), follow_links=False, jobs=None)
    assert ahead is not None
    walkers = started_walkers(split_walk)
    os.kill(ahead.pid, signal.SIGKILL)
    taken: list = []
    reader = threading.Thread(target=lambda: taken.append(ahead.take(discovery.resolve_target(
        str(tmp_path / "tree")), False, None)))
    reader.start()
    reader.join(20)
    waited = reader.is_alive()
    if waited:  # the walkers hold the pipe open, and take() waits for them: end them, so that the test ends
        os.killpg(ahead.pid, signal.SIGKILL)
        reader.join()
    assert not waited and taken == [None]
    assert reaped(ahead.pid)
    assert gone(walkers)


def test_a_scan_from_the_command_line_with_a_split_walk_ahead_reports_as_without_it(tmp_path, split_walk,
                                                                                   monkeypatch):
    build_tree(tmp_path / "tree")
    taken = record_takes(monkeypatch)
    ahead = cli_scan(tmp_path / "tree")
    assert [ok for ok, _ in taken] == [True]
    walkers = set(split_walk.read_text().split())
    assert walkers and str(taken[0][1]) not in walkers and str(os.getpid()) not in walkers  # the child's workers
    monkeypatch.setattr(WalkAhead, "start", classmethod(lambda cls, *args, **kwargs: None))
    assert cli_scan(tmp_path / "tree") == ahead


def live(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not reaped by whoever adopted it, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="processes are looked up in /proc")
def test_a_split_walk_never_taken_leaves_no_worker_behind(tmp_path, split_walk, monkeypatch):
    """close() kills the child's process group: its walk workers, which would otherwise wait for work from
    a child that is gone, with it."""
    build_tree(tmp_path / "tree")
    monkeypatch.setenv("CUDA4AMD_TEST_WALK_WAIT", "30")
    ahead = WalkAhead.start(str(tmp_path / "tree"), follow_links=False, jobs=None)
    assert ahead is not None
    walkers = started_walkers(split_walk)
    ahead.close()
    assert reaped(ahead.pid)
    assert gone(walkers)


def started_walkers(tasks) -> set[int]:
    """The walkers that have begun a task (waiting until one has), each running."""
    deadline = time.monotonic() + 30
    while not (tasks.exists() and tasks.read_text().split()) and time.monotonic() < deadline:
        time.sleep(0.01)
    walkers = {int(pid) for pid in tasks.read_text().split()}
    assert walkers and all(live(pid) for pid in walkers)
    return walkers


def gone(walkers: set[int]) -> bool:
    """Whether every one of ``walkers`` has ended (within 10 s)."""
    deadline = time.monotonic() + 10
    while any(live(pid) for pid in walkers) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not any(live(pid) for pid in walkers)


def test_no_walk_ahead_for_a_single_file_a_wheel_a_missing_target_or_without_fork(tmp_path, monkeypatch):
    assert WalkAhead.start(str(FIXTURES / "pe" / "plain.dll"), follow_links=False, jobs=None) is None
    assert WalkAhead.start(str(tmp_path / "missing"), follow_links=False, jobs=None) is None
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    wheel.write_bytes(b"not a zip")
    assert WalkAhead.start(str(wheel), follow_links=False, jobs=None) is None
    monkeypatch.setattr(walk_ahead, "forks", lambda: False)
    assert WalkAhead.start(str(FIXTURES / "demo" / "Tool"), follow_links=False, jobs=None) is None


def test_a_scan_from_the_command_line_takes_the_walk_ahead_and_reports_as_without_it(tmp_path, monkeypatch):
    build_tree(tmp_path / "tree")
    taken = record_takes(monkeypatch)
    ahead = cli_scan(tmp_path / "tree")
    monkeypatch.setattr(WalkAhead, "start", classmethod(lambda cls, *args, **kwargs: None))
    assert cli_scan(tmp_path / "tree") == ahead
    assert [ok for ok, _ in taken] == [True]


def test_while_the_child_walks_the_scan_makes_what_needs_no_walk(tmp_path, monkeypatch):
    """walking() is a poll of the child's pipe; a scan that finds the child still walking finds the
    distributions, parses the release tables and probes the host first, each while the child still walks
    (a re-scan reads no file: these would otherwise come after the walk), and reports as without the walk
    ahead."""

    from cuda4amd.scan import pipeline

    build_tree(tmp_path / "tree")
    walk = discovery.discover

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return walk(*args, **kwargs)

    monkeypatch.setattr(discovery, "discover", slow)  # the forked child inherits it
    ahead = WalkAhead.start(str(tmp_path / "tree"), follow_links=False, jobs=None)
    assert ahead is not None and ahead.walking()
    monkeypatch.setattr(discovery, "discover", walk)
    order: list[str] = []
    find, take = pipeline.find_distributions, WalkAhead.take
    monkeypatch.setattr(pipeline, "find_distributions", lambda *a, **k: (order.append("distributions"), find(*a, **k))[1])
    monkeypatch.setattr(WalkAhead, "take", lambda self, *a: (order.append("take"), take(self, *a))[1])
    options = pipeline.ScanOptions(target=str(tmp_path / "tree"), host="none", cache=False)
    with ahead:
        result = pipeline.run_scan(options, walk_ahead=ahead)
    assert order == ["distributions", "take"] and not ahead.walking() and reaped(ahead.pid)
    order.clear()
    alone = pipeline.run_scan(options)
    assert order == ["distributions"]
    assert (result.verdicts, result.binaries, result.edges, result.errors) == (alone.verdicts, alone.binaries,
                                                                              alone.edges, alone.errors)

    done = WalkAhead.start(str(tmp_path / "tree"), follow_links=False, jobs=None)
    assert done is not None
    deadline = time.monotonic() + 30
    while done.walking() and time.monotonic() < deadline:  # a small tree's walk ends: then it is taken at once
        time.sleep(0.01)
    assert not done.walking()
    order.clear()
    with done:
        again = pipeline.run_scan(options, walk_ahead=done)
    assert order == ["take", "distributions"]  # nothing is begun once the walk is there to take
    assert (again.verdicts, again.binaries, again.edges, again.errors) == (alone.verdicts, alone.binaries,
                                                                          alone.edges, alone.errors)


@pytest.mark.skipif(not hasattr(fcntl, "F_GETPIPE_SZ"), reason="Linux's pipe sizes")
def test_the_pipe_is_widened_for_the_walk_up_to_a_limit():
    read_end, write_end = os.pipe()
    try:
        walk_ahead._widen(write_end, 300_000)
        assert fcntl.fcntl(read_end, fcntl.F_GETPIPE_SZ) >= 300_000
        walk_ahead._widen(write_end, 1 << 30)
        assert fcntl.fcntl(read_end, fcntl.F_GETPIPE_SZ) == walk_ahead.PIPE_BYTES
    finally:
        os.close(read_end)
        os.close(write_end)
