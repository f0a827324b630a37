"""The green-lit set: which binaries of the scan run through ZLUDA, and which of their dependencies the plan links.

Only the dependencies whose route is ``redirect`` (ZLUDA's file takes the
name) or ``passthrough`` (NVIDIA's own library on ZLUDA's driver) of binaries
that are not blocked are linked. Families the host cannot serve (no MIOpen for
cuDNN, no rocBLAS kernels for the GPU, ...) are not linked, and the binaries
that import them statically are left alone with the reason, like blocked
binaries. The driver (``nvcuda.dll`` / ``libcuda.so.1``) is always linked:
every redirected library and every passthrough library runs on it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cuda4amd.fix.plan.host_gate import excluded_families
from cuda4amd.fix.plan.model import PlanError, in_fix_dir

if TYPE_CHECKING:
    from cuda4amd.host.report import HostReport
    from cuda4amd.rules.ruleset import RuleSet
    from cuda4amd.scan.pipeline import ScanResult
    from cuda4amd.scan.verdict import BinaryVerdict

__all__ = ["GREEN_VERDICTS", "Dep", "GreenLit", "deps_of", "green_lit"]

GREEN_VERDICTS = ("ready", "degraded")


@dataclass
class Dep:
    """One CUDA dependency of a binary, as the plan sees it."""

    binary: str
    name: str
    family: str
    route: str
    load: str
    resolved: str | None
    in_tree: bool
    how: str
    replacement: str | None
    family_name: str


def deps_of(verdict: BinaryVerdict) -> list[Dep]:
    """The binary's dependencies that belong to a family (an earlier fix's own files unresolved)."""
    out = []
    for d in verdict.dependencies:
        ident, edge = d.identity, d.edge
        if ident.family is None:
            continue
        resolved, in_tree, how = edge.resolved, edge.in_tree, edge.how
        if in_tree and in_fix_dir(resolved):  # an earlier fix's own files are not the application's
            resolved, in_tree, how = None, False, "unresolved"
        out.append(Dep(verdict.binary.path, edge.name, ident.family, ident.route or "unknown", edge.load,
                        resolved, in_tree, how, ident.replacement, ident.family_name or ident.family))
    return out


@dataclass
class GreenLit:
    """What the plan links: the importers that run, their linked and passthrough
    dependencies, and what is left out with the reason."""

    importers: list[BinaryVerdict]
    linked: list[Dep]
    passthrough: set[str]
    not_linked: dict[str, dict[str, Any]]
    left: dict[str, str]         # binary path -> why it is left alone
    excluded: dict[str, str]     # family -> why this host cannot serve it
    families: list[str]


def green_lit(result: ScanResult, verdicts: list[BinaryVerdict], host: HostReport, rules: RuleSet,
              host_warnings: list[str] | None) -> GreenLit:
    deps = {v.binary.path: deps_of(v) for v in verdicts}
    left = {v.binary.path: (f"blocked: {v.reasons[0]}" if v.reasons else "blocked")
            for v in verdicts if v.verdict == "blocked"}

    def is_importer(v: BinaryVerdict) -> bool:  # a binary that runs and whose CUDA imports count
        return (v.verdict in GREEN_VERDICTS and v.binary.path not in left
                and v.identity.route not in ("redirect", "stub"))

    candidates = {d.family for v in verdicts if is_importer(v) for d in deps[v.binary.path] if d.route == "redirect"}
    excluded = excluded_families(host, sorted(candidates), rules, host_warnings)
    _leave_alone(verdicts, deps, excluded, left, is_importer)
    importers = [v for v in verdicts if is_importer(v)]
    if not importers and excluded:
        raise PlanError("the host lacks what the plan needs: "
                        + "; ".join(f"{excluded[f]}" for f in sorted(excluded))
                        + " (judge another machine with --host FILE.json)")
    if not importers:
        raise PlanError(f"nothing to link: no binary of {result.target.display} can run through ZLUDA "
                        f"({_count_text(verdicts, left)})")
    linked: list[Dep] = []
    passthrough: set[str] = set()
    not_linked: dict[str, dict[str, Any]] = {}
    for v in importers:
        for d in deps[v.binary.path]:
            if d.route == "redirect" and d.family not in excluded:
                linked.append(d)
            elif d.route == "passthrough":
                passthrough.add(d.family)
            else:
                reason = excluded.get(d.family) if d.route == "redirect" else None
                row = not_linked.setdefault(d.family, {"family": d.family, "name": d.family_name,
                                                       "route": d.route, "names": [], "why": ""})
                if d.name not in row["names"]:
                    row["names"].append(d.name)
                row["why"] = (f"this host: {reason}" if reason else _route_why(d.route))
    families = sorted({d.family for d in linked} | {"driver_api"})
    return GreenLit(importers, linked, passthrough, not_linked, left, excluded, families)


def _leave_alone(verdicts: list[BinaryVerdict], deps: dict[str, list[Dep]], excluded: dict[str, str],
                 left: dict[str, str], is_importer: Callable[[BinaryVerdict], bool]) -> None:
    """Binaries that need an excluded family statically are left alone, and so
    is whatever needs them statically (fixed point over in-tree static edges)."""
    changed = True
    while changed:
        changed = False
        for v in verdicts:
            path = v.binary.path
            if not is_importer(v):
                continue
            why = next((f"this host: {excluded[d.family]} ({d.name})" for d in deps[path]
                        if d.route == "redirect" and d.family in excluded and d.load == "static"), None)
            if why is None:
                why = next((f"needs {d.edge.resolved}, which is left alone" for d in v.dependencies
                            if d.identity.family is None and d.edge.in_tree and d.edge.load == "static"
                            and d.edge.resolved in left and d.edge.resolved != path), None)
            if why is not None:
                left[path] = why
                changed = True


def _count_text(verdicts: list[BinaryVerdict], left: dict[str, str]) -> str:
    using = [v for v in verdicts if v.verdict != "no-cuda"]
    if not using:
        return "none uses CUDA"
    return f"{len(using)} use CUDA, {len(left)} are blocked or left alone"


def _route_why(route: str) -> str:
    return {"stub": "ZLUDA's replacement only returns NOT_SUPPORTED: not linked",
            "blocked": "no AMD route through ZLUDA",
            "unknown": "an NVIDIA library cuda4amd has no rule for"}.get(route, route)


