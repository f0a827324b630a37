"""Markdown: the report to paste into a GitHub issue (GitHub-flavoured).

Layout: a title with the verdict; what was scanned and against which ZLUDA
release; a summary table (packages, then CUDA-using binaries, with the
deciding reason); what to try; the host (GPU and gfx, driver, HIP runtime,
HIP SDK, ZLUDA found) when it was examined; the ZLUDA release; a Mermaid
diagram of the CUDA part of the dependency graph; one collapsible
``<details>`` section per CUDA-using binary (reasons, CUDA dependencies with
routes, stub and missing functions, kernels, advice, notes); files that
could not be read.

Size: GitHub refuses issue and comment bodies over 65,536 characters
(`GITHUB_LIMIT`). The report is rendered at the most detailed level that
fits `BUDGET` (60,000 characters, leaving room for the reporter's own
words): each level lists fewer names per list (the rest is counted, "… and
84 more"), fewer table rows and diagram nodes, and from the third level on
ready binaries get no section of their own. At the last level sections are
added, worst verdict first, while they fit, and the report says how many were
left out and how to get the full JSON report. The Mermaid diagram is bounded
by node count on every level: binaries that load the same CUDA libraries
with the same verdict are one node, non-CUDA binaries and libraries are left
out, and when that is still too many, libraries are drawn per family and
binaries per verdict.
"""
from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cuda4amd.model import REPORT_SYMBOL_STATES, loader_key, platform_of
from cuda4amd.report.document import (
    SOFTWARE_ONLY_HERE,
    headline,
    parts_line,
    ptx_check_line,
    read_problems,
    unregistered_ptx_line,
)
from cuda4amd.report.escape import visible_document
from cuda4amd.report.grouping import binary_counts, group_label, own_reasons, reason_groups, without_repeats
from cuda4amd.words import counted, settings

GITHUB_LIMIT = 65_536
BUDGET = 60_000

ORDER = {"blocked": 0, "partial": 1, "degraded": 1, "ready": 2, "no-cuda": 3}
ROUTE_STATE = {"redirect": "ready", "passthrough": "ready", "stub": "degraded", "blocked": "blocked",
               "unknown": "unknown"}
ZLUDA_REPOSITORY = "https://github.com/vosen/ZLUDA"
#: above this many nodes the diagram keeps only the blocked and degraded binaries and what they load
PROBLEM_PATHS_ABOVE = 20
KERNEL_STATE = {
    "ptx-available": "carries PTX, which ZLUDA compiles for the AMD GPU",
    "relocatable-ptx-only": "carries PTX only as relocatable device code (-rdc); whether ZLUDA can link it is not "
                            "known",
    "sass-only": "carries no PTX, only NVIDIA machine code, which ZLUDA cannot run",
}


@dataclass(frozen=True)
class Detail:
    """How much one rendering shows."""

    names: int  # function names listed per state (0: counts only)
    items: int  # entries of other lists: reasons, notes, archs, other libraries
    rows: int  # rows of each summary table
    graph_nodes: int  # nodes of the Mermaid diagram
    ready_sections: bool  # ready binaries get a <details> section too
    reason_chars: int  # a reason in a table cell or a section title is cut here


LEVELS = (
    Detail(names=60, items=20, rows=100, graph_nodes=60, ready_sections=True, reason_chars=300),
    Detail(names=20, items=10, rows=60, graph_nodes=45, ready_sections=True, reason_chars=200),
    Detail(names=8, items=5, rows=40, graph_nodes=35, ready_sections=False, reason_chars=160),
    Detail(names=0, items=3, rows=25, graph_nodes=25, ready_sections=False, reason_chars=120),
)


def render(document: dict, *, budget: int = BUDGET) -> str:
    """The Markdown report; never longer than `budget` characters."""
    report = _Report(visible_document(document))  # names with newlines or ESC/BEL stay one visible name
    for level in LEVELS[:-1]:
        text = report.assemble(level)
        if len(text) <= budget:
            return text
    return report.assemble(LEVELS[-1], budget=budget)


# ---------------------------------------------------------------------------
# escaping
# ---------------------------------------------------------------------------

_SPECIAL = re.compile(r"([\\`*\[\]|#~])")
_LONE_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")


def text(value: object) -> str:
    """Plain text for Markdown: no emphasis, links, HTML or table breaks by accident."""
    out = html.escape(str(value), quote=False)
    out = _SPECIAL.sub(r"\\\1", out)
    out = _LONE_UNDERSCORE.sub(r"\\_", out)
    return " ".join(out.split())


def code(value: object) -> str:
    """Inline code; safe inside a table cell too."""
    raw = " ".join(str(value).split()).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", raw)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if raw.startswith("`") or raw.endswith("`") or longest else ""
    return f"{fence}{pad}{raw}{pad}{fence}"


def _cut(value: str, limit: int) -> str:
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: max(0, limit - 1)].rstrip() + "…"


def _h(value: object) -> str:
    return html.escape(str(value), quote=False)


def _listed(items: list[Any], limit: int, render: Callable[[Any], str] = code) -> str:
    """'a, b, c … and 7 more' (items rendered by `render`: names, or dependencies' dicts)."""
    shown = [render(i) for i in items[:limit]]
    rest = len(items) - len(shown)
    if not shown:
        return f"{rest}" if rest else ""
    return ", ".join(shown) + (f" … and {rest} more" if rest else "")


def _table(header: Iterable[str], rows: list[list[str]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------

class _Report:
    def __init__(self, doc: dict) -> None:
        self.doc = doc
        self.binaries = list(doc.get("binaries") or [])
        self.by_path = {b["path"]: b for b in self.binaries}
        self.cuda = sorted((b for b in self.binaries if b.get("verdict") != "no-cuda"),
                           key=lambda b: (ORDER.get(b["verdict"], 9), b["path"]))
        self.packages = sorted((p for p in doc.get("packages") or [] if p.get("verdict") != "no-cuda"),
                               key=lambda p: (ORDER.get(p["verdict"], 9), p["name"].lower()))
        self.package_of: dict[str, dict] = {}
        for package in doc.get("packages") or []:
            for path in package.get("binaries") or []:
                self.package_of.setdefault(path, package)

    # -- assembly -------------------------------------------------------------

    def assemble(self, level: Detail, budget: int | None = None) -> str:
        from cuda4amd.evidence.render import markdown as evidence

        head = [self.title(), self.summary(level), self.advice(level), self.host(), self.zluda(level),
                evidence(self.doc, level.rows), self.environment(full=budget is None)]
        graph = self.graph(level)
        sections = [self.section(b, level) for b in self.cuda if level.ready_sections or b["verdict"] != "ready"]
        skipped_ready = [b for b in self.cuda if not level.ready_sections and b["verdict"] == "ready"]
        tail = [self.errors(level), self.footer()]
        if budget is None:
            return _join([*head, graph, self.sections(sections, skipped_ready, 0, level), *tail])

        # the last level: sections while they fit, worst verdict first
        fixed = _join([*head, graph, self.sections([], skipped_ready, len(sections), level), *tail])
        if len(fixed) > budget:
            graph = "## Dependency graph\n\nLeft out to keep this report under GitHub's size limit."
            head[-1] = self.environment(full=False)
            tail = [self.errors(Detail(0, 3, 5, 0, False, 80)), self.footer()]
            fixed = _join([*head, graph, self.sections([], skipped_ready, len(sections), level), *tail])
        room = budget - len(fixed)
        kept: list[str] = []
        for section in sections:
            cost = len(section) + 2
            if cost > room:
                break
            kept.append(section)
            room -= cost
        text_ = _join([*head, graph, self.sections(kept, skipped_ready, len(sections) - len(kept), level), *tail])
        return text_ if len(text_) <= budget else _hard_trim(text_, budget)

    # -- pieces ----------------------------------------------------------------

    def title(self) -> str:
        doc = self.doc
        verdict = doc.get("verdict", "")
        target = doc.get("target") or {}
        zluda = doc.get("zluda") or {}
        tool = doc.get("tool") or {}
        summary = doc.get("summary") or {}
        lines = [f"# cuda4amd: {verdict.upper()} — {text(headline(doc))}", ""]
        lines.append(
            f"**Target** {code(target.get('path', ''))} ({text(target.get('kind', ''))}) · "
            f"**ZLUDA** {text(zluda.get('release', ''))} · "
            f"**cuda4amd** {text(tool.get('version', ''))} ({text(doc.get('engine', ''))} reader)"
        )
        lines.append("")
        counts = (
            f"{counted(summary.get('binaries', 0), 'binary', 'binaries')} in "
            f"{counted(summary.get('files', 0), 'file')}: "
            f"{summary.get('cuda_binaries', 0)} use CUDA — {summary.get('ready', 0)} ready, "
            f"{summary.get('degraded', 0)} degraded, {summary.get('blocked', 0)} blocked"
        )
        if summary.get("unread", summary.get("errors")):
            counts += f"; {summary.get('unread', summary.get('errors'))} could not be read"
        lines.append(counts + ".")
        if parts_line(summary):
            lines += ["", text(parts_line(summary)) + "."]
        if doc.get("basis"):
            lines += ["", f"> {text(doc['basis'])}"]
            if SOFTWARE_ONLY_HERE in doc["basis"]:
                lines += [">", f"> for another machine: {code('--host FILE.json')} (from "
                               f"{code('cuda4amd doctor --format json')})"]
        return "\n".join(lines)

    def summary(self, level: Detail) -> str:
        parts = ["## Summary"]
        if self.packages:
            rows = [[text(f"{p['name']} {p.get('version', '')}".strip()), f"**{p['verdict']}**",
                     text(_cut("; ".join([binary_counts(p, self.by_path), *own_reasons(p)]), level.reason_chars))]
                    for p in self.packages[: level.rows]]
            parts.append(_table(["package", "verdict", "CUDA binaries (their reasons below)"], rows)
                         + self._more(self.packages, level.rows))
        if self.cuda:
            groups = reason_groups(self.cuda)
            said = {reason for _, reason, _ in groups}
            rows = [[_group_cell(members), f"**{verdict}**",
                     text(_cut(without_repeats(reason, said) or "—", level.reason_chars))]
                    for verdict, reason, members in groups[: level.rows]]
            rest = [b for _, _, members in groups[level.rows:] for b in members]
            parts.append(_table(["binary", "verdict", "deciding reason"], rows) + self._more(rest, 0))
        else:
            parts.append("No binary here uses CUDA, so ZLUDA has nothing to do." if self.binaries
                         else "No binaries were found.")
        no_cuda = len(self.binaries) - len(self.cuda)
        if no_cuda and self.cuda:
            parts.append(f"{counted(no_cuda, 'binary', 'binaries')} without CUDA not listed.")
        return "\n\n".join(parts)

    @staticmethod
    def _more(items: list[dict], shown: int) -> str:
        rest = items[shown:]
        if not rest:
            return ""
        counts: dict[str, int] = {}
        for item in rest:
            counts[item["verdict"]] = counts.get(item["verdict"], 0) + 1
        detail = ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: ORDER.get(kv[0], 9)))
        return f"\n\n… and {len(rest)} more ({detail})"

    def advice(self, level: Detail) -> str:
        # one line per piece of advice, naming every package it is for; a line whose settings an earlier
        # one already said (TORCHDYNAMO_DISABLE=1 for torch's Inductor and for Triton) adds its package there
        by_advice: dict[str, list[str]] = {}
        by_setting: dict[str, str] = {}
        for package in self.packages:
            for advice in (package.get("advice") or [])[: level.items]:
                named = settings(advice)
                earlier = {by_setting.get(s) for s in named}
                if advice not in by_advice and named and None not in earlier and len(earlier) == 1:
                    advice = earlier.pop() or advice
                names = by_advice.setdefault(advice, [])
                if package["name"] not in names:
                    names.append(package["name"])
                for setting in named:
                    by_setting.setdefault(setting, advice)
        lines = []
        for advice, names in list(by_advice.items())[: level.rows]:
            who = ", ".join(text(n) for n in names[:3]) + (
                f" and {len(names) - 3} more packages" if len(names) > 3 else "")
            lines.append(f"- **{who}**: {text(advice)}")
        return "## What to try\n\n" + "\n".join(lines) if lines else ""

    def host(self) -> str:
        return host_section(self.doc.get("host"))

    def zluda(self, level: Detail) -> str:
        zluda = self.doc.get("zluda") or {}
        release = zluda.get("release", "")
        commit = zluda.get("commit") or ""
        line = f"Judged against ZLUDA **{text(release)}**"
        if re.fullmatch(r"[0-9a-f]{7,40}", commit):
            line += f" (commit [{code(commit[:8])}]({ZLUDA_REPOSITORY}/commit/{commit}))"
        elif commit:
            line += f" (commit {code(commit)})"
        line += (": its file table decides which NVIDIA libraries it replaces, its function tables which functions "
                 "are implemented, stubs or missing.")
        return "## ZLUDA\n\n" + line

    def environment(self, *, full: bool = True) -> str:
        """Collapsed: every installed distribution with its version, and the command line that made the report."""
        distributions = self.doc.get("distributions") or []
        command = self.doc.get("command")
        parts = []
        if distributions:
            if full:
                body = _table(["distribution", "version"], [[text(d.get("name", "")), text(d.get("version", ""))]
                                                            for d in distributions])
            else:
                body = ", ".join(f"{text(d.get('name', ''))} {text(d.get('version', ''))}" for d in distributions)
            parts.append("<details>\n<summary>Installed distributions "
                         f"({len(distributions)})</summary>\n\n{body}\n\n</details>")
        if command:
            longest = max((len(run) for run in re.findall(r"`+", command)), default=0)
            fence = "`" * max(3, longest + 1)
            parts.append(f"<details>\n<summary>Command line</summary>\n\n{fence}\n{command}\n{fence}\n\n</details>")
        return "## Environment\n\n" + "\n\n".join(parts) if parts else ""

    def graph(self, level: Detail) -> str:
        diagram = _Diagram(self).render(level.graph_nodes)
        if diagram is None:
            return ""
        body, caption = diagram
        return "## Dependency graph (CUDA part)\n\n```mermaid\n" + body + "\n```\n\n" + caption

    def sections(self, sections: list[str], skipped_ready: list[dict], omitted: int, level: Detail) -> str:
        if not sections and not skipped_ready and not omitted:
            return ""
        parts = ["## CUDA binaries"]
        parts += sections
        if omitted:
            parts.append(f"… {counted(omitted, 'more binary', 'more binaries')} left out to keep this report under "
                         f"GitHub's {GITHUB_LIMIT:,}-character limit; the JSON report (`--format json`) has them all.")
        if skipped_ready:
            parts.append(f"Ready ({len(skipped_ready)}): " + _listed([b["path"] for b in skipped_ready], level.rows))
        return "\n\n".join(parts)

    def section(self, binary: dict, level: Detail) -> str:
        # the deciding reason is said in the summary table, the advice under "What to try": not again here
        title = f"<b>{_h(binary['verdict'])}</b> <code>{_h(binary['path'])}</code>"
        body: list[str] = []
        reasons = (binary.get("reasons") or [])[1:]
        if reasons:
            body.append("Also:\n" + "\n".join(f"- {text(r)}" for r in reasons[: level.items])
                        + (f"\n- … and {len(reasons) - level.items} more" if len(reasons) > level.items else ""))
        me = binary.get("nvidia_library")
        if me:
            line = f"This file is NVIDIA's {code(me.get('family'))} library: route **{text(me.get('route'))}**"
            if me.get("replacement"):
                line += f" — ZLUDA's {code(me['replacement'])} takes its place, so this file is not used"
            body.append(line + ".")
        deps = binary.get("dependencies") or []
        cuda_deps = [d for d in deps if d.get("family") is not None]
        if cuda_deps:
            rows = [[code(d["name"]), text(d.get("load", "")), text(d["family"]), self._route(d), self._found(d),
                     self._functions(d)]
                    for d in cuda_deps]
            body.append(_table(["CUDA library", "load", "family", "route", "found", "functions"], rows))
            for dep in cuda_deps:
                for state, label in (("missing", "Missing from ZLUDA"), ("stub", "Stubs (return NOT_SUPPORTED)")):
                    names = (dep.get("symbols") or {}).get(state) or []
                    if names:
                        listed = f": {_listed(names, level.names)}" if level.names else ""
                        body.append(f"{label} in {code(dep['name'])} ({len(names)}){listed}")
        other = [d for d in deps if d.get("family") is None]
        if other:
            body.append("Other libraries it loads: " + _listed(other, level.items, self._other))
        kernels = binary.get("kernels") or {}
        if kernels.get("state") and kernels["state"] != "none":
            body.append(self._kernels(kernels, level))
        package = self.package_of.get(binary["path"])
        notes = binary.get("notes") or []
        if notes:
            body.append("\n".join(f"- note: {text(n)}" for n in notes[: level.items])
                        + (f"\n- … and {len(notes) - level.items} more notes" if len(notes) > level.items else ""))
        facts = [text(binary.get("format", "")), text(binary.get("kind", "")), text(binary.get("machine", ""))]
        if binary.get("size"):
            facts.append(f"{binary['size']:,} bytes")
        if package:
            facts.append(f"package {text(package['name'])}")
        body.append("<sub>" + " · ".join(f for f in facts if f) + "</sub>")
        return f"<details>\n<summary>{title}</summary>\n\n" + "\n\n".join(body) + "\n\n</details>"

    @staticmethod
    def _route(dep: dict) -> str:
        route = f"**{text(dep.get('route'))}**"
        if dep.get("replacement"):
            route += f" → ZLUDA's {code(dep['replacement'])}"
        return route

    @staticmethod
    def _found(dep: dict) -> str:
        how = dep.get("how") or "unresolved"
        if dep.get("resolved"):
            return f"{code(dep['resolved'])} ({text(how)})"
        if dep.get("replacement"):
            return "not in the scanned tree (ZLUDA provides it)"
        return "not in the scanned tree"

    @staticmethod
    def _functions(dep: dict) -> str:
        symbols = dep.get("symbols") or {}
        parts = [f"{len(symbols[s])} {s}" for s in REPORT_SYMBOL_STATES if symbols.get(s)]
        if dep.get("ordinals"):
            parts.append(f"{len(dep['ordinals'])} by ordinal")
        return ", ".join(parts) or "—"

    @staticmethod
    def _other(dep: dict) -> str:
        how = dep.get("how") or "unresolved"
        if how == "unresolved":
            return f"{code(dep['name'])} (not found)"
        where = f" {code(dep['resolved'])}" if dep.get("resolved") and dep["resolved"] != dep["name"] else ""
        return f"{code(dep['name'])} ({text(how)}{where})"

    @staticmethod
    def _kernels(kernels: dict, level: Detail) -> str:
        lines = [f"Kernels: {text(KERNEL_STATE.get(kernels['state'], kernels['state']))}."]
        ptx = [f"{p['arch']} (ISA {p['isa']})" for p in kernels.get("ptx") or []]
        if ptx:
            lines.append(f"PTX: {_listed(ptx, level.items, text)}")
        relocatable = [f"{p['arch']} (ISA {p['isa']})" for p in kernels.get("relocatable_ptx") or []]
        if relocatable:
            lines.append(f"relocatable PTX: {_listed(relocatable, level.items, text)}")
        if kernels.get("sass"):
            lines.append(f"SASS: {_listed(kernels['sass'], level.items * 2, text)}")
        if kernels.get("lto_ir"):
            lines.append(f"LTO-IR: {_listed(kernels['lto_ir'], level.items, text)}")
        summary = lines[0] + (" " + "; ".join(lines[1:]) + "." if len(lines) > 1 else "")
        check = ptx_check_line(kernels.get("ptx_check"))
        unregistered = unregistered_ptx_line(kernels.get("unregistered_ptx_check"))
        return summary + (f" {text(check)}." if check else "") + (f" {text(unregistered)}." if unregistered else "")

    def errors(self, level: Detail) -> str:
        unread, notes = read_problems(self.doc)
        sections = []
        for title, errors in (("Files that could not be read", unread), ("Files read with a note", notes)):
            if not errors:
                continue
            shown = errors[: level.rows]
            rows = [[code(e.get("path", "")), text(e.get("stage", "")),
                     text(_cut(e.get("message", ""), level.reason_chars))]
                    for e in shown]
            more = f"\n\n… and {len(errors) - len(shown)} more" if len(errors) > len(shown) else ""
            sections.append(f"## {title}\n\n" + _table(["file", "stage", "problem"], rows) + more)
        return "\n\n".join(sections)

    def footer(self) -> str:
        doc = self.doc
        tool = doc.get("tool") or {}
        return (f"---\n<sub>{_h(tool.get('name', 'cuda4amd'))} {_h(tool.get('version', ''))} · report schema "
                f"{_h(doc.get('schema', ''))} · the same report as JSON: <code>--format json</code>; "
                f"render a saved one again with <code>cuda4amd report scan.json --format markdown</code></sub>")


def host_section(host: dict | None) -> str:
    """The "## Host" section: what the host report says, as a table (also `cuda4amd doctor --format markdown`)."""
    if not host:
        return ("## Host\n\nNot examined. To judge for the machine that runs the application, attach the output of "
                "`cuda4amd doctor --format json` from it, or scan there with `--host auto`.")
    rows: list[list[str]] = []
    if host.get("os"):
        rows.append(["OS", text(host["os"])])
    gpus = host.get("gpus") or []
    selected = host.get("selected_gpu")
    if selected is not None and 0 <= selected < len(gpus):
        rows.append(["GPU", _gpu(gpus[selected], bold=True)])
    elif not gpus:
        rows.append(["GPU", "no AMD GPU found"])
    others = [g for i, g in enumerate(gpus) if i != selected]
    if others:
        rows.append(["other GPUs" if selected is not None else "GPUs", "<br>".join(_gpu(g) for g in others)])
    runtime = host.get("hip_runtime")
    if runtime:
        value = (f"{code(runtime.get('library', ''))} {text(runtime.get('version') or 'version unknown')} "
                 f"({text(runtime.get('source', ''))})")
        if runtime.get("error"):
            value += f" — {text(runtime['error'])}"
        rows.append(["HIP runtime", value])
    else:
        rows.append(["HIP runtime", "not found"])
    sdks = host.get("hip_sdks") or []
    if not sdks:
        rows.append(["HIP SDK", "not found"])
    gfx = gpus[selected].get("gfx") if selected is not None and 0 <= selected < len(gpus) else None
    rows += _sdk_rows(sdks, host.get("selected_sdk"), gfx)
    zluda = host.get("zluda") or []
    if zluda:
        for install in zluda:
            where = ", ".join(install.get("where") or [])
            releases = ", ".join(install.get("releases") or []) or "release not recognised"
            rows.append(["ZLUDA found", f"{code(install.get('path', ''))}" + (f" ({text(where)})" if where else "")
                         + f": {text(releases)}"])
    else:
        rows.append(["ZLUDA found", "no"])
    for name, value in sorted((host.get("environment") or {}).items()):
        rows.append([code(name), code(value)])
    return "## Host\n\n" + _table(["component", "found"], rows)


def _sdk_rows(sdks: list[dict], chosen: int | None, gfx: str | None) -> list[list[str]]:
    """The host table's rows of each HIP SDK: version, folder and libraries, then (for the selected
    GPU's `gfx`) whether each kernel library has kernels for it."""
    rows: list[list[str]] = []
    for i, sdk in enumerate(sdks):
        label = "HIP SDK" if i == chosen else "other HIP SDK"
        version = sdk.get("version") or "version unknown"
        if sdk.get("full_version") and sdk.get("full_version") != version:
            version += f" ({sdk['full_version']})"
        libraries = sdk.get("libraries") or {}
        present = ", ".join(f"{_library_name(k)} {'yes' if v.get('present') else '**no**'}"
                            for k, v in libraries.items())
        rows.append([label, f"{text(version)} at {code(sdk.get('path', ''))}" + (f"<br>{present}" if present else "")])
        for name, kernels in (sdk.get("kernels") or {}).items():
            if gfx:
                has = gfx in (kernels.get("archs") or [])
                rows.append([f"{_library_name(name)} kernels", f"{code(gfx)}: {'yes' if has else '**none**'}"])
    return rows


def _group_cell(members: list[dict]) -> str:
    if len(members) == 1:
        return code(members[0]["path"])
    return text(group_label(members))


def _gpu(gpu: dict, bold: bool = False) -> str:
    name = text(gpu.get("name", ""))
    out = f"**{name}**" if bold else name
    facts = []
    if gpu.get("gfx"):
        facts.append(code(gpu["gfx"]))
    if gpu.get("integrated"):
        facts.append("integrated")
    if gpu.get("hip_index") is not None:
        facts.append(f"HIP device {gpu['hip_index']}")
    if gpu.get("driver_version"):
        facts.append(f"driver {text(gpu['driver_version'])}")
    if gpu.get("memory_gb"):
        facts.append(f"{gpu['memory_gb']:g} GB")
    return out + (" · " + " · ".join(facts) if facts else "")


def _join(parts: list[str]) -> str:
    return "\n\n".join(p for p in parts if p) + "\n"


def _hard_trim(value: str, budget: int) -> str:
    """Last resort for tiny budgets: cut at a line, close what is open, say so."""
    note = "\n\n… cut here to stay under the size limit; the JSON report has everything.\n"
    cut = value[: max(0, budget - len(note) - 40)]
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    closing = ""
    if cut.count("```") % 2:
        closing += "\n```"
    closing += "\n</details>" * max(0, cut.count("<details>") - cut.count("</details>"))
    return (cut + closing + note)[:budget]


# ---------------------------------------------------------------------------
# the Mermaid diagram
# ---------------------------------------------------------------------------

_CLASSES = {
    "ready": "fill:#dff5e1,stroke:#2da44e,color:#1f2328",
    "degraded": "fill:#fff4d6,stroke:#bf8700,color:#1f2328",
    "blocked": "fill:#ffe1e1,stroke:#cf222e,color:#1f2328",
    "unknown": "fill:#f6f8fa,stroke:#8c959f,color:#1f2328",
}


def _label(value: str) -> str:
    out = value.replace("#", "#35;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
    return out.replace("`", "#96;")


def _short(path: str, limit: int = 60) -> str:
    if len(path) <= limit:
        return path
    parts = path.split("/")
    tail = parts[-1]
    for part in reversed(parts[:-1]):
        if len(part) + len(tail) + 3 > limit:
            break
        tail = f"{part}/{tail}"
    return "…/" + tail


@dataclass
class _Node:
    key: str
    label: str
    state: str
    shape: str  # "box" | "lib"
    members: tuple[str, ...] = ()
    family: str = ""  # libraries: what they are
    route: str = ""


#: the diagram's nodes by key, and its edges (source, target) with how the source loads the target
Nodes = dict[str, _Node]
Edges = dict[tuple[str, str], set[str]]


class _Diagram:
    """The CUDA part of the dependency graph, collapsed until it is readable."""

    def __init__(self, report: _Report) -> None:
        self.report = report

    def render(self, max_nodes: int) -> tuple[str, str] | None:
        report = self.report
        if not report.cuda:
            return None
        cuda_paths = {b["path"] for b in report.cuda}
        libraries: dict[str, dict] = {}
        edges: dict[tuple[str, str], set[str]] = {}
        skipped = 0
        for binary in report.cuda:
            for dep in binary.get("dependencies") or []:
                resolved = dep.get("resolved")
                if resolved in report.by_path:
                    if resolved in cuda_paths or dep.get("family") is not None:
                        edges.setdefault((f"bin:{binary['path']}", f"bin:{resolved}"), set()).add(
                            dep.get("load", "static"))
                    else:
                        skipped += 1
                elif dep.get("family") is not None:
                    name = dep["name"]
                    key = f"lib:{loader_key(name, platform_of(binary.get('format') or 'ELF'))}"
                    libraries.setdefault(key, {"name": name, "family": dep["family"],
                                               "route": dep.get("route") or "unknown"})
                    edges.setdefault((f"bin:{binary['path']}", key), set()).add(dep.get("load", "static"))
                else:
                    skipped += 1
        for path in {t[4:] for _, t in edges if t.startswith("bin:")} - cuda_paths:
            cuda_paths.add(path)  # an in-tree NVIDIA library only a CUDA binary reaches (no-cuda itself)

        nodes: dict[str, _Node] = {}
        for path in sorted(cuda_paths):
            binary = report.by_path[path]
            me = binary.get("nvidia_library")
            # the label says what the colour says: the binary's verdict (its route is in its section)
            label = _short(path) + (f"<br/>NVIDIA {me['family']} library · {binary['verdict']}" if me else "")
            nodes[f"bin:{path}"] = _Node(f"bin:{path}", label,
                                         binary["verdict"] if binary["verdict"] != "no-cuda" else "unknown",
                                         "box", (path,))
        for key, lib in sorted(libraries.items()):
            nodes[key] = _Node(key, f"{lib['name']}<br/>{lib['family']} · {lib['route']}",
                               ROUTE_STATE.get(lib["route"], "unknown"), "lib", (lib["name"],), lib["family"],
                               lib["route"])
        notes = []
        nodes, edges = self._group_binaries(nodes, edges)
        if any(len(n.members) > 1 and n.shape == "box" for n in nodes.values()):
            notes.append("binaries with the same verdict that load the same CUDA libraries are one node")
        if len(nodes) > PROBLEM_PATHS_ABOVE:
            kept_nodes, kept_edges = self._problem_paths(nodes, edges)
            if kept_nodes and len(kept_nodes) < len(nodes):
                left = sum(len(n.members) for k, n in nodes.items() if k not in kept_nodes and n.shape == "box")
                nodes, edges = kept_nodes, kept_edges
                notes.append("only the blocked and degraded binaries and what they load are drawn"
                             + (f" ({counted(left, 'ready binary', 'ready binaries')} left out)" if left else ""))
        if len(nodes) > max_nodes:
            nodes, edges = self._merge(nodes, edges, self._by_family)
            notes.append("libraries are drawn per family and route")
        if len(nodes) > max_nodes:
            nodes, edges = self._merge(nodes, edges, self._by_verdict)
            notes.append("binaries are drawn per verdict")
        return self._text(nodes, edges), self._caption(len(report.binaries) - len(report.cuda), skipped, notes)

    # -- collapsing ----------------------------------------------------------------

    def _group_binaries(self, nodes: Nodes, edges: Edges) -> tuple[Nodes, Edges]:
        """Binaries nothing shown loads, with the same verdict and the same outgoing edges, become one node."""
        has_incoming = {t for _, t in edges}
        signature: dict[str, tuple] = {}
        for key, node in nodes.items():
            if node.shape != "box" or key in has_incoming:
                continue
            out = tuple(sorted((t, tuple(sorted(loads))) for (s, t), loads in edges.items() if s == key))
            signature[key] = (node.state, out)
        groups: dict[tuple, list[str]] = {}
        for key, sig in signature.items():
            groups.setdefault(sig, []).append(key)

        def rename(key: str) -> str:
            sig = signature.get(key)
            if sig is None or len(groups[sig]) == 1:
                return key
            return "group:" + groups[sig][0]

        def merged(keys: list[str], new_key: str) -> _Node:
            members = tuple(m for k in keys for m in nodes[k].members)
            names: dict[str, int] = {}
            for member in members:
                name = member.rsplit("/", 1)[-1]
                names[name] = names.get(name, 0) + 1
            shown = [_short(n, 32) + (f" \N{MULTIPLICATION SIGN}{c}" if c > 1 else "")
                     for n, c in list(names.items())[:3]]
            label = f"{len(members)} binaries<br/>" + ", ".join(shown) + (
                f" +{len(names) - 3} more" if len(names) > 3 else "")
            return _Node(new_key, label, nodes[keys[0]].state, "box", members)

        return self._apply(nodes, edges, rename, merged)

    @staticmethod
    def _problem_paths(nodes: Nodes, edges: Edges) -> tuple[Nodes, Edges]:
        """The blocked and degraded binaries, what they load (directly: the edge is where the problem shows),
        and the blocked or degraded libraries; ready binaries that load nothing troubled are left out."""
        troubled = {k for k, n in nodes.items() if n.state in ("blocked", "degraded")}
        keep = set(troubled)
        for (source, target) in edges:
            if source in troubled:
                keep.add(target)
        kept_nodes = {k: n for k, n in nodes.items() if k in keep}
        kept_edges = {(s, t): loads for (s, t), loads in edges.items() if s in keep and t in keep}
        return kept_nodes, kept_edges

    @staticmethod
    def _by_family(key: str, node: _Node) -> str:
        return f"family:{node.family}:{node.route}" if node.shape == "lib" else key

    @staticmethod
    def _by_verdict(key: str, node: _Node) -> str:
        return f"verdict:{node.state}" if node.shape == "box" else key

    def _merge(self, nodes: Nodes, edges: Edges, rule: Callable[[str, _Node], str]) -> tuple[Nodes, Edges]:
        def rename(key: str) -> str:
            return rule(key, nodes[key])

        def merged(keys: list[str], new_key: str) -> _Node:
            first = nodes[keys[0]]
            members = tuple(sorted({m for k in keys for m in nodes[k].members}))
            if first.shape == "lib":
                label = f"{first.family} · {first.route}<br/>" + ", ".join(members[:3]) + (
                    f" +{len(members) - 3} more" if len(members) > 3 else "")
            else:
                label = f"{len(members)} {first.state} {'binary' if len(members) == 1 else 'binaries'}"
            return _Node(new_key, label, first.state, first.shape, members, first.family, first.route)

        return self._apply(nodes, edges, rename, merged)

    @staticmethod
    def _apply(nodes: Nodes, edges: Edges, rename: Callable[[str], str],
               merged: Callable[[list[str], str], _Node]) -> tuple[Nodes, Edges]:
        grouped: dict[str, list[str]] = {}
        for key in nodes:
            grouped.setdefault(rename(key), []).append(key)
        new_nodes = {k: (nodes[v[0]] if len(v) == 1 and k == v[0] else merged(v, k)) for k, v in grouped.items()}
        new_edges: dict[tuple[str, str], set[str]] = {}
        for (s, t), loads in edges.items():
            s2, t2 = rename(s), rename(t)
            if s2 != t2:
                new_edges.setdefault((s2, t2), set()).update(loads)
        return new_nodes, new_edges

    # -- text ------------------------------------------------------------------------

    def _text(self, nodes: dict[str, _Node], edges: dict[tuple[str, str], set[str]]) -> str:
        order = sorted(nodes.values(), key=lambda n: (n.shape == "lib", ORDER.get(n.state, 9), n.key))
        ids: dict[str, str] = {}
        rank: dict[str, int] = {}
        for node in order:
            rank[node.key] = len(ids)
            ids[node.key] = f"{'l' if node.shape == 'lib' else 'b'}{len(ids)}"

        def line(node: _Node, indent: str) -> str:
            label = "<br/>".join(_label(part) for part in node.label.split("<br/>"))
            shape = f'(["{label}"])' if node.shape == "lib" else f'["{label}"]'
            return f"{indent}{ids[node.key]}{shape}:::{node.state}"

        # binaries of one installed package are drawn in its box
        packages: dict[str, list[_Node]] = {}
        loose: list[_Node] = []
        for node in order:
            owners = ({(self.report.package_of.get(m) or {}).get("name") for m in node.members}
                      if node.shape == "box" else {None})
            owner = owners.pop() if len(owners) == 1 else None
            (packages.setdefault(owner, []) if owner else loose).append(node)
        lines = ["flowchart LR"]
        for number, (name, members) in enumerate(sorted(packages.items(), key=lambda kv: kv[0].casefold())):
            version = next((p.get("version") for p in self.report.doc.get("packages") or [] if p.get("name") == name),
                           "")
            lines.append(f'  subgraph p{number}["{_label(f"{name} {version}".strip())}"]')
            lines += [line(node, "    ") for node in members]
            lines.append("  end")
        lines += [line(node, "  ") for node in loose]
        for (source, target), loads in sorted(edges.items(), key=lambda e: (rank[e[0][0]], rank[e[0][1]])):
            if loads == {"static"}:
                lines.append(f"  {ids[source]} --> {ids[target]}")
            elif "delay" in loads:  # dashed says "not at start-up"; the label tells delay-loading from by-name
                lines.append(f"  {ids[source]} -. delay .-> {ids[target]}")
            else:
                lines.append(f"  {ids[source]} -.-> {ids[target]}")
        used = sorted({n.state for n in nodes.values()})
        for state in used:
            lines.append(f"  classDef {state} {_CLASSES.get(state, _CLASSES['unknown'])}")
        return "\n".join(lines)

    @staticmethod
    def _caption(no_cuda: int, skipped: int, notes: list[str]) -> str:
        parts = ["Boxes are binaries (colour and label: verdict), framed by the package that installed them; rounded "
                 "nodes the CUDA libraries they load from outside the tree (colour and label: route); solid arrows "
                 "are imports, dashed ones libraries loaded by name at run time (\"delay\": delay-loaded imports)."]
        left_out = []
        if no_cuda:
            left_out.append(counted(no_cuda, "binary", "binaries") + " without CUDA")
        if skipped:
            left_out.append(counted(skipped, "non-CUDA dependency", "non-CUDA dependencies"))
        if left_out:
            parts.append("Left out: " + " and ".join(left_out) + ".")
        if notes:
            parts.append("To keep it readable, " + "; ".join(notes) + ".")
        return " ".join(parts)


def _library_name(key: str) -> str:
    """The human name of a HIP SDK library key, from host.sdk's table (the one source)."""
    from cuda4amd.host.sdk import LIBRARIES

    return LIBRARIES[key][0] if key in LIBRARIES else key
