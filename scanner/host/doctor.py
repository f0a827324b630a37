"""What `cuda4amd doctor` shows (the command is cuda4amd.cli.doctor): the host
report — GPU(s), HIP runtime, HIP SDK, libraries and per-arch kernels, ZLUDA —
with a readiness line and the next step per gap, as JSON or console text.
"""
from __future__ import annotations

__all__ = ["render_console", "doctor_document"]

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
