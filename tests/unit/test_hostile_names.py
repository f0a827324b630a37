"""Issue 11, items 10-11: names keep their identity and never inject into a report or a terminal."""
from __future__ import annotations

import json
import os
import shutil

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
import tomllib
from click.testing import CliRunner
from conftest import FIXTURES

from cuda4amd.cli import main
from cuda4amd.report import console, markdown
from cuda4amd.report.document import build
from cuda4amd.report.escape import visible, visible_document
from cuda4amd.scan.pipeline import ScanOptions, run_scan

PE = FIXTURES / "pe" / "blas_mixed.dll"       # imports cublas64_12.dll
PLAIN = FIXTURES / "pe" / "plain.dll"           # imports no CUDA library

posix_names = pytest.mark.skipif(os.name == "nt", reason="these names are not allowed on Windows")

HOSTILE = [
    "evil\n\n[click me](javascript:alert(1))\n\n.dll",           # blank lines: ends <summary>, live link
    "osc\x1b]52;c;ZWNobyBwd25lZA==\x07.dll",                     # OSC 52: set the clipboard
    "title\x1b]0;owned\x07.dll",                                  # OSC 0: set the window title
    "csi\x1b[2J\x9b31m.dll",                                       # clear screen, C1 CSI
    'mermaid"]\n  x --> y["\u202egnp.dll',                       # breaks a Mermaid label; RTL override
]


def test_visible_escapes_every_control_character():
    assert visible("a\nb\tc\rd\x1b\x07\x7f\x9b\u202e\udcff") == "a\\nb\\tc\\rd\\x1b\\x07\\x7f\\x9b\\u202e\\xff"
    assert visible("plain C:\\Apps\\tool.exe ünïcødé") == "plain C:\\Apps\\tool.exe ünïcødé"
    assert visible_document({"k\n": ["x\x1b", 3, None]}) == {"k\\n": ["x\\x1b", 3, None]}


@posix_names
def test_hostile_names_are_visible_in_console_and_markdown_and_faithful_in_json_and_toml(tmp_path):
    for name in HOSTILE:
        shutil.copy(PE, tmp_path / name)
    result = run_scan(ScanOptions(target=str(tmp_path)))
    document = build(result)
    paths = sorted(b["path"] for b in document["binaries"])
    assert paths == sorted(HOSTILE)                    # faithful in the document
    for fmt, load in (("json", json.loads), ("toml", tomllib.loads)):
        res = CliRunner().invoke(main, ["scan", str(tmp_path), "--host", "none", "--format", fmt, "--no-redact"])
        assert sorted(b["path"] for b in load(res.output)["binaries"]) == sorted(HOSTILE), fmt
    text = console.render(document, verbose=True, color=True)
    md = markdown.render(document)
    for out in (text, md):
        assert "\x1b]" not in out and "\x07" not in out and "\x9b" not in out and "\u202e" not in out
        assert "\\x1b]52;c;" in out and "\\x07" in out
    assert "\x1b" not in text.replace("\x1b[", "")        # only rich's own colour codes (CSI) remain
    assert "\x1b" not in md
    # every <summary> is one line; no line of the report starts a link from a name
    for line in md.splitlines():
        if "<summary>" in line:
            assert "</summary>" in line
        assert not line.startswith("[click me]")
    mermaid = md.split("```mermaid\n", 1)[1].split("```", 1)[0] if "```mermaid" in md else ""
    assert "x --> y" not in mermaid


@posix_names
def test_the_terminal_of_the_cli_gets_names_visible_and_no_markup(tmp_path):
    """`scan` prints through console.show (not render): the names are escaped there too, and a name
    that looks like rich markup is shown as it is (every line is a Text, never markup)."""
    for name in (*HOSTILE, "[bold red]markup.dll"):
        shutil.copy(PE, tmp_path / name)
    res = CliRunner(env={"COLUMNS": "400"}).invoke(main, ["scan", str(tmp_path), "--host", "none", "--color", "always",
                                                          "-v"])
    out = res.output
    assert "\\x1b]52;c;" in out and "\\x07" in out and "\\u202e" in out
    assert "\x1b]" not in out and "\x07" not in out and "\x9b" not in out and "\u202e" not in out
    assert "[bold red]markup.dll" in out


@posix_names
def test_names_differing_only_in_invalid_utf8_keep_their_identity(tmp_path):
    shutil.copy(PE, os.fsencode(tmp_path) + b"/lib\xe9.dll")        # uses cuBLAS
    shutil.copy(PLAIN, os.fsencode(tmp_path) + b"/lib\xe8.dll")     # uses no CUDA
    result = run_scan(ScanOptions(target=str(tmp_path)))
    verdicts = {v.binary.path: v.verdict for v in result.verdicts}
    assert sorted(verdicts) == ["lib\\xe8.dll", "lib\\xe9.dll"]
    assert verdicts["lib\\xe8.dll"] == "no-cuda" != verdicts["lib\\xe9.dll"]
    res = CliRunner().invoke(main, ["scan", str(tmp_path), "--host", "none", "--format", "json"])
    assert sorted(b["path"] for b in json.loads(res.output)["binaries"]) == ["lib\\xe8.dll", "lib\\xe9.dll"]
