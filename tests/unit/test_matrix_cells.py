"""The matrix treats every string of a report as untrusted, and keeps a package's platforms apart."""
from __future__ import annotations

import csv
import io

from cuda4amd.evidence.matrix import fold, to_csv, to_markdown


def scan(target: str, formats: list[str], verdict: str = "ready", packages: list[dict] | None = None) -> dict:  # formats as reports write them (PE, ELF)
    binaries = [{"path": f"b{i}", "format": f, "verdict": verdict} for i, f in enumerate(formats)]
    return {"schema": "cuda4amd.scan/1", "target": {"path": target}, "verdict": verdict, "binaries": binaries,
            "packages": packages or [], "zluda": {"release": "v6"}}


def test_a_package_s_windows_and_linux_reports_are_rows_of_their_own():
    windows = scan("w", ["PE"], "ready", [{"name": "cupy", "version": "14", "verdict": "ready", "binaries": ["b0"]}])
    linux = scan("l", ["ELF"], "blocked", [{"name": "cupy", "version": "14", "verdict": "blocked",
                                            "binaries": ["b0"]}])
    rows = fold([("w.json", windows), ("l.json", linux)])["rows"]
    assert [(r["application"], r["platform"], r["verdict"]) for r in rows] == [
        ("cupy", "linux", "blocked"), ("cupy", "windows", "ready")]
    assert "| platform |" in to_markdown(fold([("w.json", windows)]))


def test_a_hostile_name_is_no_link_and_no_html_in_markdown():
    name = "[Get the fixed build](https:evil.example) <img src=x onerror=alert(1)>"
    shown = to_markdown(fold([("r.json", scan(name, ["pe"]))]))
    row = next(line for line in shown.splitlines() if "Get the fixed build" in line)
    assert "](" not in row.replace("\\](", "") and "<img" not in row and "&lt;img" in row


def test_csv_defuses_tab_and_cr_and_writes_one_line_per_row():
    for name in ("\t=1+1", "\r=1+1", "a\rb", "=1+1"):
        text = to_csv(fold([("r.json", scan(name, ["pe"]))]))
        rows = list(csv.reader(io.StringIO(text)))
        assert len(rows) == 2 and "\r" not in text
        cell = rows[1][0]
        assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r"), repr(cell)
