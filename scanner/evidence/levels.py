"""Evidence levels: how far what was observed backs each claim, per family and per binary.

Levels, lowest first (a claim gets the highest one that was shown, never more):

* ``static`` — the scan's verdict, from reading the files;
* ``linked`` — after the fix, the dependency resolves to ZLUDA's file with the
  sha256 the release has (fix.verify's dependency checks, all passed);
* ``loadable`` — a smoke probe loaded the library and its first call answered,
  but the probe did not pass (incorrect, timeout, hang or crash after that);
* ``safe-refusal`` — the library answered "not supported" cleanly (cuFFT through
  ZLUDA): the application gets an error it can handle, not a wrong answer;
* ``functional-pass`` — the probe's computation matched Python's.

A binary's level is the lowest of its CUDA families' levels, and no higher than
``static`` when one of its own dependency checks failed or it is blocked.
Input and output are plain data: the report document's binaries, the
verification's ``to_dict()`` and probe outcomes as dicts (runner.Outcome.to_dict).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["LEVELS", "evidence_section", "probe_level", "rank"]

LEVELS = ("static", "linked", "loadable", "safe-refusal", "functional-pass")
ROUTE_ORDER = {"blocked": 0, "unknown": 1, "stub": 2, "passthrough": 3, "redirect": 4}


def rank(level: str | None) -> int:
    return LEVELS.index(level) if level in LEVELS else -1


def probe_level(outcome: Mapping[str, Any]) -> str | None:
    """The level one probe outcome shows (None: it showed nothing beyond the static verdict)."""
    status = outcome.get("status")
    if status == "pass":
        return "functional-pass"
    if not outcome.get("loaded"):
        return None
    return "safe-refusal" if status == "unsupported" else "loadable"


def evidence_section(binaries: Sequence[Mapping[str, Any]], *, verification: Mapping[str, Any] | None = None,
                     outcomes: Iterable[Mapping[str, Any]] = (), through: str | None = None,
                     first_run: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The report's ``evidence`` field (docs/report-schema.md)."""
    by_family: dict[str, Mapping[str, Any]] = {}
    for o in outcomes:
        by_family.setdefault(str(o.get("family")), o)
    checks = [c for c in (verification or {}).get("checks", []) if c.get("what") == "dependency"]
    routes: dict[str, str] = {}
    for b in binaries:
        for d in b.get("dependencies") or []:
            fam, route = d.get("family"), d.get("route") or "unknown"
            if fam and (fam not in routes or ROUTE_ORDER.get(route, 1) < ROUTE_ORDER.get(routes[fam], 1)):
                routes[fam] = route
    families: dict[str, dict[str, Any]] = {}
    for fam in sorted(set(routes) | set(by_family)):
        fam_checks = [c for c in checks if c.get("family") == fam]
        level, shown = "static", "the scan's verdict"
        if fam_checks and all(c.get("ok") for c in fam_checks):
            n = len(fam_checks)
            level, shown = "linked", (f"{n} redirected dependenc{'y loads' if n == 1 else 'ies load'} ZLUDA's "
                                      f"file{'' if n == 1 else 's'} (sha256 checked)")
        outcome = by_family.get(fam)
        seen = probe_level(outcome) if outcome else None
        broken_link = bool(fam_checks) and level != "linked"  # the probe may not have gone through ZLUDA's file
        if outcome is not None and seen and rank(seen) > rank(level) and not broken_link:
            level = seen
        if outcome is not None:
            shown = str(outcome.get("detail", ""))
        families[fam] = {"level": level, "route": routes.get(fam),
                         "probe": outcome.get("status") if outcome else None, "detail": shown}
    levels: dict[str, str] = {}
    for b in binaries:
        if b.get("verdict") in (None, "no-cuda"):
            continue
        fams = sorted({d["family"] for d in b.get("dependencies") or [] if d.get("family")})
        own = [c for c in checks if c.get("binary") == b.get("path")]
        if b.get("verdict") == "blocked" or not fams or any(not c.get("ok") for c in own):
            levels[str(b["path"])] = "static"
            continue
        levels[str(b["path"])] = min((families[f]["level"] for f in fams), key=rank)
    return {"levels": list(LEVELS), "through": through, "families": families, "binaries": levels,
            "first_run": dict(first_run) if first_run else None}
