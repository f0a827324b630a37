"""`cuda4amd run` and `cuda4amd undo` (docs/fix.md); `scan --fix` is in cuda4amd.cli.scan.

The fix's modules load inside the commands: ``cuda4amd --help`` imports click only.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from cuda4amd.cli.output import EXIT_USAGE

EXIT_REFUSED = 5
EXIT_UNDO_INCOMPLETE = 6


def locate(text: str) -> Path:
    """The file or folder TARGET / PROGRAM names: a path, or what `scan` would resolve it to."""
    path = Path(text).expanduser()
    if path.exists():
        return path
    from cuda4amd.scan.discover import TargetError, resolve_target

    try:
        return resolve_target(text).path
    except TargetError as exc:
        raise click.UsageError(str(exc)) from None


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--target", metavar="DIR", help="The fixed folder (default: found from PROGRAM's folder upwards).")
@click.option("--print-env", is_flag=True, help="Print the environment and the command instead of running it.")
@click.argument("program")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(target: str | None, print_env: bool, program: str, args: tuple[str, ...]) -> None:
    """Run PROGRAM through the ZLUDA link that `cuda4amd scan --fix` installed.

    Sets the plan's environment (HIP_PATH, PATH / LD_LIBRARY_PATH, LD_AUDIT,
    framework switches), starts PROGRAM through zluda.exe on Windows, and
    exits with PROGRAM's exit status. run's options may come before or after
    PROGRAM; put PROGRAM's own ARGS after `--`:

        cuda4amd run C:\\Apps\\Tool\\tool.exe -- --input x.png
    """
    from cuda4amd.fix.plan.model import FIX_DIR, JOURNAL_NAME
    from cuda4amd.fix.run import RunError, find_fixed_root, run_program

    target, print_env, rest = _own_options_before_dashes(list(args), target, print_env)
    path = locate(program)
    if target is not None:
        root = locate(target)
        root = root.parent if root.is_file() else root
    else:
        found = find_fixed_root(path)
        if found is None:
            raise click.UsageError(f"no cuda4amd fix found for {program} (no {FIX_DIR}/{JOURNAL_NAME} in its folder "
                                   f"or above): run `cuda4amd scan FOLDER --fix` first, or pass --target")
        root = found
    try:
        code = run_program(path, rest, root, print_env=print_env, echo=click.echo)
    except RunError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(code)


def _own_options_before_dashes(args: list[str], target: str | None,
                               print_env: bool) -> tuple[str | None, bool, list[str]]:
    """run's own options wherever they stand before `--` (`run tool.exe --print-env`): click stops at
    PROGRAM so that the program's own options pass through; what follows `--` is always the program's."""
    head, tail = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
    kept: list[str] = []
    words = iter(head)
    for word in words:
        if word == "--print-env":
            print_env = True
        elif word == "--target":
            target = next(words, None)
            if target is None:
                raise click.UsageError("--target needs a folder")
        elif word.startswith("--target="):
            target = word.removeprefix("--target=")
        else:
            kept.append(word)
    return target, print_env, kept + tail


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
    from cuda4amd.fix.undo import undo_target

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
    from cuda4amd.words import counted

    click.echo(f"restored {counted(len(outcome.restored), 'file')}, removed "
               f"{counted(len(outcome.removed), 'added file or folder', 'added files and folders')} in {root}")
    for line in outcome.kept + outcome.errors:
        click.echo(f"  not undone: {line}", err=True)
    if not outcome.complete:
        click.echo(f"the journal is kept: fix the above and run `cuda4amd undo {target}` again", err=True)
        sys.exit(EXIT_UNDO_INCOMPLETE)
    click.echo("the tree is as it was before the fix")
