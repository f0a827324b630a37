"""`cuda4amd report` (render a saved JSON report again) and `cuda4amd diff` (compare two).

Only click is imported at module level; everything else inside the commands,
so `cuda4amd --help` stays fast.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from cuda4amd.cli.output import EXIT_FOR_VERDICT, emit, fail, graph_format_option, output_format, write
from cuda4amd.report import FORMATS


def _load(path: str) -> dict:
    from cuda4amd.report.diff import ReportFileError, load_report

    try:
        document = load_report(path)
    except ReportFileError as exc:
        fail(str(exc))
    return document


@click.command("report")
@click.argument("saved", metavar="SCAN.json", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)),
              help="Output format (default: from -o's extension, else console).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report to FILE (.json, .toml, .md or .txt).")
@click.option("--graph", "graph_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also write the dependency graph (.graphml, .dot or .json).")
@click.option("--no-redact", is_flag=True, help="Keep home folder, user and host names in file reports.")
@click.option("-v", "--verbose", is_flag=True, help="Console: show each binary's CUDA dependencies.")
def report(saved, fmt, output, graph_file, no_redact, verbose) -> None:
    """Render SCAN.json (a saved `cuda4amd scan --format json` report) again, without re-scanning.

    Exit status as for scan: 0 ready or no CUDA, 3 partial, 4 blocked, 2 usage or input error.
    """
    fmt = output_format(fmt, output)
    graph_format_option(graph_file)
    document = _load(saved)
    if no_redact:
        shared = document
    else:
        from cuda4amd.report.redact import Redactor

        shared = Redactor().document(document)

    def make_graph():
        from cuda4amd.report import graph_export

        return graph_export.from_document(shared)

    emit(document, shared, fmt=fmt, output=output, graph_file=graph_file, make_graph=make_graph, verbose=verbose)
    sys.exit(EXIT_FOR_VERDICT.get(str(document.get("verdict")), 0))


@click.command("diff")
@click.argument("before", metavar="BEFORE.json", type=click.Path(dir_okay=False))
@click.argument("after", metavar="AFTER.json", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]),
              help="Output format (default: from -o's extension, else text).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the differences to FILE (.txt, .md or .json).")
@click.option("--no-redact", is_flag=True, help="Keep home folder, user and host names.")
def diff(before, after, fmt, output, no_redact) -> None:
    """What changed between two saved JSON reports: verdicts, routes, dependencies.

    For example before and after installing ZLUDA, or between two versions of
    an application. Exit status 0 (the differences are the answer), 2 on usage
    or input errors.
    """
    from cuda4amd.report.diff import RENDERERS, compare

    if fmt is None and output:
        fmt = {".md": "markdown", ".markdown": "markdown", ".json": "json", ".txt": "text"}.get(Path(output).suffix.lower())
        if fmt is None:
            raise click.UsageError(f"cannot tell the format from {output!r}: use .txt, .md or .json, or --format")
    fmt = fmt or "text"
    first, second = _load(before), _load(after)
    if not no_redact:
        from cuda4amd.report.redact import Redactor

        redactor = Redactor()
        first, second = redactor.document(first), redactor.document(second)
    text = RENDERERS[fmt](compare(first, second))
    if output:
        write(output, text)
        click.echo(f"written to {output}")
    else:
        click.echo(text, nl=False)
