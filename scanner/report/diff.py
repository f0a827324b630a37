"""Saved reports: read one back, and say what changed between two.

`load_report` reads a JSON scan report (schema ``cuda4amd.scan/3``, or ``/2``, ``/1`` from earlier versions) for
`cuda4amd report` and `cuda4amd diff`. `compare(before, after)` gives the
differences as data (schema ``cuda4amd.diff/1``, documented in
docs/reports.md): the overall verdict, the ZLUDA release, the host, the
packages, and per binary its verdict, reasons and dependencies (added,
removed, route, family, load, how and where found, and which functions moved
between implemented, stub and missing). `render_text`, `render_markdown`
and `render_json` show it.

Binaries are matched by path; one left over on each side whose paths differ
only in digits (``cublas.cp311-win_amd64.pyd`` → ``cp312``) is taken for the
same binary, renamed. Dependencies are matched the same way by name
(``cublas64_11.dll`` → ``cublas64_12.dll``).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from cuda4amd.model import REPORT_SYMBOL_STATES as SYMBOL_STATES
from cuda4amd.report.document import SCHEMA as SCAN_SCHEMA
from cuda4amd.report.inputs import (
    MAX_REPORT_BYTES,
    READABLE_SCAN_SCHEMAS,
    REQUIRED,
    ReportFileError,
    check_shape,
    read_bounded,
    schema_problem,
)
from cuda4amd.report.json_format import render as json_text

DIFF_SCHEMA = "cuda4amd.diff/1"
#: fields added to the schema after its first reports, with the value they stand for when absent
LATER: dict[str, Any] = {"basis": "", "host": None, "packages": [], "engine": "fast"}

BINARY_RANK = {"blocked": 0, "degraded": 1, "ready": 2}
#: `incomplete` ranks between blocked and partial, as it does for the exit status (docs/exit-status.md)
OVERALL_RANK = {"blocked": 0, "incomplete": 1, "partial": 2, "ready": 3}
DEPENDENCY_FIELDS = ("family", "load", "route", "replacement", "how", "resolved")


def load_report(path: str | Path) -> dict:
    """A saved JSON or TOML scan report (`-`: read stdin), bounded in size and depth and checked against
    the shipped schema (report.inputs)."""
    import sys

    if str(path) == "-":
        where = "stdin"
        text = sys.stdin.read(MAX_REPORT_BYTES + 1)
        as_toml = not text.lstrip().startswith("{")
    else:
        where = str(path)
        text = read_bounded(path)
        as_toml = Path(path).suffix.lower() == ".toml"
    return parse_report(text, where, as_toml=as_toml)


def parse_report(text: str, where: str = "report", *, as_toml: bool = False) -> dict:
    """A scan report from its JSON or TOML text (TOML has no null: the values it left out come back as null)."""
    check_shape(text, where, as_toml=as_toml)
    if as_toml:
        from cuda4amd.report.toml_format import loads

        try:
            data = loads(text)
        except (ValueError, RecursionError) as exc:
            raise ReportFileError(f"{where}: not a TOML report ({exc}); save one with "
                                  "`cuda4amd scan … -o scan.toml`") from None
    else:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ReportFileError(f"{where}: not a JSON report ({exc}); save one with "
                                  "`cuda4amd scan … -o scan.json`") from None
    return check_report(data, where)


def check_report(data: Any, where: str = "report") -> dict:
    """`data` as a scan report, once it has the schema id, the fields every report has and the shape
    the shipped schema gives each field (ReportFileError otherwise)."""
    if not isinstance(data, dict):
        raise ReportFileError(f"{where}: not a cuda4amd scan report (expected a JSON object)")
    schema = data.get("schema")
    if not isinstance(schema, str) or not schema.startswith("cuda4amd.scan/"):
        raise ReportFileError(f"{where}: not a cuda4amd scan report (schema {schema!r}, expected {SCAN_SCHEMA!r})")
    if schema not in READABLE_SCAN_SCHEMAS:
        raise ReportFileError(f"{where}: schema {schema!r} is not {SCAN_SCHEMA!r}: made by another cuda4amd version")
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise ReportFileError(f"{where}: not a complete scan report (missing {', '.join(missing)})")
    if not isinstance(data["binaries"], list) or not all(isinstance(b, dict) and "path" in b for b in data["binaries"]):
        raise ReportFileError(f"{where}: `binaries` must be a list of objects with a path")
    for key, value in LATER.items():
        data.setdefault(key, value)
    problem = schema_problem(data, "current" if schema == SCAN_SCHEMA else "earlier")
    if problem is not None:
        raise ReportFileError(f"{where}: not a valid {schema} report: {problem}")
    return data


# ---------------------------------------------------------------------------
# comparing
# ---------------------------------------------------------------------------

def _digits(value: str) -> str:
    return re.sub(r"\d+", "#", value.casefold())


def _pair(before: dict[str, Any], after: dict[str, Any],
          key: Callable[[str], str] = _digits) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(matched (b, a) names, removed names, added names): exact names first, then unique digit-only renames."""
    same = sorted(set(before) & set(after))
    removed = sorted(set(before) - set(after))
    added = sorted(set(after) - set(before))
    by_key_before: dict[str, list[str]] = {}
    by_key_after: dict[str, list[str]] = {}
    for name in removed:
        by_key_before.setdefault(key(name), []).append(name)
    for name in added:
        by_key_after.setdefault(key(name), []).append(name)
    pairs = [(n, n) for n in same]
    for k, olds in by_key_before.items():
        news = by_key_after.get(k, [])
        if len(olds) == 1 and len(news) == 1:
            pairs.append((olds[0], news[0]))
            removed.remove(olds[0])
            added.remove(news[0])
    return sorted(pairs, key=lambda p: p[1]), removed, added


def _change(before: Any, after: Any) -> dict | None:
    return None if before == after else {"before": before, "after": after}


def _direction(before: str | None, after: str | None, rank: dict[str, int]) -> str | None:
    if before == after or before not in rank or after not in rank:
        return None
    return "better" if rank[after] > rank[before] else "worse"


def _host_text(doc: dict) -> str | None:
    host = doc.get("host")
    if not host:
        return None
    gpus = host.get("gpus") or []
    selected = host.get("selected_gpu")
    gpu = gpus[selected] if isinstance(selected, int) and 0 <= selected < len(gpus) else None
    text = f"{gpu.get('name')} ({gpu.get('gfx') or 'unknown gfx'})" if gpu else "no AMD GPU"
    sdks = host.get("hip_sdks") or []
    chosen = host.get("selected_sdk")
    sdk = sdks[chosen] if isinstance(chosen, int) and 0 <= chosen < len(sdks) else None
    text += f", HIP SDK {sdk.get('version')}" if sdk else ", no HIP SDK"
    releases = sorted({r for z in host.get("zluda") or [] for r in z.get("releases") or []})
    if releases:
        text += f", ZLUDA {'/'.join(releases)} installed"
    return text


def _side(doc: dict) -> dict:
    return {
        "target": (doc.get("target") or {}).get("path"),
        "verdict": doc.get("verdict"),
        "zluda": (doc.get("zluda") or {}).get("release"),
        "host": _host_text(doc),
        "tool": (doc.get("tool") or {}).get("version"),
    }


def _listdiff(before: Iterable[str], after: Iterable[str]) -> dict | None:
    b, a = list(before), list(after)
    added = [x for x in a if x not in b]
    removed = [x for x in b if x not in a]
    return {"added": added, "removed": removed} if added or removed else None


def _dependency_changes(before: dict, after: dict) -> dict | None:
    out: dict[str, Any] = {}
    for field in DEPENDENCY_FIELDS:
        change = _change(before.get(field), after.get(field))
        if change:
            out[field] = change
    symbols: dict[str, dict] = {}
    sb, sa = before.get("symbols") or {}, after.get("symbols") or {}
    for state in SYMBOL_STATES:
        change = _listdiff(sb.get(state) or [], sa.get(state) or [])
        if change:
            symbols[state] = change
    if symbols:
        out["symbols"] = symbols
    ordinals = _listdiff([str(o) for o in before.get("ordinals") or []], [str(o) for o in after.get("ordinals") or []])
    if ordinals:
        out["ordinals"] = ordinals
    return out or None


def _dep_entry(dep: dict) -> dict:
    return {"name": dep.get("name"), "family": dep.get("family"), "route": dep.get("route"), "load": dep.get("load")}


def _binary_changes(before: dict, after: dict) -> dict | None:
    out: dict[str, Any] = {}
    verdict = _change(before.get("verdict"), after.get("verdict"))
    if verdict:
        verdict["direction"] = _direction(before.get("verdict"), after.get("verdict"), BINARY_RANK)
        out["verdict"] = verdict
    reasons = _listdiff(before.get("reasons") or [], after.get("reasons") or [])
    if reasons:
        out["reasons"] = reasons
    me = _change(before.get("nvidia_library"), after.get("nvidia_library"))
    if me:
        out["nvidia_library"] = me
    kernels = _change((before.get("kernels") or {}).get("state"), (after.get("kernels") or {}).get("state"))
    if kernels:
        out["kernels"] = kernels
    deps_b = {d["name"]: d for d in before.get("dependencies") or []}
    deps_a = {d["name"]: d for d in after.get("dependencies") or []}
    pairs, removed, added = _pair(deps_b, deps_a)
    deps: dict[str, Any] = {}
    if added:
        deps["added"] = [_dep_entry(deps_a[n]) for n in added]
    if removed:
        deps["removed"] = [_dep_entry(deps_b[n]) for n in removed]
    changed = []
    for old, new in pairs:
        change = _dependency_changes(deps_b[old], deps_a[new])
        if change or old != new:
            entry = {"name": new, **({"renamed_from": old} if old != new else {}), **(change or {})}
            changed.append(entry)
    if changed:
        deps["changed"] = changed
    if deps:
        out["dependencies"] = deps
    return out or None


def compare(before: dict, after: dict) -> dict:
    """What changed from `before` to `after` (two scan report documents)."""
    diff: dict[str, Any] = {"schema": DIFF_SCHEMA, "before": _side(before), "after": _side(after)}
    verdict = _change(before.get("verdict"), after.get("verdict"))
    if verdict:
        verdict["direction"] = _direction(before.get("verdict"), after.get("verdict"), OVERALL_RANK)
    diff["verdict"] = verdict
    diff["zluda"] = _change((before.get("zluda") or {}).get("release"), (after.get("zluda") or {}).get("release"))
    diff["host"] = _change(_host_text(before), _host_text(after))
    diff["basis"] = _change(before.get("basis"), after.get("basis"))
    sb, sa = before.get("summary") or {}, after.get("summary") or {}
    diff["summary"] = {k: {"before": sb.get(k), "after": sa.get(k)} for k in sorted(set(sb) | set(sa))
                       if sb.get(k) != sa.get(k)}

    pb = {p["name"]: p for p in before.get("packages") or []}
    pa = {p["name"]: p for p in after.get("packages") or []}
    pairs, removed, added = _pair(pb, pa, key=str.casefold)
    packages: dict[str, Any] = {
        "added": [{"name": n, "version": pa[n].get("version"), "verdict": pa[n].get("verdict")} for n in added],
        "removed": [{"name": n, "version": pb[n].get("version"), "verdict": pb[n].get("verdict")} for n in removed],
        "changed": [],
    }
    for old, new in pairs:
        entry: dict[str, Any] = {}
        for field in ("version", "verdict"):
            change = _change(pb[old].get(field), pa[new].get(field))
            if change:
                entry[field] = change
        if "verdict" in entry:
            entry["verdict"]["direction"] = _direction(pb[old].get("verdict"), pa[new].get("verdict"), OVERALL_RANK)
        advice = _listdiff(pb[old].get("advice") or [], pa[new].get("advice") or [])
        if advice:
            entry["advice"] = advice
        if entry:
            packages["changed"].append({"name": new, **entry})
    diff["packages"] = packages

    bb = {b["path"]: b for b in before.get("binaries") or []}
    ba = {b["path"]: b for b in after.get("binaries") or []}
    pairs, removed, added = _pair(bb, ba)
    binaries: dict[str, Any] = {
        "added": [{"path": p, "verdict": ba[p].get("verdict")} for p in added],
        "removed": [{"path": p, "verdict": bb[p].get("verdict")} for p in removed],
        "changed": [],
    }
    for old, new in pairs:
        change = _binary_changes(bb[old], ba[new])
        if change or old != new:
            binaries["changed"].append({"path": new, **({"renamed_from": old} if old != new else {}), **(change or {})})
    diff["binaries"] = binaries

    eb = {e["path"]: e for e in before.get("errors") or []}
    ea = {e["path"]: e for e in after.get("errors") or []}
    diff["errors"] = {
        "added": [ea[p] for p in sorted(set(ea) - set(eb))],
        "removed": [eb[p] for p in sorted(set(eb) - set(ea))],
    }
    diff["changed"] = any((
        diff["verdict"], diff["zluda"], diff["host"], diff["summary"],
        *packages.values(), *binaries.values(), *diff["errors"].values(),
    ))
    return diff


# ---------------------------------------------------------------------------
# showing
# ---------------------------------------------------------------------------

def render_json(diff: dict) -> str:
    return json_text(diff)


def _arrow(change: dict, show: Callable[[Any], str] = str) -> str:
    text = f"{show(change['before'])} → {show(change['after'])}"
    return text + (f" ({change['direction']})" if change.get("direction") else "")


def _shown(value: Any) -> str:
    return "—" if value is None else str(value)


def _dep_lines(change: dict, names: int) -> list[str]:
    """One line per changed fact of a dependency."""
    lines = []
    for field in DEPENDENCY_FIELDS:
        if field in change:
            lines.append(f"{field}: {_arrow(change[field], _shown)}")
    for line in _symbol_lines(change.get("symbols") or {}, names):
        lines.append(line)
    if "ordinals" in change:
        lines.append("ordinals: " + " ".join(f"{s}{', '.join(change['ordinals'][k])}"
                                             for s, k in (("+", "added"), ("-", "removed")) if change["ordinals"][k]))
    return lines


def _names(items: list[str], names: int) -> str:
    return ", ".join(items[:names]) + (f" … and {len(items) - names} more" if len(items) > names else "")


def _symbol_lines(symbols: dict, names: int) -> list[str]:
    """Functions that changed state, each said once: a name that left one state for another is one move
    ("unchecked → implemented: 4 (…)"), not an addition and a removal."""
    added = {state: list((moved or {}).get("added") or []) for state, moved in symbols.items()}
    removed = {state: list((moved or {}).get("removed") or []) for state, moved in symbols.items()}
    lines = []
    for source in SYMBOL_STATES:
        for target in SYMBOL_STATES:
            if source == target:
                continue
            moved = [n for n in removed.get(source, []) if n in added.get(target, [])]
            if moved:
                lines.append(f"functions {source} → {target}: {len(moved)} ({_names(moved, names)})")
                removed[source] = [n for n in removed[source] if n not in moved]
                added[target] = [n for n in added[target] if n not in moved]
    for state in SYMBOL_STATES:
        bits = [f"{sign}{len(items)} ({_names(items, names)})"
                for sign, items in (("+", added.get(state) or []), ("-", removed.get(state) or [])) if items]
        if bits:
            lines.append(f"{state} functions: " + " ".join(bits))
    return lines


def verdicts_changed(diff: dict) -> bool:
    """Whether a verdict changed: the overall one, a package's, or a binary's (added and removed ones count)."""
    packages, binaries = diff["packages"], diff["binaries"]
    return bool(
        diff["verdict"]
        or packages["added"] or packages["removed"] or any("verdict" in p for p in packages["changed"])
        or binaries["added"] or binaries["removed"] or any(b.get("verdict") for b in binaries["changed"])
    )


def _binary_groups(changed: list[dict], names: int) -> list[tuple[list[dict], list[tuple[str, str]]]]:
    """Binaries whose changes read the same, together: (entries, their lines), in the order first seen."""
    groups: dict[tuple, tuple[list[dict], list[tuple[str, str]]]] = {}
    for entry in changed:
        lines = _binary_lines(entry, names)
        verdict = entry.get("verdict") or {}
        key = (verdict.get("before"), verdict.get("after"), tuple(lines), bool(entry.get("renamed_from")))
        groups.setdefault(key, ([], lines))[0].append(entry)
    return list(groups.values())


def _who(entries: list[dict], show: Callable[[str], str], shown: int = 3) -> str:
    """One binary's name (with its rename), or 'N binaries: a, b, c +k more'."""
    if len(entries) == 1:
        entry = entries[0]
        return (f"{show(entry['renamed_from'])} → {show(entry['path'])}" if entry.get("renamed_from")
                else show(entry["path"]))
    listed = ", ".join(show(e["path"]) for e in entries[:shown]) + (
        f" +{len(entries) - shown} more" if len(entries) > shown else "")
    return f"{len(entries)} binaries ({listed})"


def _binary_lines(entry: dict, names: int) -> list[tuple[str, str]]:
    """(sign, line) per change of a binary: "+" added, "-" gone, "" changed."""
    lines: list[tuple[str, str]] = []
    lines += [("+", f"reason: {r}") for r in (entry.get("reasons") or {}).get("added", [])]
    lines += [("-", f"reason: {r}") for r in (entry.get("reasons") or {}).get("removed", [])]
    if entry.get("kernels"):
        lines.append(("", f"kernels: {_arrow(entry['kernels'], _shown)}"))
    if entry.get("nvidia_library"):
        def me(v: dict | None) -> str:
            return "not an NVIDIA library" if v is None else f"NVIDIA {v.get('family')} → {v.get('route')}"
        lines.append(("", f"is: {_arrow(entry['nvidia_library'], me)}"))
    deps = entry.get("dependencies") or {}
    for dep in deps.get("added", []):
        lines.append(("+", f"loads {dep['name']} ({dep['load']}"
                      + (f", {dep['family']} → {dep['route']}" if dep.get("family") else "") + ")"))
    for dep in deps.get("removed", []):
        lines.append(("-", f"loads {dep['name']}"))
    for dep in deps.get("changed", []):
        name = f"{dep['renamed_from']} → {dep['name']}" if dep.get("renamed_from") else dep["name"]
        facts = _dep_lines(dep, names)
        lines.append(("", f"{name}: " + ("; ".join(facts) if facts else "renamed")))
    return lines


def render_text(diff: dict, *, names: int = 10) -> str:
    b, a = diff["before"], diff["after"]
    out = [f"before: {b['target']} — {b['verdict']} (ZLUDA {b['zluda']})",
           f"after:  {a['target']} — {a['verdict']} (ZLUDA {a['zluda']})"]
    if not diff["changed"]:
        out.append("no differences in verdicts, routes or dependencies")
        return "\n".join(out) + "\n"
    if diff["verdict"]:
        out.append(f"verdict: {_arrow(diff['verdict'])}")
    if diff["zluda"]:
        out.append(f"ZLUDA release: {_arrow(diff['zluda'])}")
    if diff["host"]:
        out.append(f"host: {_arrow(diff['host'], _shown)}")
    if diff["summary"]:
        out.append("counts: " + ", ".join(f"{k} {v['before']} → {v['after']}" for k, v in diff["summary"].items()))
    packages = diff["packages"]
    if any(packages.values()):
        out.append("packages:")
        out += [f"  + {p['name']} {p['version']} ({p['verdict']})" for p in packages["added"]]
        out += [f"  - {p['name']} {p['version']} ({p['verdict']})" for p in packages["removed"]]
        for p in packages["changed"]:
            facts = [f"{k} {_arrow(p[k])}" for k in ("version", "verdict") if k in p]
            facts += [f"+advice: {x}" for x in (p.get("advice") or {}).get("added", [])]
            facts += [f"-advice: {x}" for x in (p.get("advice") or {}).get("removed", [])]
            out.append(f"  {p['name']}: " + "; ".join(facts))
    binaries = diff["binaries"]
    if any(binaries.values()):
        out.append("binaries:")
        out += [f"  + {x['path']} ({x['verdict']})" for x in binaries["added"]]
        out += [f"  - {x['path']} ({x['verdict']})" for x in binaries["removed"]]
        for entries, lines in _binary_groups(binaries["changed"], names):
            first = entries[0]
            out.append(f"  {_who(entries, str)}" + (f": {_arrow(first['verdict'])}" if first.get("verdict") else ""))
            out += [f"      {sign} {line}" if sign else f"      {line}" for sign, line in lines]
    errors = diff["errors"]
    if errors["added"] or errors["removed"]:
        out.append("unreadable files:")
        out += [f"  + {e['path']}: {e['message']}" for e in errors["added"]]
        out += [f"  - {e['path']} (read now)" for e in errors["removed"]]
    return "\n".join(out) + "\n"


def _worded(sign: str, line: str) -> str:
    """A +/- line in words, for Markdown (where a leading + or - would start a list)."""
    if not sign:
        return line
    if line.startswith("reason: "):
        return ("new " if sign == "+" else "dropped ") + line
    if line.startswith("loads "):
        return ("now " if sign == "+" else "no longer ") + line
    return ("added: " if sign == "+" else "removed: ") + line


def render_markdown(diff: dict, *, names: int = 10) -> str:
    from cuda4amd.report.markdown import code, text

    b, a = diff["before"], diff["after"]
    title = (f"# cuda4amd diff: {text(b['verdict'])} → {text(a['verdict'])}" if diff["verdict"]
             else f"# cuda4amd diff: {text(a['verdict'])}, "
             + ("with changes" if diff["changed"] else "no differences"))
    out = [title, ""]
    rows = [("target", code(b["target"]), code(a["target"])),
            ("verdict", f"**{text(b['verdict'])}**", f"**{text(a['verdict'])}**"),
            ("ZLUDA", text(b["zluda"]), text(a["zluda"])),
            ("host", text(b["host"] or "not examined"), text(a["host"] or "not examined")),
            ("cuda4amd", text(b["tool"]), text(a["tool"]))]
    out += ["| | before | after |", "| --- | --- | --- |"] + [f"| {r[0]} | {r[1]} | {r[2]} |" for r in rows]
    if not diff["changed"]:
        out += ["", "No differences in verdicts, routes or dependencies."]
        return "\n".join(out) + "\n"
    if diff["summary"]:
        out += ["", "Counts: " + ", ".join(f"{text(k)} {v['before']} → {v['after']}"
                                           for k, v in diff["summary"].items()) + "."]
    packages = diff["packages"]
    if any(packages.values()):
        out += ["", "## Packages", ""]
        out += [f"- added {text(p['name'])} {text(p['version'])} (**{text(p['verdict'])}**)" for p in packages["added"]]
        out += [f"- removed {text(p['name'])} {text(p['version'])} ({text(p['verdict'])})" for p in packages["removed"]]
        for p in packages["changed"]:
            facts = [f"{k} {text(_arrow(p[k]))}" for k in ("version", "verdict") if k in p]
            facts += [f"new advice: {text(x)}" for x in (p.get("advice") or {}).get("added", [])]
            out.append(f"- {text(p['name'])}: " + "; ".join(facts))
    binaries = diff["binaries"]
    if any(binaries.values()):
        out += ["", "## Binaries", ""]
        out += [f"- added {code(x['path'])} (**{text(x['verdict'])}**)" for x in binaries["added"]]
        out += [f"- removed {code(x['path'])} ({text(x['verdict'])})" for x in binaries["removed"]]
        for entries, lines in _binary_groups(binaries["changed"], names):
            first = entries[0]
            out.append(f"- {_who(entries, code)}"
                       + (f": **{text(_arrow(first['verdict']))}**" if first.get("verdict") else ""))
            out += [f"  - {text(_worded(sign, line))}" for sign, line in lines]
    errors = diff["errors"]
    if errors["added"] or errors["removed"]:
        out += ["", "## Unreadable files", ""]
        out += [f"- now unreadable: {code(e['path'])}: {text(e['message'])}" for e in errors["added"]]
        out += [f"- read now: {code(e['path'])}" for e in errors["removed"]]
    return "\n".join(out) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}
