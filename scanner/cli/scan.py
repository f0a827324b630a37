"""`cuda4amd scan` (and `scan --fix`): the verdict for a folder, venv, binary or wheel."""
from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cuda4amd.cli.output import (
    color_option,
    command_line,
    echo_to_width,
    emit,
    exit_zero_option,
    fail,
    graph_format_option,
    output_format,
    quiet_option,
    rules_error_text,
    verbosity,
    verdict_status,
)
from cuda4amd.report import FORMATS

if TYPE_CHECKING:
    import networkx as nx
    from click.shell_completion import CompletionItem

    from cuda4amd.cli.progress import TerminalProgress

HOST_FILE_HINT = ("--host FILE takes a host report, the JSON of `cuda4amd doctor --format json` (recorded ones: "
                  "fixtures/zluda/hosts/ and tests/goldens/hosts/ in the source tree); raw probe output such as "
                  "rocminfo or hipInfo text (fixtures/host/) is not a host report")


def shipped_release_tags() -> list[str]:
    """The ZLUDA release tags the shipped rules have: the names in rules/zluda/ (a folder listing, nothing parsed)."""
    import os

    import cuda4amd.ruledata  # the rules folder as a package: an empty __init__

    # rules.releases' ZLUDA_DIR and RELEASES_FILE, spelled out, and os.listdir rather than importlib.resources:
    # the loader costs ~20 ms and importlib.resources ~10 ms of `scan --help`;
    # tests/unit/test_cli_output.py checks that these tags are the loader's
    folder = os.path.join(next(iter(cuda4amd.ruledata.__path__)), "zluda")
    return sorted(name[: -len(".toml")] for name in os.listdir(folder)
                  if name.endswith(".toml") and name != "releases.toml")


class ReleaseOption(click.Option):
    """--zluda-release: its help lists the shipped tags, read when the help is shown (not at start-up);
    not a click.Choice, because a --rules folder may add releases (the rules loader checks the tag)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = ("Judge against this ZLUDA release's function tables (default: the rules' default); "
                     f"shipped: {', '.join(shipped_release_tags())}.")
        return super().get_help_record(ctx)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        from click.shell_completion import CompletionItem

        return [CompletionItem(tag) for tag in shipped_release_tags() if tag.startswith(incomplete)]


@click.command()
@click.argument("target")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)),
              help="Output format (default: from -o's extension, else console).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, allow_dash=True),
              help="Write the report to FILE (.json, .toml, .md or .txt; - for stdout); the terminal gets the verdict "
                   "and counts.")
@click.option("--graph", "graph_file", type=click.Path(dir_okay=False, writable=True), metavar="FILE",
              help="Also write the dependency graph to FILE (.graphml, .dot or .json).")
@click.option("--no-redact", is_flag=True,
              help="Keep the home folder, user and host names in file reports and in JSON/TOML/Markdown on stdout "
                   "(redacted by default).")
@click.option("--zluda-release", cls=ReleaseOption, metavar="TAG")
@click.option("--engine", type=click.Choice(["fast", "lief"]), default="fast", show_default=True,
              help="Binary reader; lief is the slower reference.")
@click.option("--search-path", "search_paths", multiple=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Extra folder to resolve libraries in (like PATH); repeatable.")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False, exists=True), metavar="DIR",
              help="Extra rules folder; repeatable.")
@click.option("--follow-links", is_flag=True,
              help="Also walk links to folders outside TARGET (reported and skipped by default).")
@click.option("--host", "host", default="auto", show_default=True, metavar="auto|none|FILE.json",
              help="Judge for this machine (auto), for no machine (none), or for a host report made by `cuda4amd "
                   "doctor --format json`.")
@click.option("--jobs", type=click.IntRange(min=1), metavar="N",
              help="Processes reading binaries (default: one per usable core, one with --engine lief; 1: read in this "
                   "process).")
@click.option("--no-cache", is_flag=True,
              help="Read every file again instead of reusing the per-user cache of file facts (docs/performance.md).")
@click.option("-v", "--verbose", is_flag=True,
              help="Show each binary's CUDA dependencies and its stub or missing functions.")
@quiet_option
@color_option
@exit_zero_option
@click.option("--fix", is_flag=True,
              help="Then install and link ZLUDA for what can run (shows the plan and asks first; see docs/fix.md).")
@click.option("--dry-run", is_flag=True, help="With --fix: show the plan only.")
@click.option("-y", "--yes", is_flag=True, help="With --fix: do not ask before applying the plan.")
@click.option("--mode", type=click.Choice(["launcher", "place"]), default="launcher", show_default=True,
              help="With --fix: write launchers (application untouched) or place ZLUDA's files next to the binaries.")
@click.option("--zluda", "zluda_path", type=click.Path(exists=True), metavar="PATH",
              help="With --fix: a local ZLUDA archive or folder instead of the pinned download.")
@click.option("--sha256", metavar="HEX", help="With --fix --zluda: the sha256 the archive (or folder tree) must have.")
@click.option("--launchers", "launcher_dir", type=click.Path(file_okay=False, exists=True), metavar="DIR",
              help="With --fix: where to write the launchers (default: the target's .cuda4amd folder).")
def scan(target: str, fmt: str | None, output: str | None, graph_file: str | None, no_redact: bool,
         zluda_release: str | None, engine: str, search_paths: tuple[str, ...], rule_dirs: tuple[str, ...],
         follow_links: bool, host: str, jobs: int | None, no_cache: bool, verbose: bool, quiet: bool, color: str,
         fix: bool, dry_run: bool, yes: bool, mode: str, zluda_path: str | None, sha256: str | None,
         launcher_dir: str | None, exit_zero: bool) -> None:
    """Scan TARGET (a folder, a venv, a binary, or a .whl/.zip) and give the verdict.

    Exit status: 0 ready or no CUDA, 3 partial, 4 blocked, 2 usage or input error;
    with --fix, the fix's status (docs/exit-status.md).
    """
    verbosity(quiet, verbose)
    fmt = output_format(fmt, output)
    graph_format_option(graph_file)
    if not fix and (dry_run or yes or zluda_path or sha256 or launcher_dir or mode != "launcher"):
        raise click.UsageError("--dry-run, --yes, --mode, --zluda, --sha256 and --launchers go with --fix")
    if fix and exit_zero:
        raise click.UsageError("--exit-zero does not go with --fix: the status is the fix's (docs/exit-status.md)")
    from cuda4amd.host import HostReportError
    from cuda4amd.report.document import build
    from cuda4amd.rules.validate import RulesError
    from cuda4amd.scan.discover import TargetError
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    options = ScanOptions(
        target=target,
        zluda_release=zluda_release,
        engine=engine,
        search_paths=tuple(Path(p) for p in search_paths),
        rule_dirs=tuple(Path(p) for p in rule_dirs),
        host=host,
        follow_links=follow_links,
        jobs=jobs,
        cache=not no_cache,
    )
    try:
        with _progress(quiet) as progress:
            result = run_scan(options, progress)
    except RulesError as exc:
        fail(rules_error_text(exc))
    except HostReportError as exc:
        fail(f"{exc}\n  {HOST_FILE_HINT}")
    except TargetError as exc:
        fail(str(exc))

    document = build(result)
    typed = command_line()
    if typed:
        document["command"] = typed  # redacted with the rest below
    redactor = None
    if not no_redact and (output or graph_file or fmt != "console"):
        from cuda4amd.report.redact import Redactor

        redactor = Redactor(target_root=result.target.path)
    shared = redactor.document(document) if redactor else document  # what leaves the terminal

    def make_graph() -> nx.DiGraph:
        from cuda4amd.report import graph_export

        graph = graph_export.attributed(result.graph, document)
        return graph_export.redacted(graph, redactor) if redactor else graph

    emit(document, shared, fmt=fmt, output=output, graph_file=graph_file, make_graph=make_graph, verbose=verbose,
         quiet=quiet, color=color)
    if not fix:
        sys.exit(verdict_status(result.verdict, exit_zero))

    from cuda4amd.cli.progress import download_bar
    from cuda4amd.fix.apply import fix_target

    with download_bar() as download_progress:
        outcome = fix_target(
            result,
            mode=mode,
            zluda_release=zluda_release,
            zluda_path=zluda_path,
            sha256=sha256,
            dry_run=dry_run,
            assume_yes=yes,
            host=None,
            echo=echo_to_width,
            confirm=None,
            rules=result.rules,
            launcher_dir=launcher_dir,
            rescan=None,
            progress=download_progress,
        )
    if outcome.status == "applied" and host == "auto" and outcome.plan is not None:
        from cuda4amd.evidence.after_fix import smoke_after_fix

        smoke_after_fix(outcome.plan, echo=echo_to_width)
    sys.exit(outcome.exit_code)



def _progress(quiet: bool) -> AbstractContextManager[TerminalProgress | None]:
    """A progress bar on stderr while reading, only when stderr is a terminal and -q was not given (as ruff)."""
    from contextlib import nullcontext

    if quiet or not sys.stderr.isatty():
        return nullcontext(None)
    from cuda4amd.cli.progress import TerminalProgress

    return TerminalProgress()
