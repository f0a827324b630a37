"""`cuda4amd doctor`: the host report — GPU(s), HIP runtime, HIP SDK, libraries
and per-arch kernels, ZLUDA — with a readiness line and the next step per gap.

Register with ``main.add_command(doctor)``. Only click is imported at module
level; the probes, rich and the rules load inside the command. Exit status:
0 whatever the machine has (the report is the answer), 2 for usage or I/O
errors (e.g. an unwritable -o file).
"""
from __future__ import annotations

import sys

import click

__all__ = ["doctor", "render_console", "doctor_document"]

MARK = {"ok": ("✓", "green"), "missing": ("✗", "red"), "warning": ("!", "yellow"), "info": ("·", "dim")}
LEVEL_STYLE = {"ready": "bold green", "partial": "bold yellow", "not-ready": "bold red"}
SECTIONS = (("gpu", "GPU"), ("hip-runtime", "HIP runtime"), ("hip-sdk", "HIP SDK"),
            ("library", "Libraries ZLUDA redirects to"), ("zluda", "ZLUDA"), ("environment", "Environment"))


def doctor_document(report, ready) -> dict:
    """The JSON document: the host report plus the derived readiness."""
    doc = report.to_dict()
    doc["readiness"] = {
        "level": ready.level,
        "headline": ready.headline,
        "gaps": {k: list(v) for k, v in ready.gaps.items()},
        "checks": [{"topic": c.topic, "status": c.status, "text": c.text, "next_step": c.next_step}
                   for c in ready.checks],
        "next_steps": ready.next_steps,
    }
    return doc


def render_console(report, ready, *, color: bool = False, width: int = 100) -> str:
    import io

    import textwrap

    from rich.console import Console
    from rich.text import Text

    out = io.StringIO()
    con = Console(file=out, force_terminal=color, no_color=not color, width=width, highlight=False)
    for line in textwrap.wrap(ready.headline, width, subsequent_indent="  ") or [""]:
        con.print(Text(line, style=LEVEL_STYLE[ready.level]))
    con.print(Text(f"host: {report.os or report.platform} · {report.generated_by}", style="dim"))
    for topic, title in SECTIONS:
        checks = [c for c in ready.checks if c.topic == topic]
        if not checks:
            continue
        con.print()
        con.print(Text(title, style="bold"))
        for c in checks:
            sign, style = MARK[c.status]
            lines = textwrap.wrap(c.text, width - 4) or [""]
            con.print(Text.assemble("  ", (sign, style), " ", lines[0]))
            for more in lines[1:]:
                con.print(Text("    " + more))
            if c.next_step and (c.status in ("missing", "warning") or topic == "zluda"):
                for line in textwrap.wrap(f"next: {c.next_step}", width - 4, initial_indent="    ",
                                          subsequent_indent="      "):
                    con.print(Text(line, style="cyan"))
    tried = ", ".join(f"{p.name}: {p.status}" for p in report.probes)
    con.print()
    for line in textwrap.wrap(f"probes: {tried}", width, subsequent_indent="  "):
        con.print(Text(line, style="dim"))
    return out.getvalue()


@click.command()
@click.option("--format", "fmt", type=click.Choice(["console", "json"]), default=None,
              help="Output format (default: json when -o ends in .json, else console).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@click.option("--target", type=click.Path(exists=True), metavar="PATH",
              help="Also look for ZLUDA in this app folder (or next to this file).")
def doctor(fmt, output, target) -> None:
    """Report what this machine has for ZLUDA: AMD GPU(s) and gfx target, HIP runtime,
    HIP SDK, the libraries and per-arch kernels ZLUDA needs, and ZLUDA itself.

    The JSON (--format json) is a host report that `cuda4amd scan --host FILE.json`
    can use to judge an app for this machine. It carries no user, host or home names.
    Exit status: 0 (whatever was found), 2 on usage or I/O errors.
    """
    import json
    import shutil
    from pathlib import Path

    from ..rules import RulesError
    from . import detect_host, readiness

    if fmt is None:
        fmt = "json" if output and output.lower().endswith(".json") else "console"
    try:
        report = detect_host(target=target)
        ready = readiness(report)
    except RulesError as exc:
        click.echo(f"cuda4amd: {exc}", err=True)
        sys.exit(2)
    if fmt == "json":
        text = json.dumps(doctor_document(report, ready), indent=2, ensure_ascii=False) + "\n"
    else:
        width = max(80, shutil.get_terminal_size((100, 24)).columns)
        text = render_console(report, ready, color=sys.stdout.isatty() and not output, width=width)
    if output:
        try:
            Path(output).write_text(text if fmt == "json" else render_console(report, ready, width=100),
                                    encoding="utf-8")
        except OSError as exc:
            click.echo(f"cuda4amd: cannot write {output}: {exc.strerror or exc}", err=True)
            sys.exit(2)
        click.echo(ready.headline)
        click.echo(f"report written to {output}")
    else:
        click.echo(text, nl=False)
