"""The report document: plain data, the one shape every format renders.

Its layout is the versioned contract documented in docs/report-schema.md
(JSON Schema: report/schemas/scan.json, `cuda4amd schema scan`).
``distributions`` (every installed distribution, when the target has any)
and ``command`` (the command line, set by the CLI) are present only when known.
Bump SCHEMA when a field changes meaning or disappears; adding fields is
compatible.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from cuda4amd import __version__
from cuda4amd.model import KernelReport
from cuda4amd.scan.read.demangle import demangled_names, shown

if TYPE_CHECKING:
    from cuda4amd.scan.classify import Dependency
    from cuda4amd.scan.packages import PackageVerdict
    from cuda4amd.scan.pipeline import ScanResult
    from cuda4amd.scan.verdict import BinaryVerdict

NO_KERNELS = KernelReport()

SCHEMA = "cuda4amd.scan/3"
VERDICTS = ("ready", "degraded", "blocked", "no-cuda")
#: what the target verdict's parts are (summary.parts.basis) -> the words for one of them and for several
PART_NOUNS = {
    "binaries": ("CUDA binary", "CUDA binaries"),
    "packages": ("CUDA package", "CUDA packages"),
    "packages-and-binaries": ("CUDA package or binary", "CUDA packages and binaries"),
}
#: the headline per target verdict (docs/exit-status.md), {one}/{many}: PART_NOUNS of the basis
HEADLINES = {
    "ready": "every {one} can run through ZLUDA",
    # one text for one definition (docs/exit-status.md): some part runs, not every part fully; "it", as
    # the part may be one package that runs only in part
    "partial": "some of it can run through ZLUDA, not all of it fully",
    "blocked": "no {one} here can run through ZLUDA",
    "no-cuda": "nothing here uses CUDA",
}

#: the basis of a scan on a machine with no AMD GPU (scan/pipeline.py `_host`): the outputs add the next step,
#: judging for another machine (--host FILE.json)
SOFTWARE_ONLY_HERE = "no AMD GPU or HIP SDK was found on this machine"


#: error stages of a file that was read, with a problem noted (model.FileError; scan/verdict.py UNREAD_STAGES
#: are the others): listed apart, never counted as "could not be read"
NOTE_STAGES = frozenset({"loader", "strings"})


def read_problems(document: dict) -> tuple[list[dict], list[dict]]:
    """The document's errors as (files that could not be read, notes on files that were read)."""
    errors = document.get("errors") or []
    return ([e for e in errors if e.get("stage") not in NOTE_STAGES],
            [e for e in errors if e.get("stage") in NOTE_STAGES])


def headline(document: dict) -> str:
    """The target verdict in words, one text per state, naming the parts it rests on (summary.parts);
    `incomplete` says how many files were not read and what the rest comes to."""
    verdict = document.get("verdict", "")
    summary = document.get("summary") or {}
    one, many = PART_NOUNS.get((summary.get("parts") or {}).get("basis", ""), PART_NOUNS["binaries"])
    if verdict == "incomplete":
        unread = summary.get("unread") or summary.get("errors") or 0
        read = HEADLINES.get(summary.get("verdict_of_read", ""), "?").format(one=one, many=many)
        return f"{unread} file{'' if unread == 1 else 's'} could not be read; what was read: {read}"
    return HEADLINES.get(verdict, verdict).format(one=one, many=many)


def parts_line(summary: dict) -> str:
    """What the verdict rests on, in words, when its parts are packages ("" when they are the binaries,
    which the counts line already counts)."""
    parts = summary.get("parts") or {}
    basis = parts.get("basis", "binaries")
    if basis == "binaries":
        return ""
    total = sum(parts.get(state, 0) for state in ("ready", "partial", "blocked"))
    one, many = PART_NOUNS.get(basis, PART_NOUNS["binaries"])
    said = ", ".join(f"{parts.get(state, 0)} {state}" for state in ("ready", "partial", "blocked"))
    return f"the verdict is over {total} {one if total == 1 else many}: {said}"


def build(result: ScanResult, observed: dict | None = None) -> dict:
    """observed: what was seen after the fix, for the evidence levels
    (keys verification, outcomes, through: see cuda4amd.evidence.levels)."""
    from cuda4amd.evidence.levels import evidence_section
    from cuda4amd.host.firstrun import first_run

    binaries = [_binary(v, result.release.tag) for v in result.verdicts]
    counts = {state: sum(1 for b in binaries if b["verdict"] == state) for state in VERDICTS}
    document = {
        "schema": SCHEMA,
        "tool": {"name": "cuda4amd", "version": __version__},
        "target": {"path": result.target.display, "kind": result.target.kind},
        "verdict": result.verdict,
        "basis": result.basis,
        "host": result.host.to_dict() if result.host is not None else None,
        "zluda": {"release": result.release.tag, "commit": result.release.commit},
        "engine": result.engine,
        "summary": {
            "files": result.files_seen,
            "binaries": len(binaries),
            "cuda_binaries": len(binaries) - counts["no-cuda"],
            **{state.replace("-", "_"): n for state, n in counts.items()},
            "errors": len(result.errors),
            **_judged(result),
        },
        "packages": [_package(p) for p in result.packages],
        "binaries": binaries,
        "errors": [{"path": e.path, "stage": e.stage, "message": e.message} for e in result.errors],
        "evidence": evidence_section(binaries, first_run=first_run(result.verdicts), **(observed or {})),
    }
    distributions = getattr(result, "distributions", None)
    if distributions:
        document["distributions"] = sorted(({"name": d.name, "version": d.version} for d in distributions),
                                           key=lambda d: (d["name"].casefold(), d["version"]))
    return document


def _judged(result: ScanResult) -> dict:
    """summary.unread, .parts and .verdict_of_read: what the target verdict rests on."""
    judged = result.judged
    if judged is None:  # a result made by hand: its binaries are the parts
        from cuda4amd.scan.verdict import target_verdict

        judged = target_verdict(result.verdicts, result.packages, result.errors)
    return {"unread": judged.unread, "parts": {"basis": judged.basis, **judged.parts},
            "verdict_of_read": judged.of_read}


def _binary(verdict: BinaryVerdict, release: str) -> dict:
    binary, me = verdict.binary, verdict.identity
    info = binary.info
    entry = {
        "path": binary.path,
        "format": info.format,
        "machine": info.machine,
        "kind": info.kind,
        "size": binary.size,
        "distribution": binary.distribution,
        "verdict": verdict.verdict,
        "reasons": verdict.reasons,
        "notes": verdict.notes,
        "kernels": _kernels(binary.kernels or NO_KERNELS, release),
        "driver_names": None
        if binary.driver_names is None
        else {"names": list(binary.driver_names.names), "runtime_table": binary.driver_names.runtime_table},
        "nvidia_library": None
        if me.family is None
        else {"family": me.family, "route": me.route, "basis": me.basis, "replacement": me.replacement},
        "dependencies": [_dependency(d) for d in verdict.dependencies if d.edge.how != "system"],
    }
    return entry


def _kernels(kernels: KernelReport, release: str) -> dict:
    """The kernels' summary with ZLUDA's PTX check at the scan's release (null: not checked), the dropped
    kernels' demangled names, and the check of the containers nothing registers (null: none)."""
    check = kernels.ptx_check(release)
    if check is not None:
        check["demangled"] = demangled_names(check["dropped_kernels"])
    return {**kernels.to_dict(), "ptx_check": check, "unregistered_ptx_check": kernels.unregistered_ptx_check(release)}


def ptx_check_line(check: dict | None) -> str:
    """kernels.ptx_check in one line (Markdown and the -v console), "" when not checked."""
    if not check:
        return ""
    counts = check["containers"]
    said = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in counts.items() if n)
    line = f"PTX check (ZLUDA {check['release']}): {said} of {sum(counts.values())} registered PTX module(s)"
    if check["dropped_kernels"]:
        names = [shown(name, check.get("demangled") or {}) for name in check["dropped_kernels"][:5]]
        more = len(check["dropped_kernels"]) - len(names)
        line += f"; dropped kernels: {', '.join(names)}" + (f" and {more} more" if more > 0 else "")
    if check["first_refusal"]:
        line += f"; first: {check['first_refusal']['construct']} ({check['first_refusal']['source']})"
    return line


def unregistered_ptx_line(check: dict | None) -> str:
    """kernels.unregistered_ptx_check in one line (Markdown and the -v console), "" when there is none."""
    if not check:
        return ""
    counts = check["containers"]
    said = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in counts.items() if n)
    line = (f"PTX that nothing registers ({', '.join(check['sections'])}; not in the verdict), as ZLUDA "
            f"{check['release']} would load it: {said} of {sum(counts.values())} container(s)")
    if check["dropped_kernels"]:
        line += f"; {check['dropped_kernels']} kernels dropped"
    if check["first_refusal"]:
        line += f"; first: {check['first_refusal']['construct']} ({check['first_refusal']['source']})"
    return line


def _package(package: PackageVerdict) -> dict:
    return {
        "name": package.name,
        "version": package.version,
        "verdict": package.verdict,
        "framework": package.framework,
        "reasons": package.reasons,
        "advice": package.advice,
        "loads": package.loads,
        "generators": package.generators,
        "binaries": package.binaries,
        "counts": package.counts,
        "summary": package.summary,
    }


def _dependency(dep: Dependency) -> dict:
    edge, ident = dep.edge, dep.identity
    return {
        "name": edge.template or edge.name,
        "family": ident.family,
        "load": edge.load,
        "route": ident.route,
        "basis": ident.basis,
        "replacement": ident.replacement,
        "resolved": edge.resolved,
        "how": edge.how,
        "via": edge.via,
        "symbols": {state: list(names) for state, names in dep.symbols.items()},
        "ordinals": list(edge.ordinals),
    }
