"""`cuda4amd census SPEC... -o OUTDIR`: many wheels scanned on Dask into one matrix and a page (docs/census.md).

Thin: specs to artifacts (cuda4amd.census.plan), the tasks run (cuda4amd.census.run), the outputs written
(cuda4amd.census.outputs). Dask (the `census` extra) is imported only here, when the command runs.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from cuda4amd.census.run import CensusProgress
from cuda4amd.cli.output import EXIT_USAGE, fail

INSTALL_HINT = 'cuda4amd census needs Dask: pip install "cuda4amd[census]"'


class TerminalCensusProgress(CensusProgress):
    """tasks done/total, bytes scanned and the ETA (by bytes: a task's time grows with its artifact) on stderr."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(TextColumn("census {task.fields[done]}/{task.fields[tasks]} tasks"), BarColumn(),
                             DownloadColumn(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                             console=Console(stderr=True), transient=True)
        self._task: Any = None
        self._done = 0

    def start(self, tasks: int, total_bytes: int, skipped: int) -> None:
        if skipped:
            click.echo(f"census: {skipped} of {tasks + skipped} tasks done already (skipped)", err=True)
        self._bar.start()
        self._task = self._bar.add_task("census", total=total_bytes or None, done=0, tasks=tasks)

    def advance(self, size: int) -> None:
        self._done += 1
        self._bar.update(self._task, advance=size, done=self._done)

    def finish(self) -> None:
        self._bar.stop()


@click.command()
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
@click.option("-o", "--output", "outdir", required=True, type=click.Path(file_okay=False), metavar="OUTDIR",
              help="The census folder: reports (content-addressed), matrix.md/.csv/.json, index.html.")
@click.option("--zluda-release", "releases", multiple=True, metavar="TAG",
              help="A ZLUDA release to judge against; repeatable (default: every shipped one).")
@click.option("--platform", "platforms", multiple=True, metavar="TAG",
              help="For name==version specs: the wheel platform to download (pip's --platform, e.g. win_amd64, "
                   "manylinux_2_28_x86_64); repeatable.")
@click.option("--wheel-cache", type=click.Path(file_okay=False), metavar="DIR",
              help="Where name==version wheels are downloaded (default: OUTDIR/wheels).")
@click.option("--scheduler", metavar="ADDRESS", help="A running Dask scheduler (tcp://HOST:8786) instead of a "
              "LocalCluster; its workers must see the artifacts' paths and OUTDIR.")
@click.option("--workers", type=click.IntRange(min=1), metavar="N",
              help="LocalCluster worker processes (default: one per usable core).")
@click.option("--memory-limit", metavar="SIZE",
              help="Each LocalCluster worker's memory bound, e.g. 4GB (default: the machine's memory / workers); "
                   "a worker past 95 % of it is restarted and its task run again.")
@click.option("--serial", is_flag=True, help="Scan in this process, one artifact after another, without Dask.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary; errors only.")
def census(specs: tuple[str, ...], outdir: str, releases: tuple[str, ...], platforms: tuple[str, ...],
           wheel_cache: str | None, scheduler: str | None, workers: int | None, memory_limit: str | None,
           serial: bool, quiet: bool) -> None:
    """Scan every SPEC (a wheel, a folder of wheels, a requirements file of name==version lines, or
    name==version) for each ZLUDA release, and write the compatibility matrix and a browsable page.
    Re-running skips what is done.

    Exit status: 0, or 2 on a usage error or when Dask is not installed.
    """
    import importlib.util

    if importlib.util.find_spec("distributed") is None:
        click.echo(INSTALL_HINT, err=True)
        sys.exit(EXIT_USAGE)
    if serial and scheduler:
        raise click.UsageError("--serial and --scheduler do not go together")
    if memory_limit is not None:
        from dask.utils import parse_bytes

        try:
            parse_bytes(memory_limit)
        except ValueError:
            raise click.BadParameter(f"not a size: {memory_limit!r} (e.g. 4GB, 512MiB)",
                                     param_hint="--memory-limit") from None
    from cuda4amd.census.outputs import census_matrix, write_outputs
    from cuda4amd.census.plan import plan
    from cuda4amd.census.run import run_census, tasks_of
    from cuda4amd.census.task import rules_version
    from cuda4amd.rules import load_rules

    shipped = load_rules().release_tags
    unknown = [r for r in releases if r not in shipped]
    if unknown:
        raise click.UsageError(f"unknown ZLUDA release {unknown[0]!r}: one of {', '.join(shipped)}")
    out = Path(outdir)
    planned = plan(specs, platforms, Path(wheel_cache) if wheel_cache else out / "wheels")
    if not planned.artifacts and planned.problems:
        for problem in planned.problems:
            click.echo(f"cuda4amd: {problem['source']}: {problem['reason']}", err=True)
        fail("no artifact to scan")
    tasks = tasks_of(planned.artifacts, releases or shipped, rules_version())
    progress = TerminalCensusProgress() if sys.stderr.isatty() and not quiet else None
    try:
        outcome = run_census(tasks, out, scheduler=scheduler, workers=workers, serial=serial,
                             memory_limit=memory_limit, progress=progress)
    except OSError as exc:  # distributed's connect() raises OSError ("Timed out trying to connect to ...")
        fail(f"cannot reach the Dask scheduler {scheduler}: {exc}" if scheduler else f"census: {exc}")
    matrix = census_matrix(tasks, out, planned.problems)
    written = write_outputs(matrix, tasks, out)
    if not quiet:
        click.echo(f"census: {len(planned.artifacts)} artifacts x {len(releases or shipped)} releases = "
                   f"{len(tasks)} tasks: {outcome.scanned} scanned ({outcome.failed} failed), {outcome.skipped} "
                   f"done already, in {outcome.seconds:.1f} s")
        click.echo(f"matrix: {len(matrix['rows'])} rows in {', '.join(str(p) for p in written.values())}")
    sys.exit(0)
