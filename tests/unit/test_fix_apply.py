"""Apply, verify and undo: byte for byte, idempotent, and safe under a fault at every step."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from test_fix_support import (  # noqa: F401 - fix_cache is a fixture
    LINUX_HOST,
    LINUX_TGZ,
    WIN_HOST,
    WIN_ZIP,
    CountingOps,
    Crash,
    Fault,
    FaultyOps,
    NoSyncOps,
    ReleaseServer,
    changed,
    demo_copy,
    fix_cache,
    linux_app,
    sha256,
    snapshot,
)

from cuda4amd.fix.apply import fix_target
from cuda4amd.fix.fileops import FileOps
from cuda4amd.fix.journal import load_journal
from cuda4amd.fix.undo import undo_target
from cuda4amd.host import load_host_report
from cuda4amd.rules.releases import Pin
from cuda4amd.scan.pipeline import ScanOptions, run_scan

HOWS = ("exception", "crash", "disk-full", "read-only", "locked")


def scan(rules, target):
    return run_scan(ScanOptions(target=str(target), host="none"), rules=rules)


def fix(rules, target, fix_cache, *, host=WIN_HOST, zluda=WIN_ZIP, result=None, out=None, **kw):
    result = result or scan(rules, target)
    return fix_target(result, host=load_host_report(host), zluda_path=zluda, assume_yes=True,
                      echo=(out if out is not None else []).append, rules=rules, cache=fix_cache, **kw)


# ---------------------------------------------------------------------------
# the happy paths
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["launcher", "place"])
def test_apply_verify_undo_demo(rules, tmp_path, fix_cache, mode):
    tool = demo_copy(tmp_path)
    base = snapshot(tmp_path, skip=(fix_cache,))
    out = []
    outcome = fix(rules, tool, fix_cache, mode=mode, out=out)
    assert outcome.status == "applied" and outcome.exit_code == 0, "".join(out)
    assert outcome.verification.ok
    deps = [c for c in outcome.verification.checks if c["what"] == "dependency"]
    assert {(c["binary"], c["name"]) for c in deps} == {("render.dll", "cublas64_12.dll"), ("tool.exe", "nvcuda.dll")}
    assert all(c["ok"] and c["sha256"] == c["expected"] for c in deps)
    now = snapshot(tmp_path, skip=(fix_cache,))
    touched = changed(base, now)
    if mode == "launcher":  # the application's own files are untouched
        assert all(p.startswith("apps/Tool/.cuda4amd") for p in touched)
    else:
        assert set(touched) == {"apps/Tool/.cuda4amd", "apps/Tool/.cuda4amd/journal.json",
                                "apps/Tool/.cuda4amd/after-report.json", "apps/Tool/cublas64_12.dll",
                                "apps/Tool/nvcuda.dll", "apps/Tool/nvcudart_hybrid64.dll"}
    report = json.loads((tool / ".cuda4amd" / "after-report.json").read_text())
    assert report["schema"] == "cuda4amd.fix-report/1" and report["verification"]["ok"]
    assert report["scan"]["schema"].startswith("cuda4amd") and report["release"]["sha256"] == sha256(WIN_ZIP)
    journal = load_journal(tool)
    assert journal.state == "verified"
    assert all(a["status"] == "done" for a in journal.actions)
    for a in journal.actions:
        if a["kind"] == "copy":
            assert a["before"] == {"kind": "absent"} and a["sha256"] == sha256(journal.abs(a["path"]))
    undone = undo_target(tool)
    assert undone.complete and undone.found
    assert snapshot(tmp_path, skip=(fix_cache,)) == base


def test_rerun_is_idempotent(rules, tmp_path, fix_cache, monkeypatch):
    # every journal stamp differs, as when a second passes between the runs
    import itertools

    import cuda4amd.fix.journal as journal_module

    ticks = itertools.count()
    monkeypatch.setattr(journal_module.time, "strftime", lambda fmt, t=None: f"tick-{next(ticks)}")
    tool = demo_copy(tmp_path)
    assert fix(rules, tool, fix_cache).status == "applied"
    after = snapshot(tool)
    out = []
    again = fix(rules, tool, fix_cache, out=out)
    assert again.status == "already-applied" and again.exit_code == 0, "".join(out)
    assert "already fixed as planned" in "".join(out)
    assert snapshot(tool) == after
    other = fix(rules, tool, fix_cache, mode="place")
    assert other.status == "refused" and "undo" in other.message
    assert snapshot(tool) == after


def test_replaced_nvidia_files_are_backed_up_and_restored(rules, tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    nvidia = b"MZ" + b"NVIDIA Corporation cublas64_12 stand-in" * 100
    (tool / "plugins" / "cublas64_12.dll").write_bytes(nvidia)  # found by render.dll's search: elsewhere in tree
    (tool / "cublas64_12.dll").write_bytes((tool / "render.dll").read_bytes())
    os.utime(tool / "cublas64_12.dll", (1_000_000, 1_000_000))
    base = snapshot(tmp_path, skip=(fix_cache,))
    outcome = fix(rules, tool, fix_cache, mode="place")
    assert outcome.status == "applied", outcome.message
    journal = load_journal(tool)
    replaced = next(a for a in journal.actions if a["path"] == "cublas64_12.dll")
    assert replaced["before"]["kind"] == "file" and replaced["backup"] == ".cuda4amd/backup/cublas64_12.dll"
    assert sha256(tool / ".cuda4amd" / "backup" / "cublas64_12.dll") == replaced["before"]["sha256"]
    assert undo_target(tool).complete
    assert snapshot(tmp_path, skip=(fix_cache,)) == base
    assert (tool / "cublas64_12.dll").stat().st_mtime == 1_000_000  # metadata comes back with the bytes


def test_undo_keeps_files_changed_after_the_fix(rules, tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    fix(rules, tool, fix_cache)
    launcher = tool / ".cuda4amd" / "tool.cmd"
    launcher.write_text("@echo off\r\nrem edited by the user\r\n")
    runner = CliRunner()
    from cuda4amd.cli import main

    res = runner.invoke(main, ["undo", str(tool)])
    assert res.exit_code == 6 and "changed after the fix" in res.output
    assert launcher.exists() and (tool / ".cuda4amd" / "journal.json").exists()
    assert load_journal(tool).state == "undo-incomplete"
    res = runner.invoke(main, ["undo", str(tool), "--force"])
    assert res.exit_code == 0, res.output
    assert "the tree is as it was" in res.output and not (tool / ".cuda4amd").exists()
    res = runner.invoke(main, ["undo", str(tool)])
    assert res.exit_code == 0 and "nothing to undo" in res.output


def test_tampered_release_file_fails_verification(rules, tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    result = scan(rules, tool)

    def rescan():
        (tool / ".cuda4amd" / "zluda" / "cublas64_12.dll").write_bytes(b"MZ tampered")
        return scan(rules, tool)

    outcome = fix(rules, tool, fix_cache, result=result, rescan=rescan)
    assert outcome.status == "verify-failed" and outcome.exit_code == 7
    assert "cublas64_12.dll" in outcome.message
    assert load_journal(tool).state == "verify-failed"
    assert undo_target(tool, force=True).complete


def test_launchers_outside_the_target(rules, tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    launchers = tmp_path / "launchers"
    launchers.mkdir()
    base = snapshot(tmp_path, skip=(fix_cache,))
    outcome = fix(rules, tool, fix_cache, launcher_dir=launchers)
    assert outcome.status == "applied"
    assert sorted(p.name for p in launchers.iterdir()) == ["tool.cmd", "tool.ps1", "zluda-run.cmd", "zluda-run.ps1"]
    assert all(p.startswith(("apps/Tool/.cuda4amd", "launchers/"))
               for p in changed(base, snapshot(tmp_path, skip=(fix_cache,))))
    assert undo_target(tool).complete
    assert snapshot(tmp_path, skip=(fix_cache,)) == base


def test_pinned_release_downloaded_with_resume(rules, tmp_path, fix_cache, monkeypatch):
    data = WIN_ZIP.read_bytes()
    pin = Pin("fixture", "v6-preview.69", "windows", WIN_ZIP.name, len(data), sha256(WIN_ZIP))
    fixture_rules = dataclasses.replace(rules, pins=(pin,))
    tool = demo_copy(tmp_path)
    with ReleaseServer({f"/v6-preview.69/{WIN_ZIP.name}": data}) as server:
        server.break_after[f"/v6-preview.69/{WIN_ZIP.name}"] = [len(data) // 3]
        monkeypatch.setenv("CUDA4AMD_ZLUDA_MIRROR", server.url + "/")
        out = []
        seen = []
        outcome = fix_target(scan(fixture_rules, tool), host=load_host_report(WIN_HOST), assume_yes=True,
                             echo=out.append, rules=fixture_rules, cache=fix_cache,
                             progress=lambda d, t: seen.append((d, t)))
        assert outcome.status == "applied", "".join(out)
        assert [r["range"] for r in server.requests] == [None, f"bytes={len(data) // 3}-"]
    assert seen[-1] == (len(data), len(data))
    assert (fix_cache / "zluda" / "archives" / pin.sha256 / WIN_ZIP.name).read_bytes() == data
    assert load_journal(tool).data["plan"]["release"]["kind"] == "pin"
    assert undo_target(tool).complete


def test_a_pin_whose_download_does_not_match_is_refused(rules, tmp_path, fix_cache, monkeypatch):
    data = WIN_ZIP.read_bytes()
    pin = Pin("fixture", "v6-preview.69", "windows", WIN_ZIP.name, len(data), "0" * 64)
    fixture_rules = dataclasses.replace(rules, pins=(pin,))
    tool = demo_copy(tmp_path)
    base = snapshot(tool)
    with ReleaseServer({f"/v6-preview.69/{WIN_ZIP.name}": data}) as server:
        monkeypatch.setenv("CUDA4AMD_ZLUDA_MIRROR", server.url)
        outcome = fix_target(scan(fixture_rules, tool), host=load_host_report(WIN_HOST), assume_yes=True,
                             echo=lambda s: None, rules=fixture_rules, cache=fix_cache)
    assert outcome.status == "refused" and "refused and deleted" in outcome.message
    assert snapshot(tool) == base and not list((fix_cache / "zluda" / "archives").rglob("*.zip*"))


def test_a_hostile_local_archive_is_refused_before_any_change(rules, tmp_path, fix_cache):
    from test_fix_support import HOSTILE

    tool = demo_copy(tmp_path)
    base = snapshot(tmp_path, skip=(fix_cache,))
    for name in ("dotdot.zip", "symlink.zip", "truncated.zip", "missing-file.zip"):
        outcome = fix(rules, tool, fix_cache, zluda=HOSTILE / name)
        assert outcome.status == "refused", name
        assert snapshot(tmp_path, skip=(fix_cache,)) == base


# ---------------------------------------------------------------------------
# Linux: the launcher runs the fake application
# ---------------------------------------------------------------------------

@pytest.mark.skipif(sys.platform != "linux", reason="runs a Linux ELF program")
def test_linux_launcher_runs_the_application_through_zluda(rules, tmp_path, fix_cache):
    app = linux_app(tmp_path)
    base = snapshot(tmp_path, skip=(fix_cache,))
    failed = subprocess.run([str(app / "fakeapp")], capture_output=True, text=True)
    assert failed.returncode != 0 and "libcuda.so.1" in failed.stderr  # no driver without ZLUDA
    outcome = fix(rules, app, fix_cache, host=LINUX_HOST, zluda=LINUX_TGZ)
    assert outcome.status == "applied", outcome.message
    launcher = app / ".cuda4amd" / "fakeapp.sh"
    text = launcher.read_text()
    assert text.startswith("#!/bin/sh\n") and os.access(launcher, os.X_OK)
    assert "LD_AUDIT=\"$root\"'/.cuda4amd/zluda/zluda_ld'" in text
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_AUDIT", "HIP_PATH")}
    env["LD_LIBRARY_PATH"] = "/somewhere/else"
    done = subprocess.run([str(launcher), "a b", "--exit", "7"], capture_output=True, text=True, env=env)
    assert done.returncode == 7, done.stderr
    lines = done.stdout.splitlines()
    zluda = app / ".cuda4amd" / "zluda"
    assert "env:HIP_PATH=/opt/rocm-6.4.1" in lines
    assert f"env:LD_LIBRARY_PATH={zluda}:/opt/rocm-6.4.1/lib:/somewhere/else" in lines
    assert f"env:LD_AUDIT={zluda}/zluda_ld" in lines
    loaded = [line[len("loaded:"):] for line in lines if line.startswith("loaded:")]
    assert f"{zluda}/libcuda.so.1" in loaded
    assert f"{zluda}/libcublas.so.12" in loaded  # LD_AUDIT beat the application's RPATH to NVIDIA's copy
    assert not any("nvlib" in p for p in loaded)
    assert "arg:a b" in lines and "cuInit:801" in lines  # ZLUDA fixture's stub answered
    # `cuda4amd run` does the same and passes the exit status through
    run = subprocess.run([sys.executable, "-m", "cuda4amd", "run", str(app / "fakeapp"), "--", "x", "--exit", "9"],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 9, run.stderr
    assert f"loaded:{zluda}/libcublas.so.12" in run.stdout.splitlines()
    printed = subprocess.run([sys.executable, "-m", "cuda4amd", "run", "--print-env", str(app / "fakeapp")],
                             capture_output=True, text=True, env=env)
    assert f"LD_AUDIT={zluda}/zluda_ld" in printed.stdout
    generic = subprocess.run([str(app / ".cuda4amd" / "zluda-run.sh"), str(app / "fakeapp")],
                             capture_output=True, text=True, env=env)
    assert generic.returncode == 0 and f"loaded:{zluda}/libcuda.so.1" in generic.stdout
    assert undo_target(app).complete
    assert snapshot(tmp_path, skip=(fix_cache,)) == base


@pytest.mark.skipif(sys.platform != "linux", reason="runs a Linux ELF program")
def test_linux_placement_follows_the_rpath_and_keeps_soname_links(rules, tmp_path, fix_cache):
    app = linux_app(tmp_path)
    nvlib = app / "nvlib"
    (nvlib / "libcublas.so.12").rename(nvlib / "libcublas.so.12.9.1")
    os.symlink("libcublas.so.12.9.1", nvlib / "libcublas.so.12")
    base = snapshot(tmp_path, skip=(fix_cache,))
    outcome = fix(rules, app, fix_cache, host=LINUX_HOST, zluda=LINUX_TGZ, mode="place")
    assert outcome.status == "applied", outcome.message
    assert sorted(a.path for a in outcome.plan.actions) == ["nvlib/libcublas.so.12.9.1", "nvlib/libcuda.so.1"]
    assert not outcome.plan.warnings  # libcuda.so.1 went where fakeapp's RPATH ($ORIGIN/nvlib) looks
    assert os.readlink(nvlib / "libcublas.so.12") == "libcublas.so.12.9.1"
    done = subprocess.run([str(app / "fakeapp")], capture_output=True, text=True)  # no launcher needed
    assert done.returncode == 0, done.stderr
    loaded = [line for line in done.stdout.splitlines() if line.startswith("loaded:")]
    assert f"loaded:{nvlib}/libcuda.so.1" in loaded and f"loaded:{nvlib}/libcublas.so.12" in loaded
    assert "cublasCreate_v2:801" in done.stdout  # ZLUDA's stand-in, not NVIDIA's (which returns 0)
    assert undo_target(app).complete
    assert snapshot(tmp_path, skip=(fix_cache,)) == base


def test_run_without_a_fix(tmp_path):
    from cuda4amd.cli import main

    (tmp_path / "x").write_text("")
    res = CliRunner().invoke(main, ["run", str(tmp_path / "x")])
    assert res.exit_code == 2 and "no cuda4amd fix found" in res.output


def test_run_refuses_a_windows_link_here(rules, tmp_path, fix_cache):
    from cuda4amd.cli import main

    tool = demo_copy(tmp_path)
    fix(rules, tool, fix_cache)
    res = CliRunner().invoke(main, ["run", "--print-env", str(tool / "tool.exe"), "--", "-x"])
    assert res.exit_code == 0
    assert ".cuda4amd/zluda/zluda.exe -- " in res.output.replace("\\", "/") and "HIP_PATH=" in res.output
    # run's options after PROGRAM, before `--`, are run's; after `--` they are the program's
    after = CliRunner().invoke(main, ["run", str(tool / "tool.exe"), "--print-env", "--target", str(tool), "--", "-x"])
    assert after.exit_code == 0 and after.output == res.output
    passed = CliRunner().invoke(main, ["run", "--print-env", str(tool / "tool.exe"), "--", "--print-env"])
    assert passed.exit_code == 0 and passed.output.rstrip().endswith("--print-env")
    if os.name != "nt":
        res = CliRunner().invoke(main, ["run", str(tool / "tool.exe")])
        assert res.exit_code == 2 and "fixed for Windows" in res.output


# ---------------------------------------------------------------------------
# a fault at every step
# ---------------------------------------------------------------------------

def _fault_loop(rules, root, fix_cache, tmp_path, *, how, mode, host, zluda, resume=False, stride=1):
    """Inject `how` at each operation of a fix in turn; after each, the tree
    (and everything else outside the fix_cache) must be restored by the automatic
    rollback, by `undo`, or — with resume — completed by a re-run and then undone."""
    base = snapshot(tmp_path, skip=(fix_cache,))
    result = scan(rules, root)
    counting = CountingOps()
    clean = fix(rules, root, fix_cache, result=result, host=host, zluda=zluda, mode=mode, ops=counting)
    assert clean.status == "applied", clean.message
    after = scan(rules, root)  # what a re-scan sees once the fix is in place
    assert undo_target(root).complete and snapshot(tmp_path, skip=(fix_cache,)) == base
    total = len(counting.steps)
    assert total > 20
    outcomes = {}
    for k in range(1, total + 1, stride):
        ops = FaultyOps(k, how)
        try:
            outcome = fix(rules, root, fix_cache, result=result, host=host, zluda=zluda, mode=mode, ops=ops,
                          rescan=lambda: after)
            status = outcome.status
        except (Fault, Crash):
            status = "interrupted"
        assert ops.fired is not None, k
        outcomes[status] = outcomes.get(status, 0) + 1
        touched = changed(base, snapshot(tmp_path, skip=(fix_cache,)))
        fix_dir = os.path.relpath(root / ".cuda4amd", tmp_path)
        if mode == "launcher":
            assert all(p.startswith(fix_dir) for p in touched), (k, ops.fired, touched)
        if resume and status == "interrupted":
            again = fix(rules, root, fix_cache, result=result, host=host, zluda=zluda, mode=mode, rescan=lambda: after)
            assert again.status in ("applied", "already-applied"), (k, ops.fired, again.message)
            assert again.verification.ok
        undone = undo_target(root, ops=NoSyncOps())
        assert undone.complete, (k, ops.fired, undone.kept, undone.errors)
        now = snapshot(tmp_path, skip=(fix_cache,))
        assert now == base, (k, ops.fired, changed(base, now))
    return outcomes


@pytest.mark.parametrize("mode", ["launcher", "place"])
@pytest.mark.parametrize("how", HOWS)
def test_fault_at_every_step_demo(rules, tmp_path, fix_cache, how, mode):
    tool = demo_copy(tmp_path)
    outcomes = _fault_loop(rules, tool, fix_cache, tmp_path, how=how, mode=mode, host=WIN_HOST, zluda=WIN_ZIP)
    if how in ("exception", "crash"):
        assert "interrupted" in outcomes
    else:
        assert "failed" in outcomes  # rolled back at once


@pytest.mark.parametrize("how", ["crash", "disk-full"])
def test_interrupted_fix_is_completed_by_a_rerun(rules, tmp_path, fix_cache, how):
    tool = demo_copy(tmp_path)
    _fault_loop(rules, tool, fix_cache, tmp_path, how=how, mode="place", host=WIN_HOST, zluda=WIN_ZIP, resume=True)


@pytest.mark.skipif(sys.platform != "linux", reason="Linux symlinks")
@pytest.mark.parametrize("how", ["crash", "locked"])
def test_fault_at_every_step_linux_app(rules, tmp_path, fix_cache, how):
    app = linux_app(tmp_path)
    _fault_loop(rules, app, fix_cache, tmp_path, how=how, mode="launcher", host=LINUX_HOST, zluda=LINUX_TGZ,
                resume=True)


def test_interrupted_undo_is_finished_by_another_undo(rules, tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    base = snapshot(tmp_path, skip=(fix_cache,))
    result = scan(rules, tool)
    fix(rules, tool, fix_cache, result=result, mode="place")
    counting = CountingOps()
    assert undo_target(tool, ops=counting).complete
    total = len(counting.steps)
    for k in range(1, total + 1):
        assert fix(rules, tool, fix_cache, result=result, mode="place").status in ("applied", "already-applied")
        with pytest.raises(Crash):
            undo_target(tool, ops=FaultyOps(k, "crash"))
        assert undo_target(tool).complete, k
        assert snapshot(tmp_path, skip=(fix_cache,)) == base, k


def test_fileops_write_is_exclusive(tmp_path):
    ops = FileOps()
    ops.write(tmp_path / "a", b"x")
    with pytest.raises(FileExistsError):
        ops.write(tmp_path / "a", b"y")
