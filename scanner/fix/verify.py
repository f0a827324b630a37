"""After applying: check every written file, and re-scan to check every redirected dependency.

A linked dependency (a binary's import or by-name load that the plan sent to
ZLUDA) passes when the file it will load is ZLUDA's, byte for byte:

* launcher mode: the file of that name in ``<target>/.cuda4amd/zluda/``
  (``zluda.exe`` redirects by name on Windows, case-insensitively;
  ``LD_LIBRARY_PATH`` / ``LD_AUDIT`` on Linux), followed through the release's
  soname links without leaving that folder;
* place mode: the file the re-scan resolves the import to, in the tree.

The sha256 expected is the one the plan copied from the release. The
after-report (``.cuda4amd/after-report.json``) holds these checks and the
re-scan's report document.
"""
from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda4amd.fix.fileops import file_state, same_state
from cuda4amd.fix.journal import Journal, state_after
from cuda4amd.fix.plan.model import REPORT_PATH, STORE_DIR, Plan, in_fix_dir
from cuda4amd.fix.release import sha256_file
from cuda4amd.model import loader_key

if TYPE_CHECKING:
    from cuda4amd.rules.releases import ZludaFile, ZludaRelease
    from cuda4amd.scan.classify import Dependency
    from cuda4amd.scan.pipeline import ScanResult

__all__ = ["REPORT_NAME", "REPORT_SCHEMA", "Verification", "after_report", "verify"]

REPORT_NAME = REPORT_PATH
REPORT_SCHEMA = "cuda4amd.fix-report/1"


@dataclass
class Verification:
    checks: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        deps = [c for c in self.checks if c["what"] == "dependency"]
        files = [c for c in self.checks if c["what"] == "file"]
        if self.ok:
            return (f"verified: {len(deps)} redirected dependencies load ZLUDA's files with the expected sha256; "
                    f"{len(files)} written files as planned")
        return "verification FAILED: " + "; ".join(self.problems[:5]) + (
            f" (and {len(self.problems) - 5} more)" if len(self.problems) > 5 else "")

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": self.checks, "problems": self.problems}


def verify(journal: Journal, result: ScanResult) -> Verification:
    """Check the journal's files and, on the re-scan `result`, each linked dependency."""
    out = Verification()
    plan = journal.plan
    for a in journal.actions:
        if a["status"] != "done" or a["path"] == REPORT_NAME:
            continue
        ok = same_state(file_state(journal.abs(a["path"])), state_after(a))
        out.checks.append({"what": "file", "path": a["path"], "kind": a["kind"], "ok": ok})
        if not ok:
            out.problems.append(f"{a['path']} is not as the fix wrote it")
    expected = {a["source"]: a["sha256"] for a in journal.actions if a["kind"] == "copy" and a.get("source")}
    release = result.release
    root = journal.root
    deps: dict[tuple[str, str], Dependency] = {}
    for v in result.verdicts:
        if in_fix_dir(v.binary.path):
            continue
        for d in v.dependencies:
            deps.setdefault((v.binary.path, loader_key(d.edge.name, d.edge.platform)), d)
    for row in plan.linked:
        key = (row["binary"], loader_key(row["name"], plan.platform))
        check = {"what": "dependency", "binary": row["binary"], "name": row["name"], "family": row["family"],
                 "loads": None, "sha256": None, "expected": None, "ok": False}
        out.checks.append(check)
        dep = deps.get(key)
        if dep is None:
            out.problems.append(f"{row['binary']}: {row['name']} is not in the re-scan")
            continue
        replacement = release.replacement_for(dep.edge.name, plan.platform)
        if replacement is None:
            out.problems.append(f"{row['binary']}: ZLUDA {release.tag} has no file for {row['name']}")
            continue
        real = _real_row(release, replacement)
        check["expected"] = expected.get(real.path) if real else None
        loads = _loaded_file(plan, root, dep, replacement)
        if loads is None:
            out.problems.append(f"{row['binary']}: {row['name']} does not resolve to ZLUDA's {replacement.name}")
            continue
        check["loads"] = _show(root, loads)
        try:
            check["sha256"] = sha256_file(loads)
        except OSError as exc:
            out.problems.append(f"{row['binary']}: {row['name']} → {check['loads']}: {exc.strerror or exc}")
            continue
        check["ok"] = check["expected"] is not None and check["sha256"] == check["expected"]
        if not check["ok"]:
            out.problems.append(f"{row['binary']}: {row['name']} → {check['loads']} has sha256 {check['sha256']}, "
                                f"expected {check['expected']}")
    return out


def _real_row(release: ZludaRelease, row: ZludaFile) -> ZludaFile | None:
    return release.resolve_link(row) if row.link_to else row


def _show(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _loaded_file(plan: Plan, root: Path, dep: Dependency, replacement: ZludaFile) -> Path | None:
    if plan.mode == "launcher":
        store = root.joinpath(*STORE_DIR.split("/"))
        name = dep.edge.name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
        candidate = store / name
        if plan.platform == "windows" and not candidate.exists():
            folded = name.casefold()
            candidate = next((p for p in store.iterdir() if p.name.casefold() == folded), candidate) \
                if store.is_dir() else candidate
        if not candidate.exists():
            candidate = store / replacement.path
        if not candidate.exists():
            return None
        real = Path(os.path.realpath(candidate))
        try:
            real.relative_to(Path(os.path.realpath(store)))
        except ValueError:
            return None  # a link out of ZLUDA's folder
        return real
    resolved = dep.edge.resolved
    if not resolved or not dep.edge.in_tree or in_fix_dir(resolved):
        return None
    path = root.joinpath(*posixpath.normpath(resolved).split("/"))
    return path if path.is_file() else None


def after_report(journal: Journal, verification: Verification, result: ScanResult) -> str:
    """The after-report's JSON text."""
    from cuda4amd.report.document import build

    plan = journal.plan
    data = {
        "schema": REPORT_SCHEMA,
        "target": plan.display,
        "mode": plan.mode,
        "platform": plan.platform,
        "release": {"tag": plan.release["tag"], "asset": plan.release["asset"], "sha256": plan.release_sha256},
        "families": plan.families,
        "verification": verification.to_dict(),
        "scan": build(result, {"verification": verification.to_dict()}),  # evidence: the link checks seen
    }
    return json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n"
