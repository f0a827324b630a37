"""The `cuda4amd` command. Thin: options in, library call, rendered report out.

Heavy modules (rich, networkx, the readers) are imported inside the commands
so `cuda4amd --help` starts fast.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__

# Exit statuses, documented in docs/exit-status.md.
EXIT_FOR_VERDICT = {"ready": 0, "no-cuda": 0, "partial": 3, "blocked": 4}
EXIT_USAGE = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cuda4amd")
def main() -> None:
    """Will this CUDA software run on an AMD GPU through ZLUDA? Answers before you install anything."""


@main.command()
@click.argument("target")
@click.option("--format", "fmt", type=click.Choice(["console", "json", "toml", "markdown"]), help="Output format (default: from -o's extension, else console).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="Write the report to FILE (.json, .toml, .md or .txt).")
@click.option("--graph", "graph_file", type=click.Path(dir_okay=False, writable=True), metavar="FILE", help="Also write the dependency graph to FILE (.graphml, .dot or .json).")
@click.option("--no-redact", is_flag=True, help="Keep the home folder, user and host names in file reports and in JSON/TOML/Markdown on stdout (redacted by default).")
@click.option("--zluda-release", metavar="TAG", help="Judge against this ZLUDA release's function tables (default: the rules' default).")
@click.option("--engine", type=click.Choice(["fast", "lief"]), default="fast", show_default=True, help="Binary reader; lief is the slower reference.")
@click.option("--search-path", "search_paths", multiple=True, type=click.Path(file_okay=False), metavar="DIR", help="Extra folder to resolve libraries in (like PATH); repeatable.")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False, exists=True), metavar="DIR", help="Extra rules folder; repeatable.")
@click.option("--host", "host", default="auto", show_default=True, metavar="auto|none|FILE.json", help="Judge for this machine (auto), for no machine (none), or for a host report made by `cuda4amd doctor --format json`.")
@click.option("-v", "--verbose", is_flag=True, help="Show each binary's CUDA dependencies and its stub or missing functions.")
def scan(target, fmt, output, graph_file, no_redact, zluda_release, engine, search_paths, rule_dirs, host, verbose) -> None:
    """Scan TARGET (a folder, a venv, a binary, or a .whl/.zip) and give the verdict.

    Exit status: 0 ready or no CUDA, 3 partial, 4 blocked, 2 usage or input error.
    """
    from .discover import TargetError
    from .host import HostReportError
    from .report import format_for_path, render
    from .report.document import build
    from .report_commands import graph_format_option
    from .rules import RulesError
    from .scan import ScanOptions, run_scan

    if fmt is None and output:
        fmt = format_for_path(output)
        if fmt is None:
            raise click.UsageError(f"cannot tell the format from {output!r}: use .json, .toml, .md or .txt, or --format")
    fmt = fmt or "console"
    graph_format = graph_format_option(graph_file)
    options = ScanOptions(
        target=target,
        zluda_release=zluda_release,
        engine=engine,
        search_paths=tuple(Path(p) for p in search_paths),
        rule_dirs=tuple(Path(p) for p in rule_dirs),
        host=host,
    )
    try:
        with _progress() as progress:
            result = run_scan(options, progress)
    except (TargetError, RulesError, HostReportError) as exc:
        click.echo(f"cuda4amd: {exc}", err=True)
        sys.exit(EXIT_USAGE)

    document = build(result)
    redactor = None
    if not no_redact and (output or graph_file or fmt != "console"):
        from .redact import Redactor

        redactor = Redactor(target_root=result.target.path)
    shared = redactor.document(document) if redactor else document  # what leaves the terminal
    if output:
        Path(output).write_text(render(fmt, shared, verbose=verbose), encoding="utf-8")
    if graph_file:
        from .report import graph_export

        graph = graph_export.attributed(result.graph, document)
        Path(graph_file).write_text(graph_export.dumps(graph_export.redacted(graph, redactor) if redactor else graph,
                                                       graph_format), encoding="utf-8")
    if not output and fmt != "console":
        click.echo(render(fmt, shared), nl=False)
    else:
        click.echo(render("console", document, verbose=verbose, color=sys.stdout.isatty(), width=_width()), nl=False)
        if output:
            click.echo(f"report written to {output}")
    if graph_file:
        click.echo(f"graph written to {graph_file}", err=not output and fmt != "console")
    sys.exit(EXIT_FOR_VERDICT[result.verdict])


def _register_commands() -> None:
    from .host.doctor import doctor
    from .report_commands import diff, report

    main.add_command(doctor)
    main.add_command(report)
    main.add_command(diff)


_register_commands()


def _width() -> int:
    import shutil

    return max(80, shutil.get_terminal_size((120, 24)).columns)


def _progress():
    """A progress bar on stderr while reading, only when stderr is a terminal."""
    from contextlib import nullcontext

    if not sys.stderr.isatty():
        return nullcontext(None)
    from .progress import TerminalProgress

    return TerminalProgress()


if __name__ == "__main__":
    main()
