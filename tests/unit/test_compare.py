"""`cuda4amd diff` and `cuda4amd report`: saved reports read back and compared."""
from __future__ import annotations

import json
import re
import shutil

import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from markdown_it import MarkdownIt
from test_goldens import GOLDENS

from cuda4amd.report.diff import (
    ReportFileError,
    check_report,
    compare,
    load_report,
    render_json,
    render_markdown,
    render_text,
)


def run(*args):
    from cuda4amd.cli import main

    return CliRunner().invoke(main, list(map(str, args)))


def golden(case: str) -> dict:
    return load_report(GOLDENS / case / "scan.json")


def test_a_report_against_itself_has_no_differences():
    diff = compare(golden("pe"), golden("pe"))
    assert diff["changed"] is False and diff["schema"] == "cuda4amd.diff/1"
    assert "no differences in verdicts, routes or dependencies" in render_text(diff)
    assert "No differences" in render_markdown(diff)


def test_another_zluda_release_changes_routes_and_functions(scan):
    before = scan(FIXTURES / "pe", zluda_release="v5")
    after = scan(FIXTURES / "pe")
    diff = compare(before, after)
    assert diff["zluda"] == {"before": "v5", "after": "v6-preview.69"}
    assert diff["verdict"] is None  # partial both times
    changed = {b["path"]: b for b in diff["binaries"]["changed"]}
    mixed = changed["blas_mixed.dll"]
    assert mixed["verdict"] == {"before": "blocked", "after": "degraded", "direction": "better"}
    (cublas,) = mixed["dependencies"]["changed"]
    assert cublas["name"] == "cublas64_12.dll"
    assert cublas["route"] == {"before": "blocked", "after": "redirect"}
    assert cublas["symbols"]["stub"] == {"added": ["cublasDgemm_v2", "cublasSaxpy_v2"], "removed": []}
    assert diff["summary"]["blocked"] == {"before": 8, "after": 5}
    text = render_text(diff)
    assert "blas_mixed.dll: blocked → degraded (better)" in text
    assert "cublas64_12.dll: route: blocked → redirect; replacement: — → cublas64_12.dll" in text


@pytest.fixture
def versions(tmp_path):
    """Two versions of an application: a library rebuilt worse, a plugin renamed, one dropped, one added."""
    old, new = tmp_path / "v1", tmp_path / "v2"
    shutil.copytree(FIXTURES / "demo" / "Tool", old)
    shutil.copy(FIXTURES / "pe" / "dnn_user.dll", old / "plugins" / "extra_v1.dll")
    shutil.copy(FIXTURES / "pe" / "fft_user.dll", old / "fft_user.dll")
    shutil.copytree(FIXTURES / "demo" / "Tool", new)
    shutil.copy(FIXTURES / "pe" / "blas_legacy.dll", new / "render.dll")  # now imports functions ZLUDA lacks
    shutil.copy(FIXTURES / "pe" / "dnn_user.dll", new / "plugins" / "extra_v2.dll")
    shutil.copy(FIXTURES / "pe" / "solver_user.dll", new / "solver_user.dll")
    return old, new


def test_two_versions_of_an_application(scan, versions):
    before, after = (scan(v) for v in versions)
    diff = compare(before, after)
    assert diff["verdict"] is None  # partial both times: plugins/denoise.dll stays ready
    assert diff["summary"]["blocked"] == {"before": 1, "after": 4}
    assert diff["binaries"]["added"] == [{"path": "solver_user.dll", "verdict": "blocked"}]
    assert diff["binaries"]["removed"] == [{"path": "fft_user.dll", "verdict": "degraded"}]
    changed = {b["path"]: b for b in diff["binaries"]["changed"]}
    assert changed["plugins/extra_v2.dll"] == {"path": "plugins/extra_v2.dll", "renamed_from": "plugins/extra_v1.dll"}
    render = changed["render.dll"]
    assert render["verdict"] == {"before": "degraded", "after": "blocked", "direction": "worse"}
    (cublas,) = render["dependencies"]["changed"]
    assert cublas["symbols"]["missing"] == {"added": ["cublasSgemm", "cublasXtCreate"], "removed": []}
    assert changed["tool.exe"]["verdict"]["after"] == "blocked"  # it loads render.dll

    text = render_text(diff)
    assert "  + solver_user.dll (blocked)" in text and "  - fft_user.dll (degraded)" in text
    assert "  plugins/extra_v1.dll → plugins/extra_v2.dll" in text
    markdown = render_markdown(diff)
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    assert markdown.startswith("# cuda4amd diff: partial, with changes")
    assert "<li>added <code>solver_user.dll</code> (<strong>blocked</strong>)</li>" in html
    assert "<code>render.dll</code>: <strong>degraded → blocked (worse)</strong>" in html
    assert json.loads(render_json(diff)) == diff


def test_a_found_library_shows_how_and_where(tmp_path, scan):
    """Before and after making a library available (what --fix or an install does): resolution changes."""
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(FIXTURES / "pe" / "chain" / "chain_app.exe", app)
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "missing_vendor.dll").write_bytes(b"")
    diff = compare(scan(app), scan(app, search_paths=(vendor,)))
    (entry,) = diff["binaries"]["changed"]
    dep = next(d for d in entry["dependencies"]["changed"] if d["name"] == "missing_vendor.dll")
    assert dep["how"] == {"before": "unresolved", "after": "search-path"}
    assert dep["resolved"]["before"] is None and dep["resolved"]["after"].endswith("missing_vendor.dll")
    assert "dropped reason" not in render_markdown(diff)  # notes are not reasons


def test_host_and_package_changes():
    before, after = golden("demo-tool"), golden("demo-tool-rx6700xt")
    diff = compare(before, after)
    assert diff["host"] == {"before": None,
                            "after": "AMD Radeon RX 6700 XT (gfx1031), HIP SDK 6.4, ZLUDA v6/v6-preview.69/v7-preview.9 installed"}
    assert diff["verdict"]["direction"] == "worse"
    p1 = {**before, "packages": [{"name": "app", "version": "1.0", "verdict": "ready", "framework": None, "reasons": [], "advice": [], "binaries": []}]}
    p2 = {**before, "packages": [{"name": "App", "version": "2.0", "verdict": "partial", "framework": None, "reasons": [], "advice": ["x"], "binaries": []}]}
    (change,) = compare(p1, p2)["packages"]["changed"]
    assert change == {"name": "App", "version": {"before": "1.0", "after": "2.0"},
                      "verdict": {"before": "ready", "after": "partial", "direction": "worse"}, "advice": {"added": ["x"], "removed": []}}


def test_loading_checks_what_it_reads(tmp_path):
    with pytest.raises(ReportFileError, match="not a JSON report"):
        (tmp_path / "x.json").write_text("{")
        load_report(tmp_path / "x.json")
    with pytest.raises(ReportFileError, match=re.escape("schema 'cuda4amd.host/1'")):
        check_report({"schema": "cuda4amd.host/1"})
    with pytest.raises(ReportFileError, match="made by another cuda4amd version"):
        check_report({"schema": "cuda4amd.scan/4"})
    with pytest.raises(ReportFileError, match="missing binaries"):
        check_report({"schema": "cuda4amd.scan/2", "target": {}, "verdict": "ready", "zluda": {}, "summary": {}, "errors": []})
    with pytest.raises(ReportFileError, match="cannot read"):
        load_report(tmp_path / "absent.json")
    # fields added to the schema later read back as empty
    old = {k: v for k, v in golden("elf").items() if k not in ("host", "packages", "basis")}
    assert check_report(old)["packages"] == [] and check_report(old)["host"] is None


def test_diff_command(tmp_path):
    before, after = GOLDENS / "demo-tool" / "scan.json", GOLDENS / "demo-tool-rx6700xt" / "scan.json"
    result = run("diff", before, after)
    assert result.exit_code == 0, result.output
    assert "verdict: partial → blocked (worse)" in result.output
    assert "host: — → AMD Radeon RX 6700 XT (gfx1031)" in result.output
    out = tmp_path / "diff.md"
    assert run("diff", before, after, "-o", out).exit_code == 0
    assert out.read_text().startswith("# cuda4amd diff: partial → blocked")
    assert json.loads(run("diff", before, after, "--format", "json").output)["verdict"]["after"] == "blocked"
    assert run("diff", before, after, "-o", tmp_path / "diff.xyz").exit_code == 2
    assert run("diff", before, tmp_path / "absent.json").exit_code == 2
    (tmp_path / "host.json").write_text((GOLDENS / "hosts" / "win-rx6700xt-hipsdk64.json").read_text())
    bad = run("diff", before, tmp_path / "host.json")
    assert bad.exit_code == 2 and "not a cuda4amd scan report" in bad.output


def test_report_command(tmp_path):
    saved = GOLDENS / "demo-tool" / "scan.json"
    console = run("report", saved)
    assert console.exit_code == 3 and console.output.startswith("PARTIAL  some of it can run through ZLUDA")
    assert run("report", saved, "--format", "json").output == saved.read_text()
    assert run("report", saved, "-o", tmp_path / "x.yaml").exit_code == 2
    assert run("report", saved, "--graph", tmp_path / "g.png").exit_code == 2
    from_toml = run("report", GOLDENS / "demo-tool" / "scan.toml", "--format", "json")
    assert from_toml.exit_code == 3 and json.loads(from_toml.output) == json.loads(saved.read_text())
    # unread files and nothing CUDA read: incomplete (docs/exit-status.md, rule 3)
    assert run("report", GOLDENS / "corrupt" / "scan.json", "--format", "markdown").exit_code == 9
