"""Where a report goes: a file, stdout (`-`), a graph file; the options every command shares.

Only click and the standard library at import time, so the CLI starts fast.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from cuda4amd.report import GRAPH_FORMATS

if TYPE_CHECKING:
    from cuda4amd.rules.validate import RulesError

#: a click command function, before or after other option decorators
CommandFunction = TypeVar("CommandFunction", bound=Callable[..., Any])

# Exit statuses, documented in docs/exit-status.md.
#: `incomplete` (9): a file could not be read, so no verdict of ready/partial/no-cuda is vouched for
EXIT_FOR_VERDICT = {"ready": 0, "no-cuda": 0, "partial": 3, "blocked": 4, "incomplete": 9}
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of standard output went away, as git reports it
STDOUT = "-"
COMMAND_LINE = "cuda4amd.command_line"  # click Context.meta key: the arguments as typed


def command_line() -> str | None:
    """The command line as typed (shell-quoted), for the report; None outside the `cuda4amd` group."""
    import shlex

    ctx = click.get_current_context(silent=True)
    words = ctx.meta.get(COMMAND_LINE) if ctx is not None else None
    return shlex.join(str(w) for w in words) if words else None


def fail(message: str) -> NoReturn:
    click.echo(f"cuda4amd: {message}", err=True)
    sys.exit(EXIT_USAGE)


def rules_error_text(exc: RulesError) -> str:
    """A RulesError for the user: a file of the shipped rules is named inside the package
    (``cuda4amd rules: zluda/v6.toml``), never by where the package is installed."""
    from importlib.resources import files

    shipped = Path(str(files("cuda4amd.ruledata")))
    try:
        inside = Path(exc.path).resolve().relative_to(shipped.resolve())
    except ValueError:
        return str(exc)
    where = "cuda4amd's rules" + (f" ({inside.as_posix()})" if str(inside) != "." else "")
    return f"{where}: {exc.message}"


def color_option(function: CommandFunction) -> CommandFunction:
    return click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
                        help="Colour on the console: auto follows the terminal, NO_COLOR and FORCE_COLOR.")(function)


def exit_zero_option(function: CommandFunction) -> CommandFunction:
    """--exit-zero (ruff's name): the report without failing a CI job on `partial` or `blocked`."""
    return click.option("--exit-zero", is_flag=True,
                        help="Exit 0 whatever the verdict (usage and input errors still exit 2).")(function)


def verdict_status(verdict: object, exit_zero: bool = False) -> int:
    """The exit status for a verdict (docs/exit-status.md); 0 for any with --exit-zero."""
    return 0 if exit_zero else EXIT_FOR_VERDICT.get(str(verdict), 0)


def quiet_option(function: CommandFunction) -> CommandFunction:
    return click.option("-q", "--quiet", is_flag=True, help="Print the verdict line only.")(function)


def output_format(fmt: str | None, output: str | None, extensions: dict[str, str] | None = None,
                  default: str = "console") -> str:
    """--format, else the format -o's extension names, else `default`; an unknown extension is a usage error."""
    from cuda4amd.report import EXTENSIONS

    known_extensions = EXTENSIONS if extensions is None else extensions
    if output and output != STDOUT:
        named = known_extensions.get(Path(output).suffix.lower())
        if fmt is None and named is None:
            known = ", ".join(sorted(known_extensions))
            raise click.UsageError(f"cannot tell the format from {output!r}: use {known} (or - for stdout), "
                                   "or --format")
        if fmt is not None and named is not None and named != fmt:
            # allowed (a pipeline may want JSON in a .txt), but never silently
            click.echo(f"cuda4amd: warning: writing {fmt} into {output}, whose extension says {named}", err=True)
        fmt = fmt or named
    return fmt or default


def echo_to_width(message: str = "", **options: Any) -> None:
    """click.echo, each line wrapped to the terminal's width (COLUMNS, else the terminal, else 80) with a
    hanging indent; a word longer than the width (a path) is kept whole, so that it can be copied."""
    import shutil
    import textwrap

    width = shutil.get_terminal_size((80, 24)).columns
    lines = []
    for line in message.split("\n"):
        indent = " " * (len(line) - len(line.lstrip(" ")))
        lines.append(line if len(line) <= width else textwrap.fill(
            line, width, subsequent_indent=indent + "    ", break_long_words=False, break_on_hyphens=False))
    click.echo("\n".join(lines), **options)


def verbosity(quiet: bool, verbose: bool) -> None:
    """-q and -v together: a usage error, not one of them silently winning."""
    if quiet and verbose:
        raise click.UsageError("-q/--quiet and -v/--verbose contradict each other: give one")


def graph_format_option(graph_file: str | None) -> str | None:
    """The format of a --graph FILE, from its extension (a usage error when unknown)."""
    if not graph_file:
        return None
    graph_format = GRAPH_FORMATS.get(Path(graph_file).suffix.lower())
    if graph_format is None:
        raise click.UsageError(f"cannot tell the graph format from {graph_file!r}: use .graphml, .dot or .json")
    return graph_format


def write(path: str, content: str) -> None:
    """Write `content` to the file `path`, or to stdout when `path` is `-`."""
    if path == STDOUT:
        click.echo(content, nl=False)
        return
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
    quiet: bool = False,
    color: str = "auto",
) -> None:
    """Write the report: `shared` (redacted unless asked not to) to files and
    machine formats on stdout, `document` to the user's own terminal.

    With -o FILE the terminal gets the verdict and the counts only (-q: the
    verdict line); with -o - or a --format other than console, stdout gets
    the report and nothing else.
    """
    from cuda4amd.report import render
    from cuda4amd.report.console import show, terminal

    to_stdout = output == STDOUT or (not output and fmt != "console")
    if output and output != STDOUT:
        write(output, render(fmt, shared, verbose=verbose))
    graph_format = graph_format_option(graph_file)
    if graph_file and graph_format and make_graph is not None:
        from cuda4amd.report import graph_export

        write(graph_file, graph_export.dumps(make_graph(), graph_format))
    if to_stdout and fmt != "console":
        click.echo(render(fmt, shared), nl=False)
    else:
        console = terminal(color=color)
        show(console, document, verbose=verbose, quiet=quiet, summary_only=bool(output) and output != STDOUT)
        if output and output != STDOUT and not quiet:
            click.echo(f"report written to {output}")
    if graph_file and graph_file != STDOUT and not quiet:
        click.echo(f"graph written to {graph_file}", err=to_stdout and fmt != "console")
