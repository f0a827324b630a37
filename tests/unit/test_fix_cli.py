"""`cuda4amd scan --fix` and `cuda4amd undo` from the command line, end to end."""
from __future__ import annotations

from click.testing import CliRunner
from test_fix_support import WIN_HOST, WIN_ZIP, demo_copy, fix_cache, snapshot  # noqa: F401 - fix_cache is a fixture

from cuda4amd.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_scan_fix_then_undo_restores_the_tree(tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    before = snapshot(tool)
    done = invoke("scan", tool, "--host", WIN_HOST, "--fix", "--zluda", WIN_ZIP, "--yes")
    assert done.exit_code == 0, done.output
    assert done.output.startswith("PARTIAL")  # the verdict first, then the plan and its outcome
    assert (tool / ".cuda4amd" / "journal.json").is_file()
    launchers = sorted(p.name for p in (tool / ".cuda4amd").iterdir() if p.suffix in (".cmd", ".ps1"))
    assert launchers, done.output
    # the application's own files are untouched in launcher mode
    assert {k: v for k, v in snapshot(tool).items() if not k.startswith(".cuda4amd")} == before
    undone = invoke("undo", tool)
    assert undone.exit_code == 0, undone.output
    assert snapshot(tool) == before


def test_dry_run_changes_nothing(tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    before = snapshot(tool)
    result = invoke("scan", tool, "--host", WIN_HOST, "--fix", "--dry-run", "--zluda", WIN_ZIP)
    assert result.exit_code == 0, result.output
    assert snapshot(tool) == before


def test_this_host_without_amd_gpu_is_refused(tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    before = snapshot(tool)
    result = invoke("scan", tool, "--host", "none", "--fix", "--zluda", WIN_ZIP, "--yes")
    assert result.exit_code == 5, result.output
    assert snapshot(tool) == before


def test_fix_options_need_fix():
    assert invoke("scan", "fixtures/demo/Tool", "--dry-run").exit_code == 2


def test_the_plan_is_wrapped_to_the_terminal(tmp_path, fix_cache, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    tool = demo_copy(tmp_path)
    result = invoke("scan", tool, "--host", WIN_HOST, "--fix", "--dry-run", "--zluda", WIN_ZIP, "-q")
    assert result.exit_code == 0, result.output
    plan = result.output[result.output.index("cuda4amd fix plan"):].splitlines()
    # only a word that cannot be broken (a path, a hash) may run past the width
    assert all(len(line) <= 80 or " " not in line.strip() for line in plan), max(plan, key=len)
