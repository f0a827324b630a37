"""The trace explanation as console text or Markdown (the data: cuda4amd.trace.explain)."""
from __future__ import annotations

import re
from typing import Any

from cuda4amd.report.escape import visible_document

__all__ = ["markdown", "text"]

_SPECIAL = re.compile(r"([\\`*\[\]|#~<>_])")


def _md(value: object) -> str:
    return " ".join(_SPECIAL.sub(r"\\\1", str(value)).split())


def _code(value: object) -> str:
    """A function name as inline code (a name with a backtick as escaped text; '|' escaped for tables)."""
    text = str(value)
    return _md(text) if "`" in text else "`" + text.replace("|", "\\|") + "`"


def _statuses(row: dict[str, Any]) -> str:
    return ", ".join(f"{s}\N{MULTIPLICATION SIGN}{n}" if n > 1 else s for s, n in row["statuses"].items())


def text(doc: dict[str, Any]) -> str:
    doc = visible_document(doc)  # a trace is the traced program's text: no control character reaches the terminal
    out = []
    for run in doc["runs"]:
        out.append(f"trace {run['run']} ({run['calls']} calls in {run['lines']} lines"
                   + (f", {run['notes']} notes" if run["notes"] else "") + ")")
        mods = run["modules"]
        out.append(f"  modules saved: {mods['ptx']} PTX ({mods['ptx_bytes']} bytes), {mods['other']} other")
        if run["failed"]:
            out.append("  failed calls (family · function · ZLUDA's state · statuses):")
            for row in run["failed"]:
                by = f" · imported by {', '.join(row['imported_by'][:3])}" if row["imported_by"] else ""
                out.append(f"    {row['family'] or '?'} · {row['function']} · {row['state']} · {_statuses(row)} "
                           f"(first at line {row['first_line']}){by}")
        else:
            out.append("  no failed calls")
        if run["harmless"]:
            out.append("  usually harmless: " + ", ".join(
                f"{h['function']} → {h['status']}\N{MULTIPLICATION SIGN}{h['count']}"
                for h in run["harmless"][:6]))
        launch = run["last_launch"]
        if launch:
            out.append(f"  last kernel launch: {launch.get('kernel') or launch['function']} (line {launch['line']}, "
                       f"{launch['status']}) from {', '.join(launch['module']) or 'an unknown module'}; "
                       f"{launch['launches']} launches in all")
        for err in run["ptx_errors"]:
            out.append(f"  PTX rejected: {err['ptx'] or err['log']} (target {err['target'] or '?'}): "
                       + "; ".join(err["errors"][:2]))
        for fail in run["module_load_failures"]:
            out.append(f"  module load failed: {fail['call']} → {fail['status']} at line {fail['line']}"
                       + (f" ({', '.join(fail['files'])})" if fail["files"] else ""))
        out.append("  what to do:")
        out += [f"    - {a}" for a in run["advice"]]
    return "\n".join(out) + "\n"


def markdown(doc: dict[str, Any]) -> str:
    doc = visible_document(doc)
    out = [f"# ZLUDA trace explained: {_md(doc['path'])}", ""]
    if doc.get("zluda_release"):
        out += [f"Function states from ZLUDA **{_md(doc['zluda_release'])}**'s tables.", ""]
    for run in doc["runs"]:
        out += [f"## {_md(run['run'])}", "", f"{run['calls']} calls; {run['modules']['ptx']} PTX modules saved "
                f"({run['modules']['ptx_bytes']} bytes).", ""]
        if run["failed"]:
            out += ["| family | function | ZLUDA's state | statuses | first line |", "| --- | --- | --- | --- | --- |"]
            out += [f"| {_md(r['family'] or '?')} | {_code(r['function'])} | {_md(r['state'])} | {_md(_statuses(r))} | "
                    f"{r['first_line']} |" for r in run["failed"][:100]]
            out.append("")
        launch = run["last_launch"]
        if launch:
            out += [f"Last kernel launch: {_code(launch.get('kernel') or launch['function'])} "
                    f"(line {launch['line']}) from {_md(', '.join(launch['module']) or 'an unknown module')}.", ""]
        for err in run["ptx_errors"]:
            out += [f"PTX rejected: {_md(err['ptx'] or err['log'])}: {_md('; '.join(err['errors'][:3]))}", ""]
        out += ["What to do:", ""] + [f"- {_md(a)}" for a in run["advice"]] + [""]
    return "\n".join(out)
