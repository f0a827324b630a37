"""Every command on a console that cannot encode the report's symbols, and colour as rich decides it.

Windows redirects a Python program's output in the ANSI code page (cp1252
on Western systems): `→`, `✓`, `✗` cannot be encoded there. Each command runs
as a subprocess with PYTHONIOENCODING=cp1252 and its output redirected,
and must finish with its usual status, print no traceback and write ASCII
for what cp1252 lacks. Under NO_COLOR nothing is coloured, whatever the
command.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import FIXTURES
from test_fix_support import WIN_HOST, WIN_ZIP, demo_copy
from test_goldens import GOLDENS

DEMO = FIXTURES / "demo" / "Tool"
SAVED = GOLDENS / "demo-tool" / "scan.json"
SAVED_HOST = GOLDENS / "demo-tool-rx6700xt" / "scan.json"
ANSI = "\x1b["
#: an SGR sequence that sets a colour (NO_COLOR allows bold and dim, https://no-color.org)
COLOUR = re.compile(r"\x1b\[(?:[0-9]+;)*(?:3[0-7]|9[0-7]|38;[0-9;]+)m")


def cuda4amd(*args, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS")}
    return subprocess.run([sys.executable, "-m", "cuda4amd", *map(str, args)], capture_output=True,
                          env={**clean, **env}, input=stdin.encode() if stdin else None, timeout=300)


def commands(tmp_path) -> list[tuple[tuple, int]]:
    """(arguments, exit status) of every command, over the demo fixture and saved reports."""
    fixed = demo_copy(tmp_path)
    return [
        (("scan", DEMO, "-v"), 3),
        (("scan", DEMO, "--format", "markdown"), 3),
        (("scan", DEMO, "-o", tmp_path / "scan.md"), 3),
        (("scan", DEMO, "-q"), 3),
        (("scan", DEMO, "--host", WIN_HOST, "--fix", "--dry-run", "--zluda", WIN_ZIP), 0),
        (("report", SAVED, "-v"), 3),
        (("report", SAVED_HOST, "--format", "markdown"), 4),
        (("diff", SAVED, SAVED_HOST), 0),
        (("diff", SAVED, SAVED_HOST, "--format", "markdown"), 0),
        (("doctor",), 0),
        (("doctor", "--format", "markdown"), 0),
        (("schema", "scan"), 0),
        # a real fix, then run --print-env in it, then undo (each its own process, the cache the test's)
        (("scan", fixed, "--host", WIN_HOST, "--fix", "--zluda", WIN_ZIP, "--yes"), 0),
        (("run", "--print-env", fixed / "tool.exe"), 0),
        (("verify", fixed), 0),
        (("undo", fixed), 0),
        (("trace", "explain", FIXTURES / "trace" / "zluda_log"), 0),
        (("matrix", SAVED, SAVED_HOST), 0),
    ]


@pytest.mark.parametrize("environment", [{"PYTHONIOENCODING": "cp1252"}, {"NO_COLOR": "1"}],
                         ids=["cp1252", "NO_COLOR"])
def test_every_command_survives_the_console(tmp_path, environment):
    env = {**environment, "CUDA4AMD_CACHE": str(tmp_path / "cache")}
    seen = ""
    for args, status in commands(tmp_path):
        done = cuda4amd(*args, env=env)
        encoding = environment.get("PYTHONIOENCODING", "utf-8")
        out, err = done.stdout.decode(encoding), done.stderr.decode(encoding)
        assert done.returncode == status, (args, out, err)
        assert "Traceback" not in err and "UnicodeEncodeError" not in err, (args, err)
        assert out.strip(), args
        assert ANSI not in out and ANSI not in err, args  # redirected (and NO_COLOR): no colour codes
        seen += out + err
    if environment.get("PYTHONIOENCODING") == "cp1252":
        assert "> redirect" in seen  # what → became: one character, as → is one cell
        assert not any(ch in seen for ch in "→✓✗")
    else:
        assert "→" in seen  # UTF-8 keeps its symbols


def test_colour_follows_rich_and_the_flag(tmp_path):
    def coloured(*extra, **env):
        return bool(COLOUR.search(cuda4amd("scan", DEMO, "-q", *extra, env=env).stdout.decode()))

    assert not coloured()  # piped
    assert coloured(FORCE_COLOR="1")
    assert not coloured("--color", "never", FORCE_COLOR="1")
    assert coloured("--color", "always", NO_COLOR="1")
    assert not coloured(NO_COLOR="1", FORCE_COLOR="1")


def test_quiet_is_the_verdict_line_and_width_is_rich_s(tmp_path):
    quiet = cuda4amd("scan", DEMO, "-q", env={}).stdout.decode().splitlines()
    assert quiet[0].startswith("PARTIAL") and all(not line.startswith("│") for line in quiet)
    assert len(quiet) == 1  # one line, however long the path (the terminal wraps it, not we)
    narrow = cuda4amd("scan", DEMO, env={"COLUMNS": "60"}).stdout.decode().splitlines()
    assert max(len(line) for line in narrow[1:]) <= 60  # the tables take the width rich gives them


def test_report_reads_stdin_and_writes_stdout():
    saved = SAVED.read_text(encoding="utf-8")
    back = cuda4amd("report", "-", "-o", "-", "--format", "json", env={}, stdin=saved)
    assert back.returncode == 3 and back.stdout.decode() == saved
    toml = (GOLDENS / "demo-tool" / "scan.toml").read_text(encoding="utf-8")
    again = cuda4amd("report", "-", "--format", "json", env={}, stdin=toml)
    assert again.returncode == 3 and json.loads(again.stdout) == json.loads(saved)


def test_a_cp1252_console_keeps_the_tables_within_the_width():
    # rich lays a table out by the cells of its symbols before the stream replaces them: a stand-in wider
    # than the symbol pushed every advice row past the border
    done = cuda4amd("report", GOLDENS / "demo-tool" / "scan.json", "-v",
                    env={"PYTHONIOENCODING": "cp1252", "COLUMNS": "80"})
    rows = [line for line in done.stdout.decode("cp1252").splitlines() if line.startswith(("|", "+"))]
    assert rows and {len(line) for line in rows} == {80}


def test_the_software_only_note_is_short_and_only_where_there_is_cuda(tmp_path):
    from cuda4amd.report.console import render

    doc = json.loads((GOLDENS / "demo-tool" / "scan.json").read_text(encoding="utf-8"))
    doc["basis"] = "software-only: no AMD GPU or HIP SDK was found on this machine"
    lines = render(doc, width=80).splitlines()
    note = lines.index(doc["basis"])
    assert lines[note + 1] == "for another machine: --host FILE.json (from `cuda4amd doctor --format json`)"
    assert all(len(line) <= 80 for line in lines[1:])  # every line after the headline fits 80 columns
    doc["verdict"] = "no-cuda"
    assert doc["basis"] not in render(doc, width=80)
