"""Launchers: small scripts that run a program of the fixed application through ZLUDA.

Windows: ``<name>.cmd`` and ``<name>.ps1`` per program, and ``zluda-run.cmd`` /
``zluda-run.ps1`` for any program (``zluda-run app.exe args``). Each sets
``HIP_PATH``, puts ZLUDA's folder and the HIP SDK's ``bin`` first on ``PATH``,
sets the framework switches of the plan, and runs the program as
``zluda.exe -- program args``, passing the exit status through. The ``.ps1``
puts the environment back afterwards (PowerShell's ``$env:`` is the session's).

Linux: ``<name>.sh`` and ``zluda-run.sh``: ``HIP_PATH``, ``LD_LIBRARY_PATH``
(ZLUDA's folder, then ROCm's ``lib``), ``LD_AUDIT=<zluda>/zluda_ld`` when the
plan needs it, the switches, then ``exec`` of the program.

Paths inside the target are written relative to the launcher's own folder
(``%~dp0``, ``$PSScriptRoot``, ``$0``), so a moved application keeps working;
paths outside it are written as they are. An environment value that a shell
cannot carry (a double quote for cmd, a NUL) is refused.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda4amd.fix.plan.model import EnvVar

__all__ = ["LauncherError", "launcher_files", "render_cmd", "render_ps1", "render_sh"]

#: a value as parts: ("lit", text), ("root", "") for the target folder, ("home", "") for the user's home
_Parts = Iterable[tuple[str, str]]

GENERIC = "zluda-run"


class LauncherError(ValueError):
    pass


def launcher_files(*, platform: str, programs: Iterable[dict[str, str]], environment: Sequence[EnvVar],
                   launcher_exe: str | None, root: Path, launch_dir: Path, tag: str) -> list[tuple[str, str, bool]]:
    """(path, text, executable) of every launcher: path relative to `root`
    ('/'-separated) when the launchers' folder is inside it, else absolute."""
    try:
        rel_dir = launch_dir.relative_to(root).as_posix()
        inside = True
    except ValueError:
        rel_dir, inside = str(launch_dir), False
    up = None
    if inside:
        depth = 0 if rel_dir == "." else len(rel_dir.split("/"))
        up = "/".join([".."] * depth) or "."
    out: list[tuple[str, str, bool]] = []
    entries: list[tuple[str, str | None]] = [(p["name"], p["path"]) for p in programs]
    entries.append((GENERIC, None))
    for name, program in entries:
        if platform == "windows":
            texts = [(f"{name}.cmd", render_cmd(environment, launcher_exe, program, root, up, tag), False),
                     (f"{name}.ps1", render_ps1(environment, launcher_exe, program, root, up, tag), False)]
        else:
            texts = [(f"{name}.sh", render_sh(environment, program, root, up, tag), True)]
        for file_name, text, executable in texts:
            path = f"{rel_dir}/{file_name}" if inside and rel_dir != "." else (
                file_name if inside else str(Path(rel_dir) / file_name))
            out.append((path, text, executable))
    return out


def _check(value: str, forbidden: str, shell: str) -> str:
    for ch in forbidden + "\0\r\n":
        if ch in value:
            raise LauncherError(f"{value!r} cannot be written into a {shell} launcher ({ch!r})")
    return value


def _header(comment: str, program: str | None, tag: str) -> list[str]:
    what = f"runs {program} through ZLUDA {tag}" if program else f"runs any program through ZLUDA {tag}"
    return [f"{comment} cuda4amd launcher: {what}.",
            f"{comment} Written by `cuda4amd scan --fix`; `cuda4amd undo` removes it."]


# ---------------------------------------------------------------------------
# cmd
# ---------------------------------------------------------------------------

def _cmd_value(parts: _Parts, root_var: str) -> str:
    out = []
    for kind, text in parts:
        if kind == "root":
            out.append(f"%{root_var}%")
        elif kind == "home":
            out.append("%USERPROFILE%")
        else:
            out.append(_check(text, '"', "cmd").replace("%", "%%"))
    return "".join(out)


def render_cmd(environment: Sequence[EnvVar], launcher_exe: str | None, program: str | None, root: Path, up: str | None,
               tag: str) -> str:
    root_var = "CUDA4AMD_ROOT"
    lines = ["@echo off", *_header("rem", program and PureWindowsPath(program).name, tag), "setlocal"]
    if up is not None:
        lines.append(f'set "{root_var}=%~dp0{_win(up)}"')
    else:
        lines.append(f'set "{root_var}={_cmd_value([("lit", str(root))], root_var)}"')
    for e in environment:
        values = [_cmd_value(v, root_var) for v in e.values]
        if e.op == "prepend":
            value = ";".join(values) + f";%{e.name}%"
        else:
            value = values[0]
            if value == "":
                lines.append(f"rem {e.name} is meant to be empty; cmd can only leave it unset")
        lines.append(f'set "{e.name}={value}"')
    run = _run_prefix_cmd(launcher_exe, root_var)
    if program is None:
        lines.append('if "%~1"=="" (echo usage: zluda-run PROGRAM [ARGUMENTS...] 1>&2 & exit /b 2)')
        lines.append(f"{run}%*")
    else:
        target = _cmd_value([("root", ""), ("lit", "\\" + _win(program))], root_var)
        lines.append(f'{run}"{target}" %*')
    lines.append("exit /b %ERRORLEVEL%")
    return "\r\n".join(lines) + "\r\n"


def _run_prefix_cmd(launcher_exe: str | None, root_var: str) -> str:
    if launcher_exe is None:
        return ""
    exe = _cmd_value([("root", ""), ("lit", "\\" + _win(launcher_exe))], root_var)
    return f'"{exe}" -- '


def _win(path: str) -> str:
    return path.replace("/", "\\")


# ---------------------------------------------------------------------------
# PowerShell
# ---------------------------------------------------------------------------

def _ps_quote(text: str) -> str:
    return "'" + _check(text, "", "PowerShell").replace("'", "''") + "'"


def _ps_value(parts: _Parts) -> str:
    items = []
    for kind, text in parts:
        if kind == "root":
            items.append("$root")
        elif kind == "home":
            items.append("$env:USERPROFILE")
        else:
            items.append(_ps_quote(text))
    return "(" + " + ".join(items) + ")" if len(items) > 1 else (items[0] if items else "''")


def render_ps1(environment: Sequence[EnvVar], launcher_exe: str | None, program: str | None, root: Path, up: str | None,
               tag: str) -> str:
    lines = [*_header("#", program and PureWindowsPath(program).name, tag)]
    if up is not None:
        lines.append(f"$root = [System.IO.Path]::GetFullPath((Join-Path $PSScriptRoot {_ps_quote(_win(up))}))")
    else:
        lines.append(f"$root = {_ps_quote(str(root))}")
    names = list(dict.fromkeys(e.name for e in environment))
    if names:
        lines.append("$saved = @{}")
        lines.append("foreach ($name in @(" + ", ".join(_ps_quote(n) for n in names) + ")) {")
        lines.append("    $saved[$name] = [Environment]::GetEnvironmentVariable($name, 'Process')")
        lines.append("}")
    lines.append("$code = 0")
    lines.append("try {")
    for e in environment:
        values = [_ps_value(v) for v in e.values]
        if e.op == "prepend":
            value = " + ';' + ".join(values) + f" + ';' + [Environment]::GetEnvironmentVariable({_ps_quote(e.name)}, 'Process')"
        else:
            value = values[0]
        lines.append(f"    [Environment]::SetEnvironmentVariable({_ps_quote(e.name)}, {value}, 'Process')")
    exe = _ps_value([("root", ""), ("lit", "\\" + _win(launcher_exe))]) if launcher_exe else None
    if program is None:
        lines.append("    if ($args.Count -eq 0) { [Console]::Error.WriteLine('usage: zluda-run PROGRAM [ARGUMENTS...]'); exit 2 }")
        call = f"& {exe} '--' @args" if exe else "& $args[0] @($args | Select-Object -Skip 1)"
    else:
        target = _ps_value([("root", ""), ("lit", "\\" + _win(program))])
        call = f"& {exe} '--' {target} @args" if exe else f"& {target} @args"
    lines.append(f"    {call}")
    lines.append("    $code = $LASTEXITCODE")
    lines.append("} finally {")
    if names:
        lines.append("    foreach ($name in $saved.Keys) { [Environment]::SetEnvironmentVariable($name, $saved[$name], 'Process') }")
    lines.append("}")
    lines.append("exit $code")
    return "\r\n".join(lines) + "\r\n"


# ---------------------------------------------------------------------------
# POSIX sh
# ---------------------------------------------------------------------------

def _sh_quote(text: str) -> str:
    return "'" + _check(text, "", "sh").replace("'", "'\\''") + "'"


def _sh_value(parts: _Parts) -> str:
    out = []
    for kind, text in parts:
        if kind == "root":
            out.append('"$root"')
        elif kind == "home":
            out.append('"$HOME"')
        elif text:
            out.append(_sh_quote(text))
    return "".join(out) or "''"


def render_sh(environment: Sequence[EnvVar], program: str | None, root: Path, up: str | None, tag: str) -> str:
    lines = ["#!/bin/sh", *_header("#", program and PurePosixPath(program).name, tag)]
    if up is not None:
        lines.append(f'root=$(CDPATH= cd -- "$(dirname -- "$0")"/{_sh_quote(up)} && pwd) || exit 127')
    else:
        lines.append(f"root={_sh_quote(str(root))}")
    for e in environment:
        values = [_sh_value(v) for v in e.values]
        value = ":".join(values) + f'"${{{e.name}:+:${e.name}}}"' if e.op == "prepend" else values[0]
        lines.append(f"{e.name}={value}")
        lines.append(f"export {e.name}")
    if program is None:
        lines.append('[ "$#" -gt 0 ] || { echo "usage: zluda-run.sh PROGRAM [ARGUMENTS...]" >&2; exit 2; }')
        lines.append('exec "$@"')
    else:
        lines.append(f'exec {_sh_value([("root", ""), ("lit", "/" + program)])} "$@"')
    return "\n".join(lines) + "\n"
