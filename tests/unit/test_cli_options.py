"""Options that contradict each other are refused; a format that contradicts -o's extension is said."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from cuda4amd.cli import main

DEMO = FIXTURES / "demo" / "Tool"
SAVED = Path(__file__).parents[1] / "goldens" / "demo-tool" / "scan.json"


def run(*args: object) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("command", [
    ("scan", DEMO, "--host", "none"), ("report", SAVED), ("diff", SAVED, SAVED), ("doctor",),
])
def test_quiet_and_verbose_together_are_a_usage_error(command):
    result = run(*command, "-q", "-v")
    assert result.exit_code == 2
    assert "-q/--quiet and -v/--verbose contradict each other" in result.output


def test_a_format_other_than_the_extension_says_is_written_with_a_warning(tmp_path):
    out = tmp_path / "report.md"
    result = run("report", SAVED, "--format", "json", "-o", out)
    assert result.exit_code == 3
    assert f"warning: writing json into {out}, whose extension says markdown" in result.output
    assert out.read_text().startswith("{")  # what --format asked for


def test_the_extension_alone_decides_without_a_warning(tmp_path):
    out = tmp_path / "report.md"
    result = run("report", SAVED, "-o", out)
    assert "warning" not in result.output and out.read_text().startswith("#")


def test_diff_calls_its_plain_format_console_as_scan_and_report_do(tmp_path):
    assert run("diff", SAVED, SAVED, "--format", "console").exit_code == 0
    refused = run("diff", SAVED, SAVED, "--format", "text")
    assert refused.exit_code == 2 and "'console'" in refused.output


def test_the_lief_engine_prints_nothing_on_stderr():
    # nanobind's leak report at exit (lief 1.0 with the command line's gc.freeze) was 32 lines of it
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "cuda4amd", "scan", str(DEMO), "--engine", "lief", "-q",
                           "--host", "none"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 3 and done.stderr == ""


def test_exit_zero_reports_without_failing_on_the_verdict():
    assert run("scan", DEMO, "--host", "none", "-q").exit_code == 3  # partial
    assert run("scan", DEMO, "--host", "none", "-q", "--exit-zero").exit_code == 0
    assert run("report", SAVED, "-q", "--exit-zero").exit_code == 0
    assert run("scan", FIXTURES / "no-such-folder", "--exit-zero").exit_code == 2  # an input error still is
    refused = run("scan", DEMO, "--fix", "--exit-zero")
    assert refused.exit_code == 2 and "--exit-zero does not go with --fix" in refused.output
