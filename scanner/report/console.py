"""The console summary: the verdict in one line, then the CUDA-using binaries and why.

What the terminal can show is rich's to decide (`terminal`): colour from
isatty, ``NO_COLOR``, ``FORCE_COLOR`` and ``TTY_COMPATIBLE``, width from the
terminal or ``COLUMNS``, the encoding of the stream, legacy Windows consoles.
Symbols the stream's encoding cannot encode (``→`` in cp1252, what cmd.exe
gives a redirected Python) are written as ASCII (`ASCII_FALLBACK`) by the
error handler `install_ascii_fallback` sets on the stream, so every line of
every command survives any console; rich's own tables switch to ASCII boxes
on such streams by themselves.
"""
from __future__ import annotations

import codecs
import contextlib
import io
import posixpath
import re
from typing import IO, TYPE_CHECKING

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
from cuda4amd.words import counted

if TYPE_CHECKING:
    from rich.console import Console

STYLE = {"ready": "green", "degraded": "yellow", "blocked": "red", "no-cuda": "dim", "partial": "yellow",
         "incomplete": "magenta"}
COLOR_CHOICES = ("auto", "always", "never")

#: what a symbol becomes on a stream whose encoding lacks it (anything else: a \\u escape). Rich lays tables
#: out by the symbols' cells before they are replaced, so a symbol that can sit in a table cell is replaced
#: by one character: `->` for → made every advice row of a cp1252 console one column too wide
ASCII_FALLBACK = {
    "→": ">", "←": "<", "✓": "+", "✗": "x", "·": "-", "—": "--", "\N{EN DASH}": "-", "…": "...",
    "\N{MULTIPLICATION SIGN}": "x", "\N{MINUS SIGN}": "-", "≥": ">=", "≤": "<=",
    "\N{LEFT SINGLE QUOTATION MARK}": "'", "\N{RIGHT SINGLE QUOTATION MARK}": "'", "“": '"', "”": '"', "•": "*",
}
ERROR_HANDLER = "cuda4amd.ascii"



def _ascii_fallback(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    chunk = error.object[error.start:error.end]
    out = "".join(ASCII_FALLBACK.get(ch) or ch.encode("ascii", "backslashreplace").decode("ascii") for ch in chunk)
    return out, error.end


def install_ascii_fallback(*streams: object) -> None:
    """Make `streams` (text files such as sys.stdout) write ASCII for what their encoding cannot encode.

    The encoding stays what the stream has (so a UTF-8 terminal keeps its
    arrows); only characters it cannot encode are replaced. Streams that are
    not io.TextIOWrapper (a test runner's capture) are left as they are.
    """
    try:
        codecs.lookup_error(ERROR_HANDLER)
    except LookupError:
        codecs.register_error(ERROR_HANDLER, _ascii_fallback)
    for stream in streams:
        if isinstance(stream, io.TextIOWrapper):
            with contextlib.suppress(ValueError, io.UnsupportedOperation):  # a closed or detached stream
                stream.reconfigure(errors=ERROR_HANDLER)


def terminal(file: IO[str] | None = None, *, color: str = "auto", stderr: bool = False) -> Console:
    """A rich Console on `file` (default stdout) as rich detects it; --color always/never overrides the colour."""
    from rich.console import Console

    if color not in COLOR_CHOICES:
        raise ValueError(f"color must be one of {COLOR_CHOICES}, not {color!r}")
    options: dict = {"highlight": False, "stderr": stderr}
    if file is not None:
        options["file"] = file
    if color == "always":
        options.update(force_terminal=True, no_color=False)
    elif color == "never":
        options.update(no_color=True, color_system=None)

    class PipeAwareConsole(Console):
        def on_broken_pipe(self) -> None:
            # rich's default ends the process with status 1, which docs/exit-status.md keeps for a bug: raise
            # the error instead, for the command line to end with 141 as git does (cli/__init__.py)
            raise BrokenPipeError

    return PipeAwareConsole(**options)


def render(document: dict, *, verbose: bool = False, color: bool = False, width: int = 120, quiet: bool = False) -> str:
    """The console text as a string (a .txt report, tests): no colour unless asked, `width` columns."""
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=color, no_color=not color, width=width, highlight=False,
                      color_system="standard" if color else None)
    show(console, document, verbose=verbose, quiet=quiet)
    return out.getvalue()


def show(console: Console, doc: dict, *, verbose: bool = False, quiet: bool = False,
         summary_only: bool = False) -> None:
    """Print the report on `console`: the verdict line; unless `quiet`, the counts; unless `summary_only`, the rest.

    Every string is a rich Text (never markup, so a name with ``[...]`` shows as it is) of the document
    made visible (cuda4amd.report.escape: no name from the tree reaches the terminal as control characters)."""
    from rich.text import Text

    if quiet or summary_only:  # the verdict and the counts: the lists of files are not shown, so not escaped
        doc = visible_document({key: value for key, value in doc.items() if key not in ("binaries", "packages")})
    else:
        doc = visible_document(doc)
    verdict = doc["verdict"]
    summary = doc["summary"]
    console.print(
        Text.assemble(
            (f"{verdict.upper()}", f"bold {STYLE[verdict]}"),
            f"  {headline(doc)}  ",
            (f"({doc['target']['path']}, ZLUDA {doc['zluda']['release']})", "dim"),
        ),
        soft_wrap=True,  # one line, however long the path: the terminal wraps it, `grep` and -q scripts get it whole
    )
    if quiet:
        return
    console.print(Text(
        f"{counted(summary['binaries'], 'binary', 'binaries')} in {counted(summary['files'], 'file')}: "
        f"{summary['cuda_binaries']} {'uses' if summary['cuda_binaries'] == 1 else 'use'} CUDA — "
        f"{summary['ready']} ready, {summary['degraded']} degraded, {summary['blocked']} blocked"
        + (f"; {summary.get('unread', summary['errors'])} could not be read"
           if summary.get("unread", summary["errors"]) else ""),
        style="dim",
    ))
    if parts_line(summary):
        console.print(Text(parts_line(summary), style="dim"))
    if summary_only:
        return
    if doc["verdict"] != "no-cuda":  # with nothing to judge, what it was judged for says nothing
        console.print(Text(doc.get("basis") or "", style="dim italic"))
        if SOFTWARE_ONLY_HERE in (doc.get("basis") or ""):
            console.print(Text("for another machine: --host FILE.json (from `cuda4amd doctor --format json`)",
                               style="dim italic"))

    packages = [p for p in doc.get("packages", []) if p["verdict"] != "no-cuda"]
    if packages:
        _print_packages(console, packages, verbose, {b["path"]: b for b in doc["binaries"]})
    cuda = [b for b in doc["binaries"] if b["verdict"] != "no-cuda"]
    if packages and not verbose:
        # the packages lead; of their files, only the ones that are not ready follow
        cuda = [b for b in cuda if b["verdict"] != "ready" or not b.get("distribution")]
    if cuda:
        # a venv's binaries all sit under lib/python3.X/site-packages/: said once, not in every row
        below = _site_packages_of([b["path"] for b in cuda])
        if below:
            console.print(Text(f"binaries below {below}/", style="dim"))
            cuda = [{**b, "path": b["path"][len(below) + 1:]} for b in cuda]
        _print_binaries(console, cuda, verbose)

    from cuda4amd.evidence.render import console_lines

    for line in console_lines(doc):
        console.print(Text(line, style="dim"))
    _print_problems(console, doc)


def _print_problems(console: Console, doc: dict) -> None:
    """The files that could not be read, then those read with a note (judged; what the reader found odd
    on the way: document.NOTE_STAGES)."""
    from rich.text import Text

    unread, notes = read_problems(doc)
    for errors, what in ((unread, "could not be read"), (notes, "read with a note")):
        if errors:
            console.print(Text(f"{counted(len({e['path'] for e in errors}), 'file')} {what}:", style="bold"))
            for error in errors:
                console.print(Text(f"  {error['path']}: {error['message']}"))


def _print_binaries(console: Console, cuda: list[dict], verbose: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=True, header_style="bold", expand=False, show_lines=verbose)
    table.add_column("binary", overflow="fold")
    table.add_column("verdict")
    table.add_column("why", overflow="fold")
    if verbose:
        order = {"blocked": 0, "degraded": 1, "ready": 2}
        for binary in sorted(cuda, key=lambda b: (order[b["verdict"]], b["path"])):
            why = Text("\n").join([Text(r) for r in binary["reasons"]] + _details(binary))
            table.add_row(Text(binary["path"]), Text(binary["verdict"], style=STYLE[binary["verdict"]]), why)
    else:
        groups = reason_groups(cuda)
        said = {reason for _, reason, _ in groups}
        for verdict, reason, members in groups:
            table.add_row(Text(group_label(members)), Text(verdict, style=STYLE[verdict]),
                          Text(without_repeats(reason, said)))
    console.print(table)


def _print_packages(console: Console, packages: list[dict], verbose: bool, by_path: dict[str, dict]) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=True, header_style="bold", expand=False, show_lines=verbose, title="packages",
                  title_justify="left")
    table.add_column("package", overflow="fold")
    table.add_column("verdict")
    table.add_column("why", overflow="fold")
    order = {"blocked": 0, "partial": 1, "ready": 2}
    for package in sorted(packages, key=lambda p: (order[p["verdict"]], p["name"].lower())):
        # the binaries' reasons follow in their own table; the package row counts them (-v: lists them)
        reasons = [Text(r) for r in (package["reasons"] if verbose else
                                     [binary_counts(package, by_path), *own_reasons(package)])]
        why = Text("\n").join(reasons + [Text(f"→ {a}", style="cyan") for a in package["advice"]])
        table.add_row(
            Text(f"{package['name']} {package['version']}"),
            Text(package["verdict"], style=STYLE[package["verdict"]]),
            why,
        )
    console.print(table)


def _site_packages_of(paths: list[str]) -> str:
    """The site-packages folder every one of `paths` (the report's, /-separated) lies below, or ""."""
    folders = [posixpath.dirname(path) for path in paths]
    try:
        shared = posixpath.commonpath(folders).split("/") if all(folders) else []
    except ValueError:  # relative and absolute paths (libraries found through --search-path)
        return ""
    lowered = [name.lower() for name in shared]
    if "site-packages" not in lowered:
        return ""
    return "/".join(shared[:len(lowered) - lowered[::-1].index("site-packages")])


def _details(binary: dict) -> list:
    from rich.text import Text

    lines = []
    said = "\n".join(binary["reasons"])
    for dep in binary["dependencies"]:
        if dep.get("family") is None:
            continue
        if dep.get("replacement"):
            where = f"ZLUDA's {dep['replacement']}"
        else:
            where = dep.get("resolved") or "not in the scanned tree"
        lines.append(Text(f"· {dep['name']} [{dep['load']}] {dep['family']} → {dep.get('route')}: {where}",
                          style="cyan"))
        for state in ("stub", "missing"):
            names = (dep.get("symbols") or {}).get(state) or []
            # the reasons above name the first few already: only the others, so no list is read twice
            unsaid = [name for name in names if not re.search(rf"\b{re.escape(name)}\b", said)]
            if unsaid:
                also = f" (and the {len(names) - len(unsaid)} named above)" if len(unsaid) < len(names) else ""
                lines.append(Text(f"    {state}: {', '.join(unsaid)}{also}",
                                  style=STYLE["degraded" if state == "stub" else "blocked"]))
    kernels = binary.get("kernels") or {}
    checks = (ptx_check_line(kernels.get("ptx_check")), unregistered_ptx_line(kernels.get("unregistered_ptx_check")))
    for check in checks:
        if check:
            lines.append(Text(check, style="dim"))
    for note in binary.get("notes") or []:
        lines.append(Text(f"note: {note}", style="dim"))
    return lines
