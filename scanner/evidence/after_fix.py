"""`cuda4amd verify DIR [--run]`: check a fixed folder again and, with --run, run
the smoke probes through the fix's environment (what `cuda4amd run` sets).

The probes load each library by the names the application loads it by (the
plan's linked rows: ``cublas64_12.dll``, ``libcublas.so.12``), so they find
what the application would find: ZLUDA's file through zluda.exe's redirect
(Windows, launcher mode), LD_LIBRARY_PATH / LD_AUDIT (Linux), or the placed
file beside the binaries (place mode, where the folder of that binary is
tried first by its path).
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda4amd.evidence.record import probe_document
from cuda4amd.evidence.runner import PROBES, Outcome, run_probes
from cuda4amd.report.escape import visible
from cuda4amd.scan.pipeline import ScanOptions

if TYPE_CHECKING:
    from cuda4amd.fix.plan.model import Plan

__all__ = ["FAILING", "SCHEMA", "VerifyReport", "can_run_here", "placed_files", "probe_names", "verify_fixed"]

SCHEMA = "cuda4amd.verify/1"
#: probe statuses that make `verify --run` fail (unsupported is a safe refusal, not a failure)
FAILING = ("incorrect", "timeout", "hang", "crash")


@dataclass
class VerifyReport:
    journal: Any
    verification: Any
    scan: dict[str, Any]
    outcomes: list[Outcome] | None = None
    skipped: str | None = None  # why the probes did not run
    lines: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verification.ok and not any(o.status in FAILING for o in self.outcomes or [])

    def to_dict(self) -> dict[str, Any]:
        plan = self.journal.plan
        return {
            "schema": SCHEMA,
            "target": plan.display,
            "mode": plan.mode,
            "platform": plan.platform,
            "release": {"tag": plan.release.get("tag"), "asset": plan.release.get("asset"),
                        "sha256": plan.release_sha256},
            "families": plan.families,
            "verification": self.verification.to_dict(),
            "probes": probe_document(self.outcomes, through="zluda", zluda={"tag": plan.release.get("tag")})
            if self.outcomes is not None else None,
            "probes_skipped": self.skipped,
            "scan": self.scan,
        }

    def text(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False, default=str) + "\n"


def here() -> str:
    return "windows" if os.name == "nt" else "linux"


def can_run_here(plan: Plan) -> str | None:
    """None when this machine can run the fixed programs, else why not."""
    if plan.platform != here():
        return f"the fix is for {plan.platform.capitalize()}; the probes run there"
    return None


def probe_names(plan: Plan, root: Path) -> dict[str, list[str]]:
    """family -> the library names to try: how the application names each linked library."""
    names: dict[str, list[str]] = {}
    for row in plan.linked:
        family, name = row.get("family"), str(row.get("name") or "")
        if family not in PROBES or not name:
            continue
        base = name.replace("\\", "/").rsplit("/", 1)[-1]
        tried = names.setdefault(family, [])
        if plan.mode == "place":
            for path in placed_files(plan, root, base, str(row.get("binary") or "")):
                if path not in tried:
                    tried.append(path)
        if base not in tried:
            tried.append(base)
    return names


def placed_files(plan: Plan, root: Path, base: str, binary: str) -> list[str]:
    """Place mode: where the fix put ZLUDA's `base`, the copy in `binary`'s folder first.

    On Linux that is where the importer's RUNPATH looks (``$ORIGIN/nvlib``), not necessarily beside the
    binary (fix/plan/placements.py), so the plan's own actions say where, not a guess from the binary."""
    folder = binary.rsplit("/", 1)[0] if "/" in binary else ""
    paths = [a.path for a in plan.actions if a.kind in ("copy", "link") and a.path.rsplit("/", 1)[-1] == base
             and not a.path.startswith("/")]
    paths.sort(key=lambda p: (p.rsplit("/", 1)[0] if "/" in p else "") != folder)
    return [str(root.joinpath(*p.split("/"))) for p in paths]


def verify_fixed(root: Path, *, run: bool, limit: float = 60.0, rescan: Callable[[], Any] | None = None,
                 progress: Callable[[Outcome], None] | None = None, python: str | None = None,
                 options: ScanOptions | None = None) -> VerifyReport:
    """Re-scan `root`, check the fix's files and links, and with `run` run the probes.

    The journal is read only through fix.journal.load_journal (trusted
    journals: FixDirError otherwise) and, with the re-scan and the checks,
    under the target's lock (LockError while a fix, undo or run holds it), as
    `cuda4amd run` reads it; the probes run after the lock is released, as a
    program started by `cuda4amd run` does. `options`: the re-scan's search
    paths, extra rules and links policy (the target, release and host are the
    fix's); without them, the ones the plan recorded, so a fix made with
    `scan --rules/--search-path` is verified the way it was judged."""
    from cuda4amd.fix.journal import FixDirError, load_journal
    from cuda4amd.fix.lock import target_lock
    from cuda4amd.fix.run import fixed_launch
    from cuda4amd.fix.verify import verify
    from cuda4amd.report.document import build

    with target_lock(root, "verify"):
        journal = load_journal(root)
        if journal is None:
            raise FixDirError(f"no cuda4amd fix in {root}: run `cuda4amd scan {root} --fix` first")
        if not journal.complete:
            raise FixDirError(f"{root}: the fix is not complete (journal state {journal.state}): re-run "
                              f"`cuda4amd scan {root} --fix` or `cuda4amd undo {root}`")
        plan = journal.plan
        if rescan is None:
            from cuda4amd.scan.pipeline import run_scan

            again = replace(options or recorded_options(plan, root), target=str(root),
                            zluda_release=plan.release.get("tag"), host="none")

            def rescan() -> Any:
                return run_scan(again)
        after = rescan()
        verification = verify(journal, after)
    outcomes = None
    skipped = None
    if run:
        # a fix that does not check out may hold files nobody vouched for: run nothing of it
        skipped = can_run_here(plan) if verification.ok else \
            "verification failed: the probes run only through a fix whose files and links check out"
        if skipped is None:
            prefix, env = fixed_launch(plan, root)
            families = [f for f in plan.families if f in PROBES]
            outcomes = run_probes(families, names=probe_names(plan, root), prefix=prefix, env=env, limit=limit,
                                  progress=progress, python=python)
    observed = {"verification": verification.to_dict(), "outcomes": [o.to_dict() for o in outcomes or []],
                "through": "zluda" if outcomes is not None else None}
    return VerifyReport(journal, verification, build(after, observed), outcomes, skipped)


def smoke_after_fix(plan: Plan, *, echo: Callable[[str], Any], limit: float = 60.0) -> list[Outcome] | None:
    """The last step of `scan --fix` on the machine it was judged for (--host auto):
    the probes through the fix, printed; None where this machine cannot run them."""
    from cuda4amd.fix.run import fixed_launch

    why = can_run_here(plan)
    if why is not None:
        echo(f"smoke probes not run: {why}")
        return None
    echo("smoke probes through the fix (`cuda4amd verify DIR --run -o report.json` writes them down):")
    prefix, env = fixed_launch(plan, plan.root)
    outcomes = run_probes([f for f in plan.families if f in PROBES], names=probe_names(plan, plan.root),
                          prefix=prefix, env=env, limit=limit,
                          progress=lambda o: echo(f"  probe {o.family:<10} {o.status:<11} {visible(o.detail)}"))
    bad = [o.family for o in outcomes if o.status in FAILING]
    if bad:
        echo(f"probes failed for {', '.join(bad)}: the linked files are in place, but these libraries do not work "
             f"on this machine yet (docs/evidence.md says what each status means)")
    return outcomes


def recorded_options(plan: Plan, root: Path) -> ScanOptions:
    """The re-scan options the plan recorded from its scan (journals of earlier versions: the defaults)."""
    scan = plan.scan or {}
    return ScanOptions(target=str(root), engine=scan.get("engine", "fast"),
                       search_paths=tuple(Path(p) for p in scan.get("search_paths", ())),
                       rule_dirs=tuple(Path(p) for p in scan.get("rule_dirs", ())),
                       follow_links=bool(scan.get("follow_links", False)))
