"""`cuda4amd run` and `cuda4amd undo` (docs/fix.md); `scan --fix` is in cuda4amd.cli.scan."""
from __future__ import annotations

import sys

import click

from cuda4amd.fix.commands import EXIT_REFUSED, EXIT_UNDO_INCOMPLETE, EXIT_USAGE, locate, run_program, undo_target


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--target", metavar="DIR", help="The fixed folder (default: found from PROGRAM's folder upwards).")
@click.option("--print-env", is_flag=True, help="Print the environment and the command instead of running it.")
@click.argument("program")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(target: str | None, print_env: bool, program: str, args: tuple[str, ...]) -> None:
    """Run PROGRAM through the ZLUDA link that `cuda4amd scan --fix` installed.

    Sets the plan's environment (HIP_PATH, PATH / LD_LIBRARY_PATH, LD_AUDIT,
    framework switches), starts PROGRAM through zluda.exe on Windows, and
    exits with PROGRAM's exit status. Put ARGS after `--`:

        cuda4amd run C:\\Apps\\Tool\\tool.exe -- --input x.png
    """
    sys.exit(run_program(program, args, target=target, print_env=print_env))


@click.command("undo")
@click.argument("target")
@click.option("--force", is_flag=True, help="Also restore files that were changed after the fix.")
def undo(target: str, force: bool) -> None:
    """Undo `cuda4amd scan TARGET --fix`: restore the tree byte for byte and
    remove what the fix added (ZLUDA's files, launchers, backups, journal).

    Exit status: 0 done (or nothing to undo), 6 something could not be
    restored (the journal is kept; the reasons are printed), 2 usage error.
    """
    from cuda4amd.fix.journal import FixDirError
    from cuda4amd.fix.lock import LockError

    path = locate(target)
    root = path.parent if path.is_file() else path
    try:
        outcome = undo_target(root, force=force)
    except FixDirError as exc:
        click.echo(f"cuda4amd: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except LockError as exc:
        click.echo(f"cuda4amd: undo refused: {exc}", err=True)
        sys.exit(EXIT_REFUSED)
    if not outcome.found:
        click.echo(f"nothing to undo: no cuda4amd fix in {root}")
        sys.exit(0)
    click.echo(f"restored {len(outcome.restored)} files, removed {len(outcome.removed)} added files and folders "
               f"in {root}")
    for line in outcome.kept + outcome.errors:
        click.echo(f"  not undone: {line}", err=True)
    if not outcome.complete:
        click.echo(f"the journal is kept: fix the above and run `cuda4amd undo {target}` again", err=True)
        sys.exit(EXIT_UNDO_INCOMPLETE)
    click.echo("the tree is as it was before the fix")
