"""`cuda4amd matrix REPORT...`: one compatibility matrix from many reports (docs/evidence.md)."""
from __future__ import annotations

import sys

import click

from cuda4amd.cli.output import fail, write

FORMATS = {".md": "markdown", ".markdown": "markdown", ".json": "json", ".csv": "csv"}


@click.command()
@click.argument("reports", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "outputs", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the matrix to FILE (.md, .json or .csv); repeatable.")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json", "csv"]), default="markdown",
              show_default=True, help="Format on stdout (without -o).")
@click.option("--no-redact", is_flag=True, help="Keep home folder, user and host names of the reports.")
def matrix(reports: tuple[str, ...], outputs: tuple[str, ...], fmt: str, no_redact: bool) -> None:
    """Fold scan, verify and after-fix reports (JSON) into one compatibility matrix:
    application or distribution \N{MULTIPLICATION SIGN} version \N{MULTIPLICATION SIGN} ZLUDA release
    \N{MULTIPLICATION SIGN} gfx \N{MULTIPLICATION SIGN} verdict \N{MULTIPLICATION SIGN} evidence
    level. Files that are no such report are listed as skipped.

    Exit status: 0, or 2 when no file was a usable report.
    """
    import json
    from pathlib import Path

    from cuda4amd.evidence.matrix import fold, load_reports, to_csv, to_markdown
    from cuda4amd.report.escape import visible

    render = {"markdown": to_markdown, "csv": to_csv,
              "json": lambda m: json.dumps(m, indent=1, ensure_ascii=False) + "\n"}
    for out in outputs:
        if Path(out).suffix.lower() not in FORMATS:
            raise click.UsageError(f"cannot tell the format from {out!r}: use .md, .json or .csv")
    good, skipped = load_reports(reports)
    if not no_redact:  # a report saved with --no-redact names its user: the matrix does not pass it on
        from cuda4amd.report.redact import Redactor

        redactor = Redactor()
        good = [(redactor.text(name), redactor.document(scan)) for name, scan in good]
        skipped = [redactor.data(s) for s in skipped]
    for s in skipped:
        click.echo(visible(f"cuda4amd: skipped {s['source']}: {s['reason']}"), err=True)
    if not good:
        fail("none of the files is a cuda4amd scan, verify or after-fix report")
    folded = fold(good, skipped)
    for out in outputs:
        write(out, render[FORMATS[Path(out).suffix.lower()]](folded))
        click.echo(f"matrix written to {out} ({len(folded['rows'])} rows from {len(good)} reports)")
    if not outputs:
        click.echo(render[fmt](folded), nl=False)
    sys.exit(0)
