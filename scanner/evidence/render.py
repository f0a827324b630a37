"""The evidence section of the Markdown and console reports (the data: cuda4amd.evidence.levels)."""
from __future__ import annotations

import re
from typing import Any

__all__ = ["LEVEL_TEXT", "console_lines", "first_run_text", "markdown"]

LEVEL_TEXT = {
    "static": "static verdict",
    "linked": "linked (ZLUDA's files verified)",
    "loadable": "loadable",
    "safe-refusal": "safe refusal",
    "functional-pass": "functional pass",
}
_SPECIAL = re.compile(r"([\\`*\[\]|#~<>_])")


def _text(value: object) -> str:
    return " ".join(_SPECIAL.sub(r"\\\1", str(value)).split())


def _probed(evidence: dict[str, Any]) -> bool:
    return any(f.get("probe") for f in evidence.get("families", {}).values())


def first_run_text(note: dict[str, Any] | None) -> str:
    """The first-run note in one sentence ('' without PTX)."""
    if not note:
        return ""
    cache = note.get("cache")
    where = cache if isinstance(cache, str) else " or ".join(sorted((cache or {}).values()))
    size = note["ptx_bytes"]
    amount = f"{size / 1048576:.1f} MiB" if size >= 1048576 else f"{max(1, round(size / 1024))} KiB"
    text = (f"First run: ZLUDA compiles the PTX of each module the program loads — up to {note['modules']} modules "
            f"in {note['binaries']} binaries, {note['ptx_entries']} PTX entries, {amount} of PTX — and caches "
            f"the result in {where}; later runs start fast.")
    if note.get("long"):
        text += " With this much PTX the first run can take many minutes without output: it is compiling, not hung."
    return text


def markdown(document: dict[str, Any], rows: int = 60) -> str:
    """'## Evidence': one table row per family; binaries counted per level."""
    evidence = document.get("evidence")
    if not evidence or not evidence.get("families"):
        return ""
    families = evidence["families"]
    lines = ["## Evidence", ""]
    note = first_run_text(evidence.get("first_run"))
    if not _probed(evidence) and all(f["level"] == "static" for f in families.values()):
        lines.append("Static verdict only: nothing was run. After `cuda4amd scan DIR --fix`, "
                     "`cuda4amd verify DIR --run` checks the linked files and runs a smoke test per library.")
        if note:
            lines += ["", _text(note)]
        return "\n".join(lines)
    through = evidence.get("through")
    if through:
        lines += [f"Smoke probes ran through {_text(through)}.", ""]
    lines += ["| family | evidence | probe | what was seen |", "| --- | --- | --- | --- |"]
    for fam, f in sorted(families.items())[:rows]:
        lines.append(f"| {_text(fam)} | {LEVEL_TEXT.get(f['level'], f['level'])} | {f.get('probe') or '—'} | "
                     f"{_text(f.get('detail', ''))[:200]} |")
    if len(families) > rows:
        lines.append(f"\n… and {len(families) - rows} more families")
    counts: dict[str, int] = {}
    for level in evidence.get("binaries", {}).values():
        counts[level] = counts.get(level, 0) + 1
    if counts:
        order = evidence.get("levels") or list(LEVEL_TEXT)
        shown = ", ".join(f"{counts[lv]} {LEVEL_TEXT.get(lv, lv)}" for lv in order if lv in counts)
        lines += ["", f"CUDA binaries by the highest level shown: {shown}."]
    if note:
        lines += ["", _text(note)]
    return "\n".join(lines)


def console_lines(document: dict[str, Any]) -> list[str]:
    evidence = document.get("evidence")
    if not evidence or not evidence.get("families"):
        return []
    families = evidence["families"]
    note = first_run_text(evidence.get("first_run"))
    if not _probed(evidence) and all(f["level"] == "static" for f in families.values()):
        return ["evidence: static only (after a fix, `cuda4amd verify DIR --run` runs the smoke probes)"] + \
            ([note] if note else [])
    out = ["evidence" + (f" (probes through {evidence['through']})" if evidence.get("through") else "") + ":"]
    for fam, f in sorted(families.items()):
        probe = f" [{f['probe']}]" if f.get("probe") else ""
        out.append(f"  {fam:<12} {LEVEL_TEXT.get(f['level'], f['level'])}{probe}: {f.get('detail', '')}")
    return out + ([note] if note else [])
