"""Issue 11, items 1-3: a fix writes and deletes only inside its target, trusts only journals it wrote,
and one fix/undo/run at a time holds a target."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from test_fix_support import WIN_HOST, WIN_ZIP, demo_copy, fix_cache, snapshot  # noqa: F401 - fix_cache is a fixture

from cuda4amd.cli import main
from cuda4amd.fix.fileops import FileOps, OutsideError
from cuda4amd.fix.journal import JOURNAL_SCHEMA, FixDirError, load_journal
from cuda4amd.fix.lock import LockError, lock_path, target_lock
from cuda4amd.fix.state import journal_mac
from cuda4amd.fix.undo import undo_target
from cuda4amd.userdirs import state_dir


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def fix_cli(tool, *more):
    return invoke("scan", tool, "--host", WIN_HOST, "--fix", "--zluda", WIN_ZIP, "--yes", *more)


def planted_journal(root, victim, *, state="applied", mac=None, root_text=None):
    """A journal as a hostile download would ship it: it 'added' a file outside the folder."""
    victim_rel = victim if isinstance(victim, str) else str(victim)
    data = {
        "schema": JOURNAL_SCHEMA, "generated_by": "cuda4amd 0.1", "state": state, "created": "x", "updated": "x",
        "root": root_text if root_text is not None else str(root.resolve()), "created_root": True,
        "store": None, "verification": None,
        "plan": {"target": str(root), "platform": "linux", "mode": "launcher", "release": {"kind": "folder"},
                 "environment": [{"name": "LD_PRELOAD", "op": "set", "values": [[["lit", "/tmp/evil.so"]]]}],
                 "actions": [], "launcher_dir": ".cuda4amd"},
        "actions": [{"kind": "write", "path": victim_rel, "source": None, "sha256": "0" * 64, "link": None,
                     "content": "#!/bin/sh\necho pwned\n", "executable": True, "why": "x", "replaces": False,
                     "status": "done" if state == "applied" else "pending",
                     "before": {"kind": "absent"}, "backup": None, "temp": None}],
    }
    if mac == "ours":
        data["mac"] = journal_mac(data)
    elif mac is not None:
        data["mac"] = mac
    (root / ".cuda4amd").mkdir(exist_ok=True)
    (root / ".cuda4amd" / "journal.json").write_text(json.dumps(data))
    return data


# -- 1. journals the tool did not write ------------------------------------------------------------

@pytest.mark.parametrize("mac", [None, "hmac-sha256:" + "0" * 64])
def test_undo_refuses_a_shipped_journal_and_deletes_nothing_outside(tmp_path, mac):
    app = tmp_path / "app"
    app.mkdir()
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    planted_journal(app, victim, mac=mac)
    with pytest.raises(FixDirError, match="not written by cuda4amd for this user"):
        undo_target(app)
    res = invoke("undo", app)
    assert res.exit_code == 2 and "neither resumed nor undone" in res.output
    assert victim.read_text() == "keep me"
    assert (app / ".cuda4amd" / "journal.json").is_file()  # refused: not even the journal is removed


def test_scan_fix_does_not_complete_a_shipped_interrupted_fix(tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    outside = tmp_path / "evil.sh"
    planted_journal(tool, outside, state="applying")
    before = snapshot(tmp_path, skip=(fix_cache,))
    res = fix_cli(tool)
    assert res.exit_code == 5 and "not written by cuda4amd" in res.output, res.output
    assert not outside.exists()
    assert snapshot(tmp_path, skip=(fix_cache,)) == before


def test_run_does_not_apply_a_journal_found_in_a_parent(tmp_path):
    parent = tmp_path / "downloads"
    (parent / "app").mkdir(parents=True)
    program = parent / "app" / "tool"
    program.write_text("#!/bin/sh\n")
    planted_journal(parent, tmp_path / "x")
    res = invoke("run", "--print-env", program)
    assert res.exit_code == 2 and "not written by cuda4amd" in res.output
    assert "LD_PRELOAD" not in res.output


def test_a_journal_with_our_mac_is_still_confined_to_the_target(tmp_path):
    """Even a journal that verifies (a bug, a stolen key) cannot name a path outside."""
    app = tmp_path / "app"
    app.mkdir()
    for bad in (str(tmp_path / "precious.txt"), "../precious.txt", "sub/../../precious.txt"):
        planted_journal(app, bad, mac="ours")
        with pytest.raises(FixDirError, match=r"outside the target|leaves the target"):
            load_journal(app)


def test_a_journal_copied_to_another_folder_is_refused(tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    assert fix_cli(tool).exit_code == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / ".cuda4amd").mkdir()
    (other / ".cuda4amd" / "journal.json").write_bytes((tool / ".cuda4amd" / "journal.json").read_bytes())
    with pytest.raises(FixDirError, match="belongs to a fix of"):
        load_journal(other)
    assert invoke("undo", tool).exit_code == 0


def test_an_edited_journal_is_refused(tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    assert fix_cli(tool).exit_code == 0
    path = tool / ".cuda4amd" / "journal.json"
    data = json.loads(path.read_text())
    data["actions"][-1]["path"] = ".cuda4amd/other-name.cmd"  # one changed path, the old MAC
    path.write_text(json.dumps(data))
    assert "MAC does not verify" in invoke("undo", tool).output


def test_a_fifo_journal_does_not_hang(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    (tmp_path / ".cuda4amd").mkdir()
    os.mkfifo(tmp_path / ".cuda4amd" / "journal.json")
    with pytest.raises(FixDirError, match="not a regular file"):
        load_journal(tmp_path)


# -- 2. links that would redirect writes -----------------------------------------------------------

def test_a_linked_fix_folder_is_refused(tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tool / ".cuda4amd").symlink_to(elsewhere, target_is_directory=True)
    res = fix_cli(tool)
    assert res.exit_code == 5 and "is a link" in res.output, res.output
    assert list(elsewhere.iterdir()) == []
    assert invoke("undo", tool).exit_code == 2 and list(elsewhere.iterdir()) == []


def test_fileops_refuse_a_write_through_a_linked_folder(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "bin").symlink_to(outside, target_is_directory=True)
    ops = FileOps()
    ops.confine([root])
    for act in (lambda: ops.write(root / "bin" / "nvcuda.dll", b"x"), lambda: ops.mkdir(root / "bin" / "d"),
                lambda: ops.symlink("x", root / "bin" / "l"), lambda: ops.copy(WIN_ZIP, root / "bin" / "c")):
        with pytest.raises(OutsideError, match="outside the target"):
            act()
    assert list(outside.iterdir()) == []
    ops.write(root / "ok", b"x")  # inside: fine
    (root / "final").symlink_to(outside / "target")
    with pytest.raises(FileExistsError):  # a final link is never followed
        ops.write(root / "final", b"x")
    assert not (outside / "target").exists()
    ops.symlink(str(outside / "t2"), root / "tmp-link")
    with pytest.raises(OutsideError, match="became a link"):
        ops.chmod(root / "tmp-link", 0o755)


# -- 3. one at a time ------------------------------------------------------------------------------

HOLD = """
import sys, time
from cuda4amd.fix.lock import target_lock
with target_lock(sys.argv[1], "scan --fix (test)"):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def held(tmp_path):
    def hold(root):
        proc = subprocess.Popen([sys.executable, "-c", HOLD, str(root)], stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ))
        assert proc.stdout.readline().strip() == "held"
        procs.append(proc)
        return proc
    procs: list[subprocess.Popen] = []
    yield hold
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_second_fix_or_undo_is_refused_and_names_the_holder(tmp_path, fix_cache, held):
    tool = demo_copy(tmp_path)
    before = snapshot(tool)
    proc = held(tool)
    res = fix_cli(tool)
    assert res.exit_code == 5 and f"pid {proc.pid}" in res.output and "scan --fix (test)" in res.output
    assert snapshot(tool) == before
    res = invoke("undo", tool)
    assert res.exit_code == 5 and f"pid {proc.pid}" in res.output
    with pytest.raises(LockError, match=f"pid {proc.pid}"), target_lock(tool, "run"):
        pass
    proc.kill()
    proc.wait()
    with target_lock(tool, "run"):  # a killed holder leaves no stale lock
        pass
    assert lock_path(tool).parent.parent == state_dir()
    assert not (tool / ".cuda4amd").exists()  # the lock writes nothing into the target


def test_two_fixes_at_once_leave_one_fix_that_undoes(tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    before = snapshot(tool)
    cmd = [sys.executable, "-c", "from cuda4amd.cli import main; main()", "scan", str(tool), "--host", str(WIN_HOST), "--fix", "--mode",
           "place", "--zluda", str(WIN_ZIP), "--yes"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ))
             for _ in range(3)]
    codes = [p.wait(timeout=120) for p in procs]
    assert all(c in (0, 5) for c in codes) and 0 in codes, [p.stdout.read() for p in procs]  # type: ignore[union-attr]
    assert invoke("undo", tool).exit_code == 0
    assert snapshot(tool) == before


def test_place_mode_through_a_linked_folder_writes_nothing_outside(rules, tmp_path, fix_cache):
    from cuda4amd.fix.apply import fix_target
    from cuda4amd.host import load_host_report
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    tool = demo_copy(tmp_path)
    outside = tmp_path / "outside"
    tool.rename(outside)
    tool.mkdir()
    (tool / "bin").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    result = run_scan(ScanOptions(target=str(tool), host="none", follow_links=True), rules=rules)
    assert any(v.binary.path.startswith("bin/") and v.verdict != "no-cuda" for v in result.verdicts)
    out: list[str] = []
    outcome = fix_target(result, host=load_host_report(WIN_HOST), zluda_path=WIN_ZIP, assume_yes=True,
                         echo=out.append, rules=rules, cache=fix_cache, mode="place")
    assert outcome.status == "refused" and outcome.exit_code == 5, out  # nothing written: a refusal
    assert "outside the target" in "".join(out), out
    assert snapshot(outside) == before  # no NVIDIA DLL replaced, no nvcuda.dll added out there
    assert not (tool / ".cuda4amd").exists()


def test_the_key_is_private_and_a_journal_without_it_is_refused(tmp_path, fix_cache, monkeypatch):
    tool = demo_copy(tmp_path)
    assert fix_cli(tool).exit_code == 0
    key = state_dir() / "journal-key"
    assert key.stat().st_size == 32 and (os.name == "nt" or (key.stat().st_mode & 0o077) == 0)
    assert json.loads((tool / ".cuda4amd" / "journal.json").read_text())["mac"].startswith("hmac-sha256:")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "another-user"))
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "another-user"))
    res = invoke("undo", tool)
    assert res.exit_code == 2 and "MAC does not verify" in res.output  # another user's key: not this user's fix
    monkeypatch.undo()
    monkeypatch.setenv("CUDA4AMD_CACHE", str(fix_cache))
    assert invoke("undo", tool).exit_code == 0
