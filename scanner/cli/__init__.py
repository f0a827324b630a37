"""The `cuda4amd` command. Thin: options in, library call, rendered report out.

One module per command family: `scan` (with --fix), `report` (report, diff),
`fix` (run, undo), `doctor`, `verify`, `trace`, `matrix`, `schema`, `census`; `output` is where reports go.

Heavy modules (rich, networkx, the readers) are imported inside the commands
so `cuda4amd --help` starts fast.
"""
from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from cuda4amd import __version__
from cuda4amd.cli.output import COMMAND_LINE, EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE

#: allocations between two runs of the youngest generation's collection (CPython's default: 700)
GC_ALLOCATIONS = 200_000
#: the collector's thresholds while a command runs (the older generations as rarely, relative to it, as by default)
GC_THRESHOLD = (GC_ALLOCATIONS, 30, 30)

#: each command: the module that defines it and its name there, imported when the command is
#: looked up (click's pattern for lazily loaded subcommands): `scan` does not load `fix`'s modules
COMMANDS = {
    "scan": ("cuda4amd.cli.scan", "scan"),
    "doctor": ("cuda4amd.cli.doctor", "doctor"),
    "report": ("cuda4amd.cli.report", "report"),
    "diff": ("cuda4amd.cli.report", "diff"),
    "run": ("cuda4amd.cli.fix", "run"),
    "undo": ("cuda4amd.cli.fix", "undo"),
    "verify": ("cuda4amd.cli.verify", "verify"),
    "trace": ("cuda4amd.cli.trace", "trace"),
    "matrix": ("cuda4amd.cli.matrix", "matrix"),
    "schema": ("cuda4amd.cli.schema", "schema"),
    "census": ("cuda4amd.cli.census", "census"),
}


class _Cuda4amd(click.Group):
    """The group: its commands loaded on first use, streams that never fail on a symbol,
    and Ctrl-C as exit status 130."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)
        import importlib

        command = getattr(importlib.import_module(where[0]), where[1])
        assert isinstance(command, click.Command)
        return command

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        ctx = super().make_context(info_name, list(args), parent=parent, **extra)
        ctx.meta[COMMAND_LINE] = ["cuda4amd", *args]  # for the report's `command`, as the user would type it
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        from cuda4amd.report.console import install_ascii_fallback

        install_ascii_fallback(sys.stdout, sys.stderr)
        # A scan builds hundreds of thousands of objects that live until it ends (facts, graph,
        # report) and leaves few cycles: at the default threshold (700 allocations) the collector ran
        # 100 times in a re-scan of a 13k-file tree, 23 ms of 350, and 36 ms of a warm scan's main
        # process (docs/performance.md). mypy runs its collector as rarely for the same reason
        # (mypy/build.py, build()). Set for the command only: a caller that invokes it in its own
        # process (click's test runner) gets its setting back.
        threshold = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLD)
        try:
            try:
                return super().invoke(ctx)
            finally:
                sys.stdout.flush()  # here, where a closed pipe can still be told apart from a bug
        except BrokenPipeError:
            # the reader went away (`cuda4amd scan x | head -2`): end as git does, with 128 + SIGPIPE; the
            # streams are pointed at devnull so that flushing them at exit does not fail a second time
            _quiet_streams()
            raise click.exceptions.Exit(EXIT_BROKEN_PIPE) from None
        except PermissionError as error:
            # a file or folder this user may not read or write (a target of mode 000, its .cuda4amd/, an -o
            # file): an input error the user can act on, not a bug; the commands that change files roll back
            # or journal before it comes here (fix/apply.py)
            click.echo(f"cuda4amd: {error.filename or 'a file'}: permission denied", err=True)
            raise click.exceptions.Exit(EXIT_USAGE) from None
        finally:
            gc.set_threshold(*threshold)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        """click's main, except that Ctrl-C is exit status 130 wherever it comes: in a command, or while
        the options are parsed and the command's modules imported (click's own handling says `Aborted!`
        and exits 1 there, core.py `Command.main`)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            try:
                status = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            except click.exceptions.Abort as abort:
                if not isinstance(abort.__cause__, KeyboardInterrupt):
                    raise
                raise KeyboardInterrupt from None
        except KeyboardInterrupt:
            click.echo("\ncuda4amd: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except click.ClickException as error:
            error.show()
            sys.exit(error.exit_code)
        # with standalone_mode off click returns what ends the command: an exit status (ctx.exit, click's
        # Exit) or the callback's value, which is None for every command here
        sys.exit(status if isinstance(status, int) else 0)


def _quiet_streams() -> None:
    """Standard output and error to devnull, after the reader of a pipe has gone (the Python docs'
    "Note on SIGPIPE", library/signal.html)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # not a real file (a test runner's buffer)
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


def entry_point() -> None:
    """The process's command line (the console script, ``python -m cuda4amd``): :func:`main`, then exit.

    What a command built (a scan's facts, graph and report: hundreds of thousands of objects) dies
    with the process. The interpreter's shutdown would go over it twice: the collector's last pass
    (30 ms of a 0.43 s re-scan of a 13k-file tree), then freeing it object by object once the
    command's frames go (exit 18-23 → 11 ms for that re-scan, 34-43 → 14-16 ms for a scan of the
    device's venv: docs/performance.md). Neither is needed: the OS takes the whole heap back at once. So the
    frames that the exit's traceback holds (and with them what they reference) are kept by a list
    that holds itself, and the heap is frozen (gc.freeze): the collector skips frozen objects, and
    a cycle is never freed by reference counts. atexit handlers, weakref finalizers and the flushing
    of the standard streams run as before; only the objects of the command's frames are not
    finalized (none of them holds an open file: reports and caches are written and closed before).
    Only here: a caller that runs commands in its own process (click's test runner, a program that
    imports ``main``) keeps collecting and freeing them.

    The collector's threshold is the command's (GC_THRESHOLD) for the whole process, so that
    :meth:`_Cuda4amd.invoke` has nothing to restore: restored to CPython's 700 after the command, the
    next allocation collected every object made since the last collection (up to GC_ALLOCATIONS of
    them: the report and what built it), 13-18 ms between a re-scan's report and its exit here.
    """
    gc.set_threshold(*GC_THRESHOLD)
    try:
        main()
    except SystemExit as exit:
        kept: list[object] = [exit.__traceback__]
        kept.append(kept)
        raise
    finally:
        gc.freeze()


@click.group(cls=_Cuda4amd, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cuda4amd")
def main() -> None:
    """Will this CUDA software run on an AMD GPU through ZLUDA? Answers before you install anything.

    Shell completion (bash, zsh, fish): see "Shell completion" in the README,
    e.g. eval "$(_CUDA4AMD_COMPLETE=bash_source cuda4amd)".
    """
