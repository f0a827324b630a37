"""`cuda4amd report` (render a saved JSON or TOML report again) and `cuda4amd diff` (compare two).

Only click is imported at module level; everything else inside the commands,
so `cuda4amd --help` stays fast.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from cuda4amd.cli.output import (
    STDOUT,
    color_option,
    emit,
    exit_zero_option,
    fail,
    graph_format_option,
    output_format,
    quiet_option,
    verbosity,
    verdict_status,
    write,
)
from cuda4amd.report import FORMATS

if TYPE_CHECKING:
    import networkx as nx


DIFF_EXTENSIONS = {".md": "markdown", ".markdown": "markdown", ".json": "json", ".txt": "console"}
EXIT_DIFFERENT = 1  # diff --exit-code: the verdicts changed, as `git diff --exit-code` says "differences"


def _load(path: str) -> dict:
    from cuda4amd.report.diff import ReportFileError, load_report

    try:
        document = load_report(path)
    except ReportFileError as exc:
        fail(str(exc))
    return document


@click.command("report")
@click.argument("saved", metavar="SCAN.json|SCAN.toml|-", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)),
              help="Output format (default: from -o's extension, else console).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write the report to FILE (.json, .toml, .md or .txt; - for stdout).")
@click.option("--graph", "graph_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also write the dependency graph (.graphml, .dot or .json).")
@click.option("--no-redact", is_flag=True, help="Keep home folder, user and host names in file reports.")
@click.option("-v", "--verbose", is_flag=True, help="Console: show each binary's CUDA dependencies.")
@quiet_option
@color_option
@exit_zero_option
def report(saved: str, fmt: str | None, output: str | None, graph_file: str | None, no_redact: bool, verbose: bool,
           quiet: bool, color: str, exit_zero: bool) -> None:
    """Render a saved report (`cuda4amd scan -o scan.json` or `.toml`; `-` reads stdin) again, without re-scanning.

    Exit status as for scan: 0 ready or no CUDA, 3 partial, 4 blocked, 2 usage or input error.
    """
    verbosity(quiet, verbose)
    fmt = output_format(fmt, output)
    graph_format_option(graph_file)
    document = _load(saved)
    if no_redact:
        shared = document
    else:
        from cuda4amd.report.redact import Redactor

        shared = Redactor().document(document)

    def make_graph() -> nx.DiGraph:
        from cuda4amd.report import graph_export

        return graph_export.from_document(shared)

    emit(document, shared, fmt=fmt, output=output, graph_file=graph_file, make_graph=make_graph, verbose=verbose,
         quiet=quiet, color=color)
    sys.exit(verdict_status(document.get("verdict"), exit_zero))


@click.command("diff")
@click.argument("before", metavar="BEFORE", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("after", metavar="AFTER", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(["console", "markdown", "json"]),
              help="Output format (default: from -o's extension, else console).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write the differences to FILE (.txt, .md or .json; - for stdout).")
@click.option("--no-redact", is_flag=True, help="Keep home folder, user and host names.")
@click.option("-v", "--verbose", is_flag=True,
              help="List every function name that changed state (default: the first 10 of each list).")
@click.option("--exit-code", is_flag=True,
              help="Exit with 1 when a verdict changed (the overall one, a package's or a binary's), else 0.")
@quiet_option
def diff(before: str, after: str, fmt: str | None, output: str | None, no_redact: bool, verbose: bool,
         exit_code: bool, quiet: bool) -> None:
    """What changed between two saved reports (JSON or TOML; one may be `-`, stdin): verdicts, routes, dependencies.

    For example before and after installing ZLUDA, or between two versions of
    an application. Exit status 0 (the differences are the answer; with
    --exit-code, 1 when a verdict changed), 2 on usage or input errors.
    """
    from cuda4amd.report.diff import RENDERERS, compare, verdicts_changed

    verbosity(quiet, verbose)
    fmt = output_format(fmt, output, DIFF_EXTENSIONS, default="console")
    if before == STDOUT and after == STDOUT:
        raise click.UsageError("only one of BEFORE and AFTER can be - (stdin)")
    first, second = _load(before), _load(after)
    if not no_redact:
        from cuda4amd.report.redact import Redactor

        redactor = Redactor()
        first, second = redactor.document(first), redactor.document(second)
    differences = compare(first, second)
    names = {"names": 1_000_000} if verbose else {}

    def shown(name: str) -> str:
        renderer = RENDERERS["text" if name == "console" else name]  # the console's text, as scan's
        return renderer(differences, **names) if name != "json" else renderer(differences)
    if quiet and fmt == "console" and (not output or output == STDOUT):
        text = RENDERERS["text"](differences).splitlines()
        click.echo(text[-1] if not differences["changed"] else differences_line(differences))
    elif output and output != STDOUT:
        write(output, shown(fmt))
        if not quiet:
            click.echo(f"written to {output}")
    else:
        click.echo(shown(fmt), nl=False)
    if exit_code and verdicts_changed(differences):
        sys.exit(EXIT_DIFFERENT)


def differences_line(differences: dict) -> str:
    """diff -q: one line, the overall verdict and how many binaries changed."""
    b, a = differences["before"], differences["after"]
    changed = sum(1 for entry in differences["binaries"]["changed"] if entry.get("verdict"))
    moved = len(differences["binaries"]["added"]) + len(differences["binaries"]["removed"])
    return (f"verdict: {b['verdict']} → {a['verdict']}; {changed} binaries changed verdict, "
            f"{moved} added or removed")
