"""Where a report goes: a file, stdout, a graph file; shared by `scan` and `report`.

Only click and the standard library at import time, so the CLI starts fast.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Callable, NoReturn

import click

from cuda4amd.report import GRAPH_FORMATS

# Exit statuses, documented in docs/exit-status.md.
EXIT_FOR_VERDICT = {"ready": 0, "no-cuda": 0, "partial": 3, "blocked": 4}
EXIT_USAGE = 2


def fail(message: str) -> NoReturn:
    click.echo(f"cuda4amd: {message}", err=True)
    sys.exit(EXIT_USAGE)


def output_format(fmt: str | None, output: str | None) -> str:
    """--format, else the format -o's extension names, else console."""
    from cuda4amd.report import format_for_path

    if fmt is None and output:
        fmt = format_for_path(output)
        if fmt is None:
            raise click.UsageError(f"cannot tell the format from {output!r}: use .json, .toml, .md or .txt, or --format")
    return fmt or "console"


def graph_format_option(graph_file: str | None) -> str | None:
    """The format of a --graph FILE, from its extension (a usage error when unknown)."""
    if not graph_file:
        return None
    graph_format = GRAPH_FORMATS.get(Path(graph_file).suffix.lower())
    if graph_format is None:
        raise click.UsageError(f"cannot tell the graph format from {graph_file!r}: use .graphml, .dot or .json")
    return graph_format


def write(path: str, content: str) -> None:
    try:
        Path(path).write_text(content, encoding="utf-8")
    except OSError as exc:
        fail(f"{path}: cannot write: {exc.strerror or exc}")


def emit(
    document: dict,
    shared: dict,
    *,
    fmt: str,
    output: str | None,
    graph_file: str | None,
    make_graph: Callable[[], object] | None,
    verbose: bool,
) -> None:
    """Write the report: `shared` (redacted unless asked not to) to files and
    machine formats on stdout, `document` to the user's own terminal."""
    from cuda4amd.report import render

    if output:
        write(output, render(fmt, shared, verbose=verbose))
    graph_format = graph_format_option(graph_file)
    if graph_file and graph_format and make_graph is not None:
        from cuda4amd.report import graph_export

        write(graph_file, graph_export.dumps(make_graph(), graph_format))
    if not output and fmt != "console":
        click.echo(render(fmt, shared), nl=False)
    else:
        click.echo(render("console", document, verbose=verbose, color=sys.stdout.isatty(), width=terminal_width()), nl=False)
        if output:
            click.echo(f"report written to {output}")
    if graph_file:
        click.echo(f"graph written to {graph_file}", err=not output and fmt != "console")


def terminal_width() -> int:
    return max(80, shutil.get_terminal_size((120, 24)).columns)
