"""Issue 31, item 7: what leaves the terminal is redacted — `trace explain -o x.md|x.json` and its
Markdown / JSON on stdout, `verify -o x.json` (its own `target` too), and `matrix` over a report saved
with --no-redact."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_fix_support import fix_cache  # noqa: F401 - a fixture

from cuda4amd.cli.matrix import matrix

NAME = "bobsmithers"  # the user name to keep out of every file
GOLDEN = Path(__file__).parents[1] / "goldens" / "elf" / "scan.json"


def private_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_AUDIT")}
    env.update(HOME=str(home), USER=NAME, LOGNAME=NAME, USERNAME=NAME)
    return env


def test_trace_explain_files_and_stdout_are_redacted(tmp_path):
    home = tmp_path / NAME
    run = home / "traces" / "app"
    run.mkdir(parents=True)
    (run / "log.txt").write_text(
        "cuModuleLoadData(module: 0x0, image: 0x1) -> CUDA_ERROR_INVALID_PTX\n"
        f"    Saved module to {home}/traces/app/module_0001.ptx\n"
        f"cuInit(flags: 0) -> CUDA_ERROR_UNKNOWN\n    /home/{NAME}/lib/libcuda.so.1\n")
    (run / "module_0001.ptx").write_text(".version 8.0\n.target sm_80\n")
    (run / "module_0001.log").write_text(f"{home}/k.ptx:3: unknown directive (built by {NAME})\n")
    env = private_env(home)
    for args in (["-o", str(tmp_path / "x.md")], ["-o", str(tmp_path / "x.json")], ["--format", "markdown"],
                 ["--format", "json"]):
        done = subprocess.run([sys.executable, "-m", "cuda4amd", "trace", "explain", str(run), *args],
                              capture_output=True, text=True, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        shown = (tmp_path / args[1]).read_text() if args[0] == "-o" else done.stdout
        assert "traces/app" in shown  # the explanation is there ...
        assert NAME not in shown and str(home) not in shown, args  # ... its user and home are not


@pytest.mark.skipif(sys.platform != "linux", reason="runs Linux programs through the fix")
def test_verify_json_redacts_its_target(rules, tmp_path, fix_cache):
    from test_fix_apply import fix
    from test_fix_support import LINUX_HOST, LINUX_TGZ, linux_app

    app = linux_app(tmp_path / NAME)
    assert fix(rules, app, fix_cache, host=LINUX_HOST, zluda=LINUX_TGZ).status == "applied"
    out = tmp_path / "v.json"
    done = subprocess.run([sys.executable, "-m", "cuda4amd", "verify", str(app), "-o", str(out)],
                          capture_output=True, text=True, env=private_env(tmp_path / "elsewhere"), cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text())
    assert NAME not in json.dumps(data), data["target"]


def test_matrix_redacts_a_no_redact_input(tmp_path, monkeypatch):
    doc = json.loads(GOLDEN.read_text())
    doc["target"]["path"] = f"/home/{NAME}/{NAME}-tool"
    saved = tmp_path / f"{NAME}-scan.json"
    saved.write_text(json.dumps(doc))
    monkeypatch.setenv("USER", NAME)
    for fmt in ("markdown", "json", "csv"):
        result = CliRunner().invoke(matrix, [str(saved), "--format", fmt])
        assert result.exit_code == 0, result.output
        assert "tool" in result.output and NAME not in result.output, result.output
