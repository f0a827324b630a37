"""`cuda4amd run`: start a program of a fixed tree with the fix's environment (through zluda.exe on
Windows in launcher mode), as the launchers do.

    prefix, env = fixed_launch(plan, root)           # also what `verify --run` starts its probes with
    code = run_program(program, args, root, echo=print)
"""
from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from cuda4amd.fix.journal import FixDirError, load_journal
from cuda4amd.fix.lock import LockError, target_lock
from cuda4amd.fix.plan.model import FIX_DIR, JOURNAL_NAME, Plan, expand_parts

__all__ = ["RunError", "find_fixed_root", "fixed_launch", "run_program"]


class RunError(Exception):
    """The program cannot be run through the fix; the message says why and what to do."""


def find_fixed_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` holding a cuda4amd journal."""
    cur = start.resolve()
    if cur.is_file():
        cur = cur.parent
    for folder in (cur, *cur.parents):
        if (folder / FIX_DIR / JOURNAL_NAME).is_file():
            return folder
    return None


def run_program(program: Path, args: Sequence[str], root: Path, *, print_env: bool = False,
                echo: Callable[[str], None]) -> int:
    """Run `program` with the environment of the fix of `root` and return its exit status
    (with `print_env`: echo the environment and the command instead, and return 0)."""
    try:  # held while the journal is read: a fix or undo running now cannot hand over half a journal
        with target_lock(root, "run"):
            journal = load_journal(root)
    except (FixDirError, LockError) as exc:
        raise RunError(str(exc)) from None
    if journal is None or not journal.complete:
        raise RunError(f"{root}: the fix is not complete (journal state "
                       f"{journal.state if journal else 'missing'}): re-run `cuda4amd scan {root} --fix` "
                       f"or `cuda4amd undo {root}`")
    plan = journal.plan
    here = "windows" if os.name == "nt" else "linux"
    prefix, env = fixed_launch(plan, root)
    command = [*prefix, str(program), *args]
    if print_env:
        for e in plan.environment:
            echo(f"{e.name}={env.get(e.name, '')}")
        echo(" ".join(_quote(c) for c in command))
        return 0
    if plan.platform != here:
        raise RunError(f"{root} was fixed for {plan.platform.capitalize()}: run it there "
                       f"(--print-env shows what would run)")
    try:
        done = subprocess.run(command, env=env)
    except OSError as exc:
        raise RunError(f"cannot start {command[0]}: {exc.strerror or exc}") from None
    code = done.returncode
    return 128 - code if code < 0 else code  # killed by a signal: the shell's convention


def fixed_launch(plan: Plan, root: Path, base: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """(command prefix, environment) that run a program through the fix: the plan's
    environment over `base` (default os.environ) and, on Windows in launcher mode,
    ``zluda.exe --`` in front."""
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
    return shlex.quote(text) if os.name != "nt" else (f'"{text}"' if " " in text else text)
