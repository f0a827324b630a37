"""Fold many scan / verify reports into one compatibility matrix.

A row is one (application or distribution, version, platform, ZLUDA release, gfx) cell:

* application: each Python distribution that uses CUDA (a venv or wheel scan's
  ``packages[]``), else the scanned folder or file's name;
* version: the distribution's version ("" for a folder);
* platform: `windows`, `linux` (or both) from the formats of its binaries (PE, ELF): a package's Windows and
  Linux wheels are different software for ZLUDA, and get a row each;
* ZLUDA release: ``zluda.release``; gfx: the judged GPU of the report's host
  (``host.gpus[host.selected_gpu].gfx``), "" for a software-only scan;
* verdict: the distribution's or the report's verdict — when reports of one
  cell disagree, each verdict with its count;
* evidence: the highest level any of the cell's reports shows for it (a
  distribution's or application's level is the lowest of its CUDA binaries'
  levels in that report: cuda4amd.evidence.levels), and the probe statuses seen.

Accepted inputs: scan reports (``cuda4amd.scan/1``), verify reports
(``cuda4amd.verify/1``) and after-fix reports (``cuda4amd.fix-report/1``), as
JSON. Anything else is listed as skipped with the reason; nothing is fatal.
"""
from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from cuda4amd.evidence.levels import LEVELS, rank
from cuda4amd.evidence.record import read_json_file
from cuda4amd.report.escape import visible_document
from cuda4amd.report.inputs import READABLE_SCAN_SCHEMAS, SCAN_SCHEMA, schema_problem
from cuda4amd.report.markdown import text
from cuda4amd.words import counted

__all__ = ["COLUMNS", "SCHEMA", "fold", "load_reports", "to_csv", "to_markdown"]

SCHEMA = "cuda4amd.matrix/1"
MAX_REPORT_BYTES = 64 << 20
COLUMNS = ("application", "version", "platform", "zluda", "gfx", "verdict", "evidence", "probes", "reports")
#: the platform a binary's format runs on
PLATFORM_OF_FORMAT = {"pe": "windows", "elf": "linux"}


def _scan_of(doc: Any) -> dict[str, Any] | None:
    if not isinstance(doc, dict):
        return None
    schema = str(doc.get("schema", ""))
    if schema.startswith("cuda4amd.scan/"):
        return doc
    if schema.startswith(("cuda4amd.verify/", "cuda4amd.fix-report/")) and isinstance(doc.get("scan"), dict):
        return doc["scan"]
    return None


def load_reports(paths: Iterable[str | Path]) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, str]]]:
    """([(source name, scan document)], [{"source", "reason"}] for what was skipped)."""
    good, skipped = [], []
    for path in paths:
        p = Path(path)
        try:
            doc = read_json_file(p, MAX_REPORT_BYTES)
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: hostile nesting
            skipped.append({"source": str(path), "reason": f"not a readable JSON report: {exc}"})
            continue
        scan = _scan_of(doc)
        if scan is None or not isinstance(scan.get("binaries", []), list):
            skipped.append({"source": str(path), "reason": "not a cuda4amd scan, verify or after-fix report"})
            continue
        # the shipped schema's shapes before any field is used (report.inputs)
        problem = schema_problem(scan, "current" if scan.get("schema") == SCAN_SCHEMA else "fold") \
            if scan.get("schema") in READABLE_SCAN_SCHEMAS else "a scan schema this version does not read"
        if problem is not None:
            skipped.append({"source": str(path), "reason": f"not a valid scan report: {problem}"})
            continue
        good.append((p.name, scan))
    return good, skipped


def _gfx(scan: dict[str, Any]) -> str:
    host = scan.get("host")
    if not isinstance(host, dict):
        return ""
    gpus, sel = host.get("gpus") or [], host.get("selected_gpu")
    if isinstance(sel, int) and 0 <= sel < len(gpus) and isinstance(gpus[sel], dict):
        return str(gpus[sel].get("gfx") or "")
    return ""


def _name_of_target(path: str) -> str:
    flavour = PureWindowsPath if "\\" in path else PurePosixPath
    return flavour(path).name or path


def _lowest(levels: Iterable[str]) -> str | None:
    levels = [lv for lv in levels if lv in LEVELS]
    return min(levels, key=rank) if levels else None


def _platform(formats: dict[str, str], paths: Iterable[Any]) -> str:
    """The platforms of the binaries at `paths`, as the formats they are in say ("" when none is known)."""
    return ", ".join(sorted({PLATFORM_OF_FORMAT[f] for f in (formats.get(str(p)) for p in paths)
                             if f in PLATFORM_OF_FORMAT}))


def _claims(scan: dict[str, Any]) -> list[dict[str, Any]]:
    """(application, version, platform, verdict, evidence level) claims of one report."""
    evidence: dict[str, Any] = scan["evidence"] if isinstance(scan.get("evidence"), dict) else {}
    formats = {str(b.get("path")): str(b.get("format")).lower() for b in scan.get("binaries") or [] if isinstance(b, dict)}
    by_binary = evidence.get("binaries") or {}
    probes = sorted(f"{fam} {f.get('probe')}" for fam, f in (evidence.get("families") or {}).items()
                    if isinstance(f, dict) and f.get("probe"))
    packages = [p for p in scan.get("packages") or [] if isinstance(p, dict) and p.get("verdict") != "no-cuda"]
    out = []
    for p in packages:
        level = _lowest(str(by_binary.get(b)) for b in p.get("binaries") or []) or "static"
        out.append({"application": str(p.get("name", "?")), "version": str(p.get("version") or ""),
                    "platform": _platform(formats, p.get("binaries") or []),
                    "verdict": str(p.get("verdict")), "evidence": level, "probes": probes})
    if not packages:
        target: dict[str, Any] = scan["target"] if isinstance(scan.get("target"), dict) else {}
        level = _lowest(by_binary.values()) or "static"
        out.append({"application": _name_of_target(str(target.get("path", "?"))), "version": "",
                    "platform": _platform(formats, formats), "verdict": str(scan.get("verdict")),
                    "evidence": level, "probes": probes})
    return out


def fold(reports: list[tuple[str, dict[str, Any]]], skipped: list[dict[str, str]] | None = None) -> dict[str, Any]:
    cells: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
    for source, scan in reports:
        zluda = str((scan.get("zluda") or {}).get("release") or "") if isinstance(scan.get("zluda"), dict) else ""
        gfx = _gfx(scan)
        for claim in _claims(scan):
            key = (claim["application"], claim["version"], claim["platform"], zluda, gfx)
            cell = cells.setdefault(key, {"verdicts": Counter(), "evidence": None, "probes": set(), "sources": []})
            cell["verdicts"][claim["verdict"]] += 1
            if cell["evidence"] is None or rank(claim["evidence"]) > rank(cell["evidence"]):
                cell["evidence"] = claim["evidence"]
            cell["probes"].update(claim["probes"])
            cell["sources"].append(source)
    rows = []
    ordered = sorted(cells.items(), key=lambda kv: tuple(s.lower() for s in kv[0]))
    for (app, version, platform, zluda, gfx), cell in ordered:
        verdicts = cell["verdicts"]
        verdict = next(iter(verdicts)) if len(verdicts) == 1 else \
            ", ".join(f"{v} \N{MULTIPLICATION SIGN}{n}" for v, n in verdicts.most_common())
        rows.append({"application": app, "version": version, "platform": platform, "zluda": zluda, "gfx": gfx,
                     "verdict": verdict,
                     "evidence": cell["evidence"], "probes": sorted(cell["probes"]), "reports": len(cell["sources"]),
                     "sources": cell["sources"]})
    return {"schema": SCHEMA, "levels": list(LEVELS), "rows": rows, "skipped": list(skipped or [])}


def _cell(value: Any) -> str:
    """Plain Markdown text: names and reasons come from other users' files, so no link, HTML, emphasis or
    table break of theirs comes alive (report/markdown.py `text`)."""
    return text(", ".join(value) if isinstance(value, list) else str(value)) or "—"


def to_markdown(matrix: dict[str, Any]) -> str:
    matrix = visible_document(matrix)  # names and reasons come from users' files
    head = ["application", "version", "platform", "ZLUDA", "gfx", "verdict", "evidence", "probes", "reports"]
    lines = ["# Compatibility matrix", "",
             "What runs through ZLUDA on which AMD GPU, folded from users' cuda4amd reports. *evidence*: the "
             "highest level a report showed (" + " < ".join(matrix["levels"]) + "); *gfx* — means a "
             "software-only scan.", "",
             "| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for r in matrix["rows"]:
        lines.append("| " + " | ".join(_cell(r[c]) for c in COLUMNS) + " |")
    if matrix["skipped"]:
        lines += ["", f"{counted(len(matrix['skipped']), 'file')} skipped:", ""]
        lines += [f"- {_cell(s['source'])}: {_cell(s['reason'])}" for s in matrix["skipped"]]
    return "\n".join(lines) + "\n"


def to_csv(matrix: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in matrix["rows"]:
        writer.writerow([_csv_safe(";".join(r[c]) if isinstance(r[c], list) else str(r[c])) for c in COLUMNS])
    return out.getvalue()


def _csv_safe(value: str) -> str:
    """A cell a spreadsheet will not run as a formula (names come from users' files): one line (a bare CR
    is no line end to the csv module, but is to a spreadsheet), and no leading character of OWASP's
    CSV-injection list (=, +, -, @, TAB, CR)."""
    line = " ".join(value.split())
    return "'" + line if value[:1] in ("=", "+", "-", "@", "\t", "\r") or line[:1] in ("=", "+", "-", "@") else line
