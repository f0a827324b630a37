"""`cuda4amd report` (render a saved JSON report again) and `cuda4amd diff` (compare two).

Only click is imported at module level; everything else inside the commands,
so `cuda4amd --help` stays fast.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

EXIT_FOR_VERDICT = {"ready": 0, "no-cuda": 0, "partial": 3, "blocked": 4}
EXIT_USAGE = 2


def _fail(message: str) -> None:
    click.echo(f"cuda4amd: {message}", err=True)
    sys.exit(EXIT_USAGE)


def _load(path: str) -> dict:
    from .compare import ReportFileError, load_report

    try:
        return load_report(path)
    except ReportFileError as exc:
        _fail(str(exc))


def _write(path: str, content: str) -> None:
    try:
        Path(path).write_text(content, encoding="utf-8")
    except OSError as exc:
        _fail(f"{path}: cannot write: {exc.strerror or exc}")


@click.command("report")
@click.argument("saved", metavar="SCAN.json", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["console", "json", "toml", "markdown"]),
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
    from .report import render

    fmt = _format(fmt, output)
    graph_format = graph_format_option(graph_file)
    document = _load(saved)
    if no_redact:
        shared = document
    else:
        from .redact import Redactor

        shared = Redactor().document(document)
    if output:
        _write(output, render(fmt, shared, verbose=verbose))
    if graph_file:
        from .report import graph_export

        _write(graph_file, graph_export.dumps(graph_export.from_document(shared), graph_format))
    if not output and fmt != "console":
        click.echo(render(fmt, shared), nl=False)
    else:
        click.echo(render("console", document, verbose=verbose, color=sys.stdout.isatty(), width=_width()), nl=False)
    if output:
        click.echo(f"report written to {output}")
    if graph_file:
        click.echo(f"graph written to {graph_file}")
    sys.exit(EXIT_FOR_VERDICT.get(document.get("verdict"), 0))


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
    from .compare import RENDERERS, compare

    if fmt is None and output:
        fmt = {".md": "markdown", ".markdown": "markdown", ".json": "json", ".txt": "text"}.get(Path(output).suffix.lower())
        if fmt is None:
            raise click.UsageError(f"cannot tell the format from {output!r}: use .txt, .md or .json, or --format")
    fmt = fmt or "text"
    first, second = _load(before), _load(after)
    if not no_redact:
        from .redact import Redactor

        redactor = Redactor()
        first, second = redactor.document(first), redactor.document(second)
    text = RENDERERS[fmt](compare(first, second))
    if output:
        _write(output, text)
        click.echo(f"written to {output}")
    else:
        click.echo(text, nl=False)


def _format(fmt: str | None, output: str | None) -> str:
    from .report import format_for_path

    if fmt is None and output:
        fmt = format_for_path(output)
        if fmt is None:
            raise click.UsageError(f"cannot tell the format from {output!r}: use .json, .toml, .md or .txt, or --format")
    return fmt or "console"


GRAPH_FORMATS = {".graphml": "graphml", ".dot": "dot", ".gv": "dot", ".json": "json"}  # as report.graph_export.FORMATS


def graph_format_option(graph_file: str | None) -> str | None:
    """The format of a --graph FILE, from its extension (a usage error when unknown)."""
    if not graph_file:
        return None
    graph_format = GRAPH_FORMATS.get(Path(graph_file).suffix.lower())
    if graph_format is None:
        raise click.UsageError(f"cannot tell the graph format from {graph_file!r}: use .graphml, .dot or .json")
    return graph_format


def _width() -> int:
    import shutil

    return max(80, shutil.get_terminal_size((120, 24)).columns)
