"""The console summary: the verdict in one line, then the CUDA-using binaries and why."""
from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from cuda4amd.report.escape import visible_document

STYLE = {"ready": "green", "degraded": "yellow", "blocked": "red", "no-cuda": "dim", "partial": "yellow"}
HEADLINE = {
    "ready": "every CUDA binary can run through ZLUDA",
    "partial": "some CUDA binaries can run through ZLUDA, some cannot",
    "blocked": "no CUDA binary here can run through ZLUDA",
    "no-cuda": "nothing here uses CUDA",
}


def render(document: dict, *, verbose: bool = False, color: bool = False, width: int = 120) -> str:
    document = visible_document(document)  # no name from the tree reaches the terminal as control characters
    out = io.StringIO()
    console = Console(file=out, force_terminal=color, no_color=not color, width=width, highlight=False)
    _print(console, document, verbose)
    return out.getvalue()


def _print(console: Console, doc: dict, verbose: bool) -> None:
    verdict = doc["verdict"]
    summary = doc["summary"]
    console.print(
        Text.assemble(
            (f"{verdict.upper()}", f"bold {STYLE[verdict]}"),
            f"  {HEADLINE[verdict]}  ",
            (f"({escape(doc['target']['path'])}, ZLUDA {doc['zluda']['release']})", "dim"),
        )
    )
    console.print(
        f"{summary['binaries']} binaries in {summary['files']} files: {summary['cuda_binaries']} use CUDA — "
        f"{summary['ready']} ready, {summary['degraded']} degraded, {summary['blocked']} blocked"
        + (f"; {summary['errors']} could not be read" if summary["errors"] else ""),
        style="dim",
    )
    console.print(Text(doc["basis"], style="dim italic"))

    packages = [p for p in doc.get("packages", []) if p["verdict"] != "no-cuda"]
    if packages:
        _print_packages(console, packages, verbose)
    cuda = [b for b in doc["binaries"] if b["verdict"] != "no-cuda"]
    if packages and not verbose:
        # the packages lead; of their files, only the ones that are not ready follow
        cuda = [b for b in cuda if b["verdict"] != "ready" or not b.get("distribution")]
    if cuda:
        table = Table(show_header=True, header_style="bold", expand=False, show_lines=verbose)
        table.add_column("binary", overflow="fold")
        table.add_column("verdict")
        table.add_column("why", overflow="fold")
        order = {"blocked": 0, "degraded": 1, "ready": 2}
        for binary in sorted(cuda, key=lambda b: (order[b["verdict"]], b["path"])):
            why = binary["reasons"][0] if binary["reasons"] else ""
            if verbose:
                why = Text("\n").join([Text(r) for r in binary["reasons"]] + _details(binary))
            table.add_row(escape(binary["path"]), Text(binary["verdict"], style=STYLE[binary["verdict"]]), why)
        console.print(table)

    from cuda4amd.evidence.render import console_lines

    for line in console_lines(doc):
        console.print(escape(line), style="dim")
    if doc["errors"]:
        console.print(f"{len(doc['errors'])} file(s) could not be read:", style="bold")
        for error in doc["errors"]:
            console.print(f"  {escape(error['path'])}: {escape(error['message'])}")


def _print_packages(console: Console, packages: list[dict], verbose: bool) -> None:
    table = Table(show_header=True, header_style="bold", expand=False, show_lines=verbose, title="packages", title_justify="left")
    table.add_column("package", overflow="fold")
    table.add_column("verdict")
    table.add_column("why", overflow="fold")
    order = {"blocked": 0, "partial": 1, "ready": 2}
    for package in sorted(packages, key=lambda p: (order[p["verdict"]], p["name"].lower())):
        reasons = package["reasons"] if verbose else package["reasons"][:1]
        why = Text("\n").join([Text(r) for r in reasons] + [Text(f"→ {a}", style="cyan") for a in package["advice"]])
        table.add_row(
            escape(f"{package['name']} {package['version']}"),
            Text(package["verdict"], style=STYLE[package["verdict"]]),
            why,
        )
    console.print(table)


def _details(binary: dict) -> list[Text]:
    lines = []
    for dep in binary["dependencies"]:
        if dep["family"] is None:
            continue
        if dep["replacement"]:
            where = f"ZLUDA's {dep['replacement']}"
        else:
            where = dep["resolved"] or "not in the scanned tree"
        lines.append(Text(f"· {dep['name']} [{dep['load']}] {dep['family']} → {dep['route']}: {where}", style="cyan"))
        for state in ("stub", "missing"):
            names = dep["symbols"].get(state)
            if names:
                lines.append(Text(f"    {state}: {', '.join(names)}", style=STYLE["degraded" if state == "stub" else "blocked"]))
    for note in binary["notes"]:
        lines.append(Text(f"note: {note}", style="dim"))
    return lines
