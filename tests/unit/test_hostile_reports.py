"""Issue 31, item 5: a saved report is checked against the shipped schema, bounded in size and depth,
before `report`, `diff` or `matrix` use it: one line and exit 2, never a traceback."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cuda4amd.cli.report import diff, report
from cuda4amd.evidence.matrix import load_reports
from cuda4amd.report.diff import ReportFileError, check_report

GOLDEN = Path(__file__).parents[1] / "goldens" / "elf" / "scan.json"
TOOLS = Path(__file__).parents[2] / "tools"


def golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def run_limited(args: list[str], seconds: int = 30, memory: int = 1 << 30) -> subprocess.CompletedProcess:
    """`cuda4amd ARGS` under an address-space and CPU limit (what a 1.6 GB or endless parse would break)."""
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({m}, {m})); "
            "from cuda4amd.cli import entry_point; sys.argv = ['cuda4amd'] + sys.argv[1:]; entry_point()")
    return subprocess.run([sys.executable, "-c", code.format(m=memory), *args], capture_output=True, text=True,
                          timeout=seconds)


@pytest.mark.skipif(sys.platform == "win32", reason="resource limits")
@pytest.mark.parametrize(("name", "text"), [
    ("deep.json", "[" * 100_000 + "]" * 100_000),
    ("deep.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n"),
    ("deep-tables.toml", "x = " + "{a = " * 100_000 + "1" + "}" * 100_000 + "\n"),
    ("dotted.toml", "a" + ".a" * 20_000 + " = 1\n"),  # 40 KB of dotted keys (took 1.6 GB)
], ids=["json", "toml-arrays", "toml-tables", "toml-dotted"])
def test_hostile_nesting_is_one_line_and_exit_2(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    started = time.monotonic()
    done = run_limited(["report", str(path)])
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("mutate", [
    lambda d: d["binaries"][0].__setitem__("dependencies", "x"),
    lambda d: d.__setitem__("summary", []),
    lambda d: d["binaries"][0].__setitem__("verdict", {"a": 1}),
    lambda d: d.__setitem__("zluda", None),
    lambda d: d["binaries"].append({"path": 3}),
])
def test_a_report_of_the_wrong_shape_is_refused_before_use(tmp_path, mutate):
    doc = golden()
    mutate(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    for command, args in ((report, [str(path)]), (diff, [str(path), str(GOLDEN)])):
        result = CliRunner().invoke(command, args)
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
        assert "not a valid cuda4amd.scan/3 report" in result.output
    good, skipped = load_reports([path])
    assert not good and "not a valid scan report" in skipped[0]["reason"]


def test_reports_of_earlier_versions_still_read():
    for schema in ("cuda4amd.scan/1", "cuda4amd.scan/2"):
        old = {k: v for k, v in golden().items() if k not in ("tool", "engine")}
        old["schema"] = schema
        assert check_report(old)["engine"] == "fast"
        old["binaries"][0]["verdict"] = 7
        with pytest.raises(ReportFileError, match=f"not a valid {schema} report"):
            check_report(old)


def test_the_fuzz_tool_finds_no_traceback_in_a_small_run():
    sys.path.insert(0, str(TOOLS))
    try:
        import fuzz_reports
    finally:
        sys.path.remove(str(TOOLS))
    lines: list[str] = []
    result = fuzz_reports.run(60, 3, echo=lines.append)
    assert result["tracebacks"] == 0, "\n".join(lines)
