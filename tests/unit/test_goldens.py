"""Golden files: every output format of the fixture scans, byte for byte.

Regenerate after an intended change (then review the diff):

    UPDATE_GOLDENS=1 python -m pytest tests/unit/test_goldens.py

The scans run with `--host none` (one with the recorded host in
tests/goldens/hosts, made by tests/goldens/make_host.py), from the
repository folder, redacted with fixed private strings, so the goldens hold
no timestamps, absolute paths or anything of the machine that made them.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, REPO

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

GOLDENS = Path(__file__).parents[1] / "goldens"
UPDATE = os.environ.get("UPDATE_GOLDENS") == "1"
HOST = GOLDENS / "hosts" / "win-rx6700xt-hipsdk64.json"

#: case -> (target, ScanOptions fields)
CASES = {
    "demo-tool": (FIXTURES / "demo" / "Tool", {}),
    "demo-tool-rx6700xt": (FIXTURES / "demo" / "Tool", {"host": HOST}),
    "pe": (FIXTURES / "pe", {}),
    "elf": (FIXTURES / "elf", {}),
    "byname": (FIXTURES / "byname", {}),
    "kernels": (FIXTURES / "kernels", {}),
    "corrupt": (FIXTURES / "corrupt", {}),
}
REPORTS = {"json": "scan.json", "toml": "scan.toml", "markdown": "scan.md", "console": "scan.txt"}
GRAPHS = {"graphml": "graph.graphml", "dot": "graph.dot", "json": "graph.json"}
GRAPH_CASES = ("demo-tool", "pe", "byname")


SCHEMA_FILE = REPO / "scanner" / "report" / "schemas" / "scan.json"


def strict_validator():
    """A validator of the scan JSON Schema (scanner/report/schemas/scan.json) that also rejects fields the schema does not list.

    The published schema lets objects carry more properties (fields are added
    compatibly); here every object without its own rule gets
    additionalProperties: false, so an undocumented field fails the tests.
    """
    import jsonschema

    def strict(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                strict(value)
        elif isinstance(node, list):
            for value in node:
                strict(value)
        return node

    schema = strict(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def golden_private():
    from cuda4amd.report.redact import PrivateStrings

    return PrivateStrings(homes=("/home/golden-user",), users=("golden-user",), hosts=("golden-host",))


def scan_case(case: str, rules):
    """(ScanResult, redacted document) of a golden case, as `cuda4amd scan` run from the repository makes it."""
    from cuda4amd.report.document import build
    from cuda4amd.report.redact import Redactor
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    target, options = CASES[case]
    options = {"host": "none", **{k: os.path.relpath(v, REPO) if k == "host" else v for k, v in options.items()}}
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        result = run_scan(ScanOptions(target=str(target), **options), rules=rules)
    finally:
        os.chdir(cwd)
    redactor = Redactor(golden_private(), target_root=result.target.path, cwd=REPO)
    return result, redactor, redactor.document(build(result))


def render_case(fmt: str, document: dict) -> str:
    from cuda4amd.report import render

    return render(fmt, document, verbose=True, width=100)


def check(path: Path, actual: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8", newline="\n")
        return
    assert path.exists(), f"{path.relative_to(REPO)} is missing: run UPDATE_GOLDENS=1 python -m pytest tests/unit/test_goldens.py"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{path.relative_to(REPO)} differs; if the change is intended, regenerate (see module docstring)"


@pytest.fixture(scope="module")
def scanned(rules):
    return {case: scan_case(case, rules) for case in CASES}


@pytest.mark.parametrize("fmt", sorted(REPORTS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_report_golden(scanned, case, fmt):
    _, _, document = scanned[case]
    check(GOLDENS / case / REPORTS[fmt], render_case(fmt, document))


@pytest.mark.parametrize("fmt", sorted(GRAPHS))
@pytest.mark.parametrize("case", GRAPH_CASES)
def test_graph_golden(scanned, case, fmt):
    from cuda4amd.report import graph_export

    result, redactor, _document = scanned[case]
    graph = graph_export.redacted(graph_export.attributed(result.graph, build_plain(result)), redactor)
    check(GOLDENS / case / GRAPHS[fmt], graph_export.dumps(graph, fmt))


def build_plain(result):
    from cuda4amd.report.document import build

    return build(result)


@pytest.mark.parametrize("case", sorted(CASES))
def test_goldens_hold_nothing_of_this_machine(case):
    if UPDATE:
        pytest.skip("goldens are being written")
    for path in sorted((GOLDENS / case).iterdir()):
        content = path.read_text(encoding="utf-8")
        assert str(REPO) not in content and str(Path.home()) not in content, path
        assert "golden-user" not in content and "golden-host" not in content, path


@pytest.mark.parametrize("case", sorted(CASES))
def test_toml_golden_is_the_json_golden(case):
    """TOML carries the JSON document, minus nulls (TOML has none)."""
    from cuda4amd.report.toml_format import _without_nulls

    document = json.loads((GOLDENS / case / "scan.json").read_text(encoding="utf-8"))
    assert tomllib.loads((GOLDENS / case / "scan.toml").read_text(encoding="utf-8")) == _without_nulls(document)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_golden_json_validates_against_the_documented_schema(case):
    document = json.loads((GOLDENS / case / "scan.json").read_text(encoding="utf-8"))
    errors = sorted(strict_validator().iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])


@pytest.mark.parametrize("fmt", sorted(REPORTS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_saved_json_report_renders_to_the_same_goldens(case, fmt):
    """`cuda4amd report scan.json --format X` needs no re-scan: every format from the saved JSON is the golden."""
    from cuda4amd.report.diff import load_report

    document = load_report(GOLDENS / case / "scan.json")
    assert render_case(fmt, document) == (GOLDENS / case / REPORTS[fmt]).read_text(encoding="utf-8")


@pytest.mark.parametrize("case", GRAPH_CASES)
def test_graph_from_a_saved_report_is_the_scan_graph(case):
    from cuda4amd.report import graph_export
    from cuda4amd.report.diff import load_report

    graph = graph_export.from_document(load_report(GOLDENS / case / "scan.json"))
    assert graph_export.dumps(graph, "json") == (GOLDENS / case / "graph.json").read_text(encoding="utf-8")


def command_of(fmt: str, text: str) -> str:
    if fmt == "json":
        return json.loads(text)["command"]
    if fmt == "toml":
        return tomllib.loads(text)["command"]
    return text.split("<summary>Command line</summary>\n\n```\n", 1)[1].split("\n```", 1)[0]


def with_command(fmt: str, golden: str, command: str) -> str:
    """The golden report as the CLI writes it: with `command` added (JSON, TOML: last; Markdown: its section)."""
    from cuda4amd.report import render

    document = json.loads((GOLDENS / "demo-tool" / "scan.json").read_text(encoding="utf-8"))
    if fmt in ("json", "toml", "markdown"):
        return render(fmt, {**document, "command": command})
    return golden


@pytest.mark.parametrize("fmt", ["json", "markdown", "toml"])
def test_the_cli_writes_the_goldens(tmp_path, monkeypatch, fmt):
    """`cuda4amd scan <absolute path> --host none -o scan.X`, run from the repository: the golden file."""
    import cuda4amd.report.redact
    from cuda4amd.cli import main

    monkeypatch.setattr(cuda4amd.report.redact, "private_strings", golden_private)
    monkeypatch.chdir(REPO)
    out = tmp_path / REPORTS[fmt]
    graph = tmp_path / "graph.graphml"
    result = CliRunner().invoke(main, ["scan", str(FIXTURES / "demo" / "Tool"), "--host", "none", "-o", str(out),
                                       "--graph", str(graph)])
    assert result.exit_code == 3, result.output
    written = out.read_text(encoding="utf-8")
    # the CLI records its command line (a library scan has none): the golden is the report without it
    assert written == with_command(fmt, (GOLDENS / "demo-tool" / REPORTS[fmt]).read_text(encoding="utf-8"),
                                   command_of(fmt, written))
    assert command_of(fmt, written).startswith("cuda4amd scan <target> --host none -o ")
    assert graph.read_text(encoding="utf-8") == (GOLDENS / "demo-tool" / "graph.graphml").read_text(encoding="utf-8")


def test_the_report_command_renders_the_markdown_golden(tmp_path, monkeypatch):
    import cuda4amd.report.redact
    from cuda4amd.cli import main

    monkeypatch.setattr(cuda4amd.report.redact, "private_strings", golden_private)
    result = CliRunner().invoke(main, ["report", str(GOLDENS / "pe" / "scan.json"), "--format", "markdown"])
    assert result.exit_code == 3, result.output  # the saved verdict's exit status, as for scan
    assert result.output == (GOLDENS / "pe" / "scan.md").read_text(encoding="utf-8")
    out = tmp_path / "again.toml"
    result = CliRunner().invoke(main, ["report", str(GOLDENS / "pe" / "scan.json"), "-o", str(out), "--graph", str(tmp_path / "g.dot")])
    assert out.read_text(encoding="utf-8") == (GOLDENS / "pe" / "scan.toml").read_text(encoding="utf-8")
    assert (tmp_path / "g.dot").read_text(encoding="utf-8") == (GOLDENS / "pe" / "graph.dot").read_text(encoding="utf-8")
    assert "report written to" in result.output and "graph written to" in result.output
