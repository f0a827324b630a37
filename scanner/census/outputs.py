"""The census's results as the project's compatibility matrix (cuda4amd.evidence.matrix: Markdown, CSV, JSON)
and a static page (cuda4amd.census.page), written into the census folder."""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cuda4amd.census.task import FAILURE_SCHEMA, Task, write_atomic
from cuda4amd.evidence.matrix import fold, load_reports, to_csv, to_markdown

#: what each output is called in the census folder
FILES = {"markdown": "matrix.md", "csv": "matrix.csv", "json": "matrix.json", "html": "index.html"}
#: a wheel's file name: distribution-version(-build)?-python-abi-platform.whl (PEP 427)
WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-[^-]+)?-[^-]+-[^-]+-(?P<platform>[^-]+)\.whl$")


def _platform_of_tag(tag: str) -> str:
    platforms = {"windows" for part in tag.split(".") if part.startswith("win")}
    platforms |= {"linux" for part in tag.split(".") if "linux" in part}
    return ", ".join(sorted(platforms))


def failure_row(record: dict[str, Any], source: str) -> dict[str, Any]:
    """A matrix row for an artifact the scan could not read: named from its file name, its reason as its verdict."""
    artifact = str(record.get("artifact", "?"))
    match = WHEEL_NAME.match(artifact)
    name, version, platform = (match["name"], match["version"], _platform_of_tag(match["platform"])) if match \
        else (artifact, "", "")
    zluda = record["zluda"] if isinstance(record.get("zluda"), dict) else {}
    return {"application": name, "version": version, "platform": platform, "zluda": str(zluda.get("release", "")),
            "gfx": "", "verdict": f"unreadable: {record.get('reason', '')}", "evidence": "", "probes": [],
            "reports": 1, "sources": [source]}


def census_matrix(tasks: Sequence[Task], outdir: Path, problems: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
    """The matrix of every task's report, a failed artifact a row with its reason; `problems` (specs that named
    no artifact) are the matrix's skipped entries."""
    paths = [outdir / t.relative() for t in tasks if (outdir / t.relative()).is_file()]
    good, skipped = load_reports(paths)
    for _, scan in good:
        # reports write a binary's format as "PE"/"ELF" (report/document.py), the matrix's platform table keys
        # them "pe"/"elf" (evidence/matrix.py PLATFORM_OF_FORMAT): lower-cased here so that a package's Windows
        # and Linux wheels stay two rows; a no-op once the two agree
        for binary in scan.get("binaries") or []:
            if isinstance(binary, dict) and isinstance(binary.get("format"), str):
                binary["format"] = binary["format"].lower()
    failures = []
    for entry in skipped:
        path = Path(entry["source"])
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a damaged report stays in `skipped`, with the matrix's reason
        if isinstance(record, dict) and record.get("schema") == FAILURE_SCHEMA:
            failures.append((entry, failure_row(record, path.name)))
    failed_entries = [id(entry) for entry, _ in failures]
    skipped = [s for s in skipped if id(s) not in failed_entries] + list(problems)
    matrix = fold(good, skipped)
    matrix["rows"] = sorted(matrix["rows"] + [row for _, row in failures],
                            key=lambda r: tuple(str(r[c]).lower() for c in ("application", "version", "platform",
                                                                              "zluda", "gfx")))
    return matrix


def report_links(tasks: Sequence[Task]) -> dict[str, str]:
    """A report's file name (the matrix's `sources`) → its path under the census folder, for the page's links."""
    return {Path(t.relative()).name: t.relative() for t in tasks}


def write_outputs(matrix: dict[str, Any], tasks: Sequence[Task], outdir: Path, title: str = "cuda4amd census"
                  ) -> dict[str, Path]:
    from cuda4amd.census.page import render_page

    texts = {"markdown": to_markdown(matrix), "csv": to_csv(matrix),
             "json": json.dumps(matrix, indent=1, ensure_ascii=False) + "\n",
             "html": render_page(matrix, report_links(tasks), title)}
    written = {}
    for kind, text in texts.items():
        write_atomic(outdir / FILES[kind], text)
        written[kind] = outdir / FILES[kind]
    return written
