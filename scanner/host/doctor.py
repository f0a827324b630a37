"""What `cuda4amd doctor` shows (the command is cuda4amd.cli.doctor): the host
report — GPU(s), HIP runtime, HIP SDK, libraries and per-arch kernels, ZLUDA —
with a readiness line and the next step per gap, as JSON or console text.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from cuda4amd.host.gaps import Readiness
    from cuda4amd.host.report import HostReport

__all__ = ["doctor_document", "render_console", "render_markdown", "show"]

MARK = {"ok": ("✓", "green"), "missing": ("✗", "red"), "warning": ("!", "yellow"), "info": ("·", "dim")}
LEVEL_STYLE = {"ready": "bold green", "partial": "bold yellow", "not-ready": "bold red"}
SECTIONS = (("gpu", "GPU"), ("hip-runtime", "HIP runtime"), ("hip-sdk", "HIP SDK"),
            ("library", "Libraries ZLUDA redirects to"), ("zluda", "ZLUDA"), ("environment", "Environment"))


def doctor_document(report: HostReport, ready: Readiness) -> dict:
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


def render_console(report: HostReport, ready: Readiness, *, color: bool = False, width: int = 100, quiet: bool = False,
                   verbose: bool = False) -> str:
    """The console text as a string (a .txt file, tests)."""
    import io

    from rich.console import Console

    out = io.StringIO()
    show(Console(file=out, force_terminal=color, no_color=not color, width=width, highlight=False,
                 color_system="standard" if color else None), report, ready, quiet=quiet, verbose=verbose)
    return out.getvalue()


def show(con: Console, report: HostReport, ready: Readiness, *, quiet: bool = False, verbose: bool = False) -> None:
    """Print the doctor's report on the rich Console `con` (-q: the readiness line only; -v: each probe's detail)."""
    import textwrap

    from rich.text import Text

    width = con.width
    for line in textwrap.wrap(ready.headline, width, subsequent_indent="  ") or [""]:
        con.print(Text(line, style=LEVEL_STYLE[ready.level]))
    if quiet:
        return
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
    if verbose:
        for probe in report.probes:
            for line in textwrap.wrap(f"{probe.name} ({probe.status}): {probe.detail or 'no detail'}", width,
                                      initial_indent="  ", subsequent_indent="    "):
                con.print(Text(line, style="dim"))


MARKDOWN_MARK = {"ok": "yes", "missing": "**missing**", "warning": "**warning**", "info": "info"}


def render_markdown(report: HostReport, ready: Readiness) -> str:
    """Markdown to paste into an issue: the readiness, the checks with their next steps, the host table."""
    from cuda4amd.report.markdown import code, host_section, text

    parts = [f"# cuda4amd doctor: {text(ready.level)}", text(ready.headline),
             f"Host: {text(report.os or report.platform)} · {text(report.generated_by)}"]
    for topic, title in SECTIONS:
        checks = [c for c in ready.checks if c.topic == topic]
        if not checks:
            continue
        lines = [f"## {title}", ""]
        for c in checks:
            line = f"- {MARKDOWN_MARK[c.status]}: {text(c.text)}"
            if c.next_step and (c.status in ("missing", "warning") or topic == "zluda"):
                line += f"<br>next: {text(c.next_step)}"
            lines.append(line)
        parts.append("\n".join(lines))
    parts.append(host_section(report.to_dict()))
    probes = ", ".join(f"{code(p.name)}: {text(p.status)}" for p in report.probes)
    if probes:
        parts.append(f"<sub>probes: {probes}</sub>")
    return "\n\n".join(parts) + "\n"
