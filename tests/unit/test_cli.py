from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from cuda4amd.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def run(*args, **env):
    # rich takes the width of a piped stdout from COLUMNS (80 without it)
    return CliRunner(env={"COLUMNS": "160", **env}).invoke(main, list(map(str, args)))


def test_console_summary_leads_with_the_verdict():
    result = run("scan", FIXTURES / "demo" / "Tool")
    assert result.exit_code == 3, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("PARTIAL  some of it can run through ZLUDA, not all of it fully")
    assert "plugins/trt_export.dll" in result.output and "blocked" in result.output
    assert "needs TensorRT, which has no AMD route through ZLUDA" in result.output
    assert "readme.txt" not in result.output


def test_verbose_lists_dependencies_and_stub_symbols():
    result = run("scan", FIXTURES / "demo" / "Tool", "-v")
    assert "cublas64_12.dll [static] blas → redirect: ZLUDA's cublas64_12.dll" in result.output
    # the stub, named by the reason, is not listed a second time (tests/unit/test_console_verbose.py)
    assert "(cublasDgemm_v2)" in result.output and "stub: cublasDgemm_v2" not in result.output


@pytest.mark.parametrize(
    ("target", "status"),
    [
        (FIXTURES / "pe" / "app_ready.exe", 0),
        (FIXTURES / "pe" / "plain.dll", 0),
        (FIXTURES / "demo" / "Tool", 3),
        (FIXTURES / "pe" / "trt_plugin.dll", 4),
    ],
)
def test_exit_status_tells_verdicts_apart(target, status):
    assert run("scan", target).exit_code == status


def test_usage_and_input_errors_exit_2(tmp_path):
    assert run("scan", tmp_path / "missing").exit_code == 2
    assert run("scan", FIXTURES / "pe", "--zluda-release", "v0").exit_code == 2
    assert run("scan", FIXTURES / "pe", "-o", tmp_path / "report.xyz").exit_code == 2
    assert run("scan", FIXTURES / "pe", "--format", "yaml").exit_code == 2


def test_json_and_toml_files_carry_the_same_report(tmp_path):
    as_json = tmp_path / "scan.json"
    as_toml = tmp_path / "scan.toml"
    first = run("scan", FIXTURES / "pe", "-o", as_json)
    second = run("scan", FIXTURES / "pe", "-o", as_toml)
    assert first.exit_code == second.exit_code == 3
    assert "report written to" in first.output and first.output.startswith("PARTIAL")
    document = json.loads(as_json.read_text())
    assert document["schema"] == "cuda4amd.scan/3" and document["verdict"] == "partial"
    from cuda4amd.report.toml_format import _without_nulls

    from_toml = tomllib.loads(as_toml.read_text())
    assert document.pop("command").endswith("scan.json") and from_toml.pop("command").endswith("scan.toml")
    assert from_toml == _without_nulls(document)


def test_json_on_stdout():
    result = run("scan", FIXTURES / "elf", "--format", "json")
    document = json.loads(result.output)
    assert {b["path"] for b in document["binaries"]} >= {"libuser_blas.so", "app_driver"}
    for binary in document["binaries"]:
        assert set(binary) >= {"path", "format", "machine", "verdict", "reasons", "dependencies"}
        for dep in binary["dependencies"]:
            assert set(dep) >= {"name", "family", "load", "route", "resolved", "symbols"}
            assert dep["load"] in ("static", "delay", "by-name")


def test_corrupt_files_are_errors_and_the_scan_finishes():
    result = run("scan", FIXTURES / "corrupt", "--format", "json")
    document = json.loads(result.output)
    errors = {e["path"]: e for e in document["errors"]}
    assert set(errors) == {
        "bad_import_rva.dll",
        "bad_lfanew.dll",
        "bad_shoff.so",
        "empty.dll",  # named like a library, 0 bytes: unread (discover), not passed over
        "import_loop.dll",
        "truncated.so",
        "truncated_header.dll",
        "truncated_imports.dll",
    }
    assert document["binaries"] == []  # dos_only.exe and text.dll are not binaries
    assert all(e["stage"] == ("discover" if path == "empty.dll" else "read") and e["message"]
               for path, e in errors.items())
    assert document["summary"]["errors"] == len(errors)


def test_help_starts_without_heavy_imports():
    code = "import sys, cuda4amd.cli; print(sorted(m for m in ('lief', 'pefile', 'networkx', 'rich') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_scan_loads_its_own_command_only():
    """Commands are imported when looked up (cli.COMMANDS): a JSON scan loads no fix, trace or
    matrix module, and no rich (nothing reaches a terminal), and the collector runs rarely while it runs."""
    code = ("import gc, sys, runpy; sys.argv = ['cuda4amd', 'scan', sys.argv[1], '--format', 'json']\n"
            "import cuda4amd.scan.pipeline as p\n"
            "seen, scan = [], p.run_scan\n"
            "p.run_scan = lambda *a, **k: seen.append(gc.get_threshold()[0]) or scan(*a, **k)\n"
            "try:\n    runpy.run_module('cuda4amd', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('cuda4amd.fix', 'cuda4amd.cli.trace', "
            "'cuda4amd.cli.matrix', 'cuda4amd.cli.doctor', 'rich'))), seen, gc.get_threshold()[0], file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "pe")], capture_output=True, text=True)
    assert json.loads(done.stdout)["verdict"] == "partial"
    # during the command, and after it: the entry point keeps it to the exit (the test below)
    assert done.stderr.strip().splitlines()[-1] == "[] [200000] 200000"
    from cuda4amd.cli import COMMANDS, main

    assert sorted(main.list_commands(None)) == sorted(COMMANDS)  # type: ignore[arg-type]
    for name in COMMANDS:
        assert main.get_command(None, name).name == name  # type: ignore[arg-type, union-attr]


def test_lief_engine_gives_the_same_report():
    fast = json.loads(run("scan", FIXTURES / "pe", "--format", "json").output)
    lief = json.loads(run("scan", FIXTURES / "pe", "--format", "json", "--engine", "lief").output)
    assert lief["engine"] == "lief"
    assert fast["binaries"] == lief["binaries"]


def test_progress_bar_goes_to_stderr_of_a_terminal(capsys):
    from cuda4amd.cli.progress import TerminalProgress
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    with TerminalProgress() as progress:
        result = run_scan(ScanOptions(target=str(FIXTURES / "pe")), progress)
    assert result.verdict == "partial"
    assert capsys.readouterr().out == ""


def test_download_bar_is_rich_progress_on_stderr(capsys):
    from cuda4amd.cli.progress import DownloadBar

    with DownloadBar() as bar:
        for done in range(0, 1_048_577, 262_144):
            bar(done, 1_048_576)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "1.0/1.0 MB" in captured.err or "1.0 MB" in captured.err


def test_the_entry_point_does_not_free_what_a_command_built_one_object_at_a_time():
    """The frames of the command that the exit's traceback holds are kept to the end: their objects go
    with the process (no finalizer runs for them), where a plain call frees them as it returns."""
    code = """
import sys
import cuda4amd.cli as cli
class Built:
    def __del__(self):
        print("freed", flush=True)
def command():
    built = Built()
    sys.exit(3)
try:
    command()
except SystemExit:
    pass
print("after a plain call", flush=True)
cli.main = command
cli.entry_point()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == ["freed", "after a plain call"]


def test_the_command_line_leaves_what_a_command_built_to_the_os():
    """The entry point (console script, python -m cuda4amd) freezes the heap as the process ends, so the
    interpreter's shutdown skips the collector's pass over it, and keeps the command's collector threshold,
    so that no collection runs over the report between the command's end and the exit; `main` run in a
    caller's own process does neither."""
    code = """
import gc, sys
from click.testing import CliRunner
import cuda4amd.cli as cli
default = gc.get_threshold()
CliRunner().invoke(cli.main, ["--version"])
print("after main in this process:", gc.get_freeze_count(), gc.get_threshold() == default)
sys.argv = ["cuda4amd", "--version"]
try:
    cli.entry_point()
except SystemExit as exit:
    print("after the entry point:", exit.code, gc.get_freeze_count() > 0, gc.get_threshold() == cli.GC_THRESHOLD)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "after main in this process: 0 True" in done.stdout
    assert "after the entry point: 0 True True" in done.stdout
    module = subprocess.run([sys.executable, "-m", "cuda4amd", "--version"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert module.returncode == 0 and "cuda4amd" in module.stdout
