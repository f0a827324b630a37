"""`cuda4amd trace explain PATH`: what a ZLUDA trace says, in the report's terms (docs/evidence.md)."""
from __future__ import annotations

import json
import sys

import click

from cuda4amd.cli.output import fail, write


@click.group()
def trace() -> None:
    """Read ZLUDA traces (zluda_trace's log folders)."""


@trace.command("explain")
@click.argument("path", type=click.Path(exists=True))
@click.option("--report", "report_file", type=click.Path(exists=True, dir_okay=False), metavar="SCAN.json",
              help="A scan report of the program: names the scanned binaries that import each failed function.")
@click.option("--zluda-release", metavar="TAG", help="Judge functions by this release's tables (default: the "
              "report's release, else the rules' default).")
@click.option("--format", "fmt", type=click.Choice(["console", "json", "markdown"]), default=None,
              help="Output format (default: from -o's extension, else console).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the explanation to FILE.")
@click.option("--no-redact", is_flag=True, help="Keep home folder, user and host names in files, JSON and Markdown.")
def explain(path: str, report_file: str | None, zluda_release: str | None, fmt: str | None,
            output: str | None, no_redact: bool) -> None:
    """Explain the ZLUDA trace at PATH (a ZLUDA_LOG_DIR folder, one run's folder,
    its log.txt, or a .zip / .tar of them): failed calls by library and function
    with ZLUDA's state for each, the last kernel launch and its module, PTX that
    ZLUDA rejected, and what to do. Exit status: 0, or 2 when PATH is no trace."""
    from cuda4amd.rules.ruleset import load_rules
    from cuda4amd.rules.validate import RulesError
    from cuda4amd.trace import render
    from cuda4amd.trace.explain import explain as explain_trace
    from cuda4amd.trace.read import LOG_NAME, TraceError, open_trace

    if fmt is None:
        fmt = {"json": "json", "md": "markdown"}.get((output or "").rsplit(".", 1)[-1].lower(), "console") \
            if output and "." in output else "console"
    from cuda4amd.evidence.matrix import MAX_REPORT_BYTES
    from cuda4amd.evidence.record import read_json_file

    scan = None
    if report_file:
        try:
            scan = read_json_file(report_file, MAX_REPORT_BYTES)
        except (OSError, ValueError, RecursionError) as exc:
            fail(f"{report_file}: not a readable JSON report: {exc}")
        if isinstance(scan, dict) and isinstance(scan.get("scan"), dict):
            scan = scan["scan"]  # a verify or after-fix report holds the scan
        if not isinstance(scan, dict) or not str(scan.get("schema", "")).startswith("cuda4amd.scan/"):
            fail(f"{report_file}: not a cuda4amd scan report")
    try:
        rules = load_rules()
        tag = zluda_release or ((scan or {}).get("zluda") or {}).get("release") or rules.default_release
        release = rules.release(tag)
        runs = open_trace(path)
    except (RulesError, TraceError) as exc:
        fail(str(exc))
    for run in runs:  # what the bounded reader left out (trace.read): said, not silently dropped
        if run.cut:
            click.echo(f"cuda4amd: {run.where}/{LOG_NAME}: {run.cut} more lines past the first {run.lines} "
                       f"were counted, not read: the explanation covers those lines only", err=True)
        for name, why in sorted(run.unreadable.items()):
            click.echo(f"cuda4amd: {run.where}/{name} not read ({why})", err=True)
    doc = explain_trace(runs, release=release, scan=scan, path=str(path))
    if (output or fmt != "console") and not no_redact:  # what leaves the terminal names no home, user or host
        from cuda4amd.report.redact import Redactor

        redactor = Redactor()
        doc = redactor.data(doc)
        doc["path"] = redactor.target_path(str(path))
    content = json.dumps(doc, indent=1, ensure_ascii=False) + "\n" if fmt == "json" else \
        render.markdown(doc) if fmt == "markdown" else render.text(doc)
    if output:
        write(output, content)
        click.echo(f"explanation written to {output}")
    else:
        click.echo(content, nl=False)
    sys.exit(0)
