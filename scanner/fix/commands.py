"""What `scan --fix`, `cuda4amd run` and `cuda4amd undo` call (the click commands are in cuda4amd.cli.fix).

Only click is imported here at load time (``cuda4amd --help`` stays fast);
`fix_target` lives in cuda4amd.fix.apply and is re-exported.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import click

__all__ = ["fix_target", "undo_target", "run_program", "find_fixed_root", "locate", "fixed_launch"]

EXIT_USAGE = 2
EXIT_REFUSED = 5
EXIT_UNDO_INCOMPLETE = 6


def fix_target(result, **kwargs):
    """See cuda4amd.fix.apply.fix_target; holds the target's lock (cuda4amd.fix.lock) throughout."""
    from cuda4amd.fix.apply import FixOutcome
    from cuda4amd.fix.apply import fix_target as impl
    from cuda4amd.fix.lock import LockError, target_lock
    from cuda4amd.fix.plan import PlanError, target_root
    from cuda4amd.report.escape import visible_lines

    say = kwargs.get("echo") or print
    kwargs["echo"] = lambda text: say(visible_lines(text))  # the plan names files of the tree: no escapes pass
    try:
        root = target_root(result.target)
    except PlanError:
        return impl(result, **kwargs)  # refused there, with its message
    try:
        with target_lock(root, "scan --fix"):
            return impl(result, **kwargs)
    except LockError as exc:
        kwargs["echo"](f"cuda4amd: fix refused: {exc}")
        return FixOutcome("refused", str(exc))


def undo_target(root: Path, *, force: bool = False):
    """cuda4amd.fix.journal.undo_target under the target's lock (raises LockError when another holds it)."""
    from cuda4amd.fix.journal import undo_target as impl
    from cuda4amd.fix.lock import target_lock

    with target_lock(root, "undo"):
        return impl(root, force=force)


def locate(text: str) -> Path:
    path = Path(text).expanduser()
    if path.exists():
        return path
    from cuda4amd.scan.discover import TargetError, resolve_target

    try:
        return resolve_target(text).path
    except TargetError as exc:
        raise click.UsageError(str(exc)) from None


def find_fixed_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` holding a cuda4amd journal."""
    from cuda4amd.fix.plan import FIX_DIR, JOURNAL_NAME

    cur = start.resolve()
    if cur.is_file():
        cur = cur.parent
    for folder in (cur, *cur.parents):
        if (folder / FIX_DIR / JOURNAL_NAME).is_file():
            return folder
    return None


def run_program(program: str, args: list[str] | tuple[str, ...], *, target: str | None = None,
                print_env: bool = False, echo=click.echo) -> int:
    """Run `program` with the environment of the fix (through zluda.exe on
    Windows in launcher mode) and return its exit status."""
    from cuda4amd.fix.journal import FixDirError, load_journal
    from cuda4amd.fix.plan import FIX_DIR, JOURNAL_NAME

    args = list(args)
    if args and args[0] == "--":
        args = args[1:]
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
    from cuda4amd.fix.lock import LockError, target_lock

    try:  # held while the journal is read: a fix or undo running now cannot hand over half a journal
        with target_lock(root, "run"):
            journal = load_journal(root)
    except (FixDirError, LockError) as exc:
        raise click.UsageError(str(exc)) from None
    if journal is None or not journal.complete:
        raise click.UsageError(f"{root}: the fix is not complete (journal state "
                               f"{journal.state if journal else 'missing'}): re-run `cuda4amd scan {root} --fix` "
                               f"or `cuda4amd undo {root}`")
    plan = journal.plan
    here = "windows" if os.name == "nt" else "linux"
    prefix, env = fixed_launch(plan, root)
    command = [*prefix, str(path), *args]
    if print_env:
        for e in plan.environment:
            echo(f"{e.name}={env.get(e.name, '')}")
        echo(" ".join(_quote(c) for c in command))
        return 0
    if plan.platform != here:
        raise click.UsageError(f"{root} was fixed for {plan.platform.capitalize()}: run it there "
                               f"(--print-env shows what would run)")
    try:
        done = subprocess.run(command, env=env)
    except OSError as exc:
        raise click.UsageError(f"cannot start {command[0]}: {exc.strerror or exc}") from None
    code = done.returncode
    return 128 - code if code < 0 else code  # killed by a signal: the shell's convention


def fixed_launch(plan, root: Path, base: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """(command prefix, environment) that run a program through the fix: the plan's
    environment over `base` (default os.environ) and, on Windows in launcher mode,
    ``zluda.exe --`` in front."""
    from cuda4amd.fix.plan import expand_parts

    sep = ";" if plan.platform == "windows" else ":"
    env = dict(os.environ if base is None else base)
    for e in plan.environment:
        values = [expand_parts(v, root) for v in e.values]
        if e.op == "prepend":
            current = env.get(e.name) or ""
            env[e.name] = sep.join(values + ([current] if current else []))
        else:
            env[e.name] = values[0]
    prefix = [expand_parts((("root", ""), ("lit", "/" + plan.launcher_exe)), root), "--"] if plan.launcher_exe else []
    return prefix, env


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text) if os.name != "nt" else (f'"{text}"' if " " in text else text)
