"""`cuda4amd matrix`: golden scan reports and a verify report folded into one matrix."""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import cuda4amd.evidence.matrix as matrix_module
from cuda4amd.cli import main
from cuda4amd.evidence.matrix import fold, load_reports, to_csv, to_markdown

GOLDENS = Path(__file__).parents[1] / "goldens"


def verify_report(tmp_path: Path) -> Path:
    """A verify report of the demo tool: the rx6700xt golden scan with observed evidence."""
    scan = json.loads((GOLDENS / "demo-tool-rx6700xt" / "scan.json").read_text())
    scan["evidence"]["through"] = "zluda"
    for fam in scan["evidence"]["families"].values():
        fam.update(level="functional-pass", probe="pass")
    scan["evidence"]["binaries"] = dict.fromkeys(scan["evidence"]["binaries"], "functional-pass")
    path = tmp_path / "verify.json"
    path.write_text(json.dumps({"schema": "cuda4amd.verify/1", "scan": scan}))
    return path


def test_fold_keys_verdicts_and_the_highest_evidence(tmp_path):
    files = [GOLDENS / "demo-tool" / "scan.json", GOLDENS / "demo-tool-rx6700xt" / "scan.json",
             verify_report(tmp_path), GOLDENS / "pe" / "scan.json"]
    good, skipped = load_reports(files)
    assert len(good) == 4 and not skipped
    rows = {(r["application"], r["gfx"]): r for r in fold(good)["rows"]}
    plain = rows[("Tool", "")]
    assert plain["zluda"] == "v6-preview.69" and plain["evidence"] == "static" and plain["reports"] == 1
    judged = rows[("Tool", "gfx1031")]
    assert judged["reports"] == 2 and judged["evidence"] == "functional-pass"  # the verify report's, the higher
    assert "blas pass" in judged["probes"]


def test_packages_are_rows_of_their_own(tmp_path):
    scan = {"schema": "cuda4amd.scan/1", "target": {"path": "/x/venv", "kind": "venv"}, "verdict": "partial",
            "zluda": {"release": "v6"}, "host": None, "binaries": [],
            "packages": [{"name": "torch", "version": "2.7.1", "verdict": "ready", "binaries": ["a.so"]},
                         {"name": "numpy", "version": "2.3", "verdict": "no-cuda", "binaries": []}],
            "evidence": {"binaries": {"a.so": "linked"}, "families": {}}}
    p = tmp_path / "venv.json"
    p.write_text(json.dumps(scan))
    rows = fold(load_reports([p])[0])["rows"]
    assert [(r["application"], r["version"], r["evidence"]) for r in rows] == [("torch", "2.7.1", "linked")]


def test_disagreeing_reports_show_each_verdict(tmp_path):
    a = json.loads((GOLDENS / "demo-tool" / "scan.json").read_text())
    b = dict(a, verdict="blocked")
    paths = []
    for i, doc in enumerate((a, a, b)):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(doc))
    [row] = fold(load_reports(paths)[0])["rows"]
    assert row["verdict"] == f"{a['verdict']} ×2, blocked ×1"  # noqa: RUF001 - the matrix counts with U+00D7


def test_bad_files_are_skipped_with_a_reason(tmp_path):
    (tmp_path / "x.json").write_text("{not json")
    (tmp_path / "y.json").write_text(json.dumps({"schema": "cuda4amd.host/1"}))
    good, skipped = load_reports([tmp_path / "x.json", tmp_path / "y.json"])
    assert not good and [s["source"].endswith(n) for s, n in zip(skipped, ("x.json", "y.json"), strict=True)] == [True, True]
    result = CliRunner().invoke(main, ["matrix", str(tmp_path / "x.json")])
    assert result.exit_code == 2 and "none of the files" in result.output


def test_cli_writes_markdown_json_and_csv(tmp_path):
    md, js, cs = tmp_path / "m.md", tmp_path / "m.json", tmp_path / "m.csv"
    result = CliRunner().invoke(main, ["matrix", str(GOLDENS / "demo-tool" / "scan.json"), str(verify_report(tmp_path)),
                                       "-o", str(md), "-o", str(js), "-o", str(cs)])
    assert result.exit_code == 0, result.output
    assert md.read_text().startswith("# Compatibility matrix") and "| Tool |" in md.read_text()
    assert json.loads(js.read_text())["schema"] == "cuda4amd.matrix/1"
    rows = list(csv.DictReader(io.StringIO(cs.read_text())))
    assert {r["gfx"] for r in rows} == {"", "gfx1031"} and rows[0]["zluda"] == "v6-preview.69"


def test_csv_cells_never_start_a_formula():
    matrix = {"levels": [], "skipped": [], "rows": [{"application": "=HYPERLINK(1)", "version": "", "platform": "", "zluda": "",
                                                     "gfx": "", "verdict": "ready", "evidence": "static",
                                                     "probes": [], "reports": 1}]}
    assert "'=HYPERLINK(1)" in to_csv(matrix) and "\\|" not in to_markdown(matrix)


def test_the_issue_form_asks_for_the_report_file():
    form = (Path(__file__).parents[2] / ".github" / "ISSUE_TEMPLATE" / "compat-report.yml").read_text()
    assert "id: report" in form and "cuda4amd verify APP --run -o verify.json" in form
    assert "required: true" in form.split("id: report")[1].split("- type:")[0]


def test_hostile_nesting_is_skipped(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200000 + "]" * 200000)
    good, skipped = load_reports([deep])
    assert not good and "not a readable JSON report" in skipped[0]["reason"]


def test_list_cells_never_start_a_formula_and_markdown_shows_no_control_characters():
    matrix = {"levels": [], "skipped": [{"source": "x\x1b[2J.json", "reason": "bad"}],
              "rows": [{"application": "app\x07", "version": "", "platform": "", "zluda": "", "gfx": "", "verdict": "ready",
                        "evidence": "static", "probes": ["=cmd|x", "pass"], "reports": 1}]}
    assert "'=cmd|x;pass" in to_csv(matrix)
    shown = to_markdown(matrix)
    assert "\x1b" not in shown and "\x07" not in shown and "\\x1b" in shown


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_a_fifo_or_an_oversized_file_is_skipped_not_waited_on(tmp_path, monkeypatch):
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"schema": "cuda4amd.scan/1", "binaries": [], "pad": "x" * 4096}))
    monkeypatch.setattr(matrix_module, "MAX_REPORT_BYTES", 1024)
    good, skipped = load_reports([fifo, big])
    assert not good and [s["source"] for s in skipped] == [str(fifo), str(big)]
    assert "not a regular file" in skipped[0]["reason"] and "more than 1024 bytes" in skipped[1]["reason"]
