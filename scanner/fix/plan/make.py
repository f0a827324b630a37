"""Building the plan: what linking ZLUDA to a scanned application will do, as data.

    plan = make_plan(result, rules=rules, host=host, source=source, store=store, mode="launcher")

The steps, each in its module of fix.plan: the host gate (`host_gate`), the
green-lit set (`green_lit`), the release files it takes (`release_files`), the
environment (`environment`) and the actions of the mode (`placements`).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda4amd.fix.plan.environment import advice, environment
from cuda4amd.fix.plan.green_lit import green_lit
from cuda4amd.fix.plan.host_gate import host_gate, host_libraries, host_text
from cuda4amd.fix.plan.model import MODES, Plan, PlanError, in_fix_dir, target_root
from cuda4amd.fix.plan.placements import (
    launcher_actions,
    launcher_folder,
    launcher_programs,
    place_actions,
    rel_or_abs,
    settle,
)
from cuda4amd.fix.plan.release_files import release_part, resolve_row
from cuda4amd.model import platform_of

if TYPE_CHECKING:
    from cuda4amd.fix.archive import Store
    from cuda4amd.fix.release import ReleaseSource
    from cuda4amd.host.report import HostReport
    from cuda4amd.rules.frameworks import Framework
    from cuda4amd.rules.ruleset import RuleSet
    from cuda4amd.scan.pipeline import ScanOptions, ScanResult
    from cuda4amd.scan.verdict import BinaryVerdict

__all__ = ["make_plan", "scan_record"]


def make_plan(result: ScanResult, *, rules: RuleSet, host: HostReport | None, source: ReleaseSource,
              store: Store | None = None, mode: str = "launcher", launcher_dir: str | os.PathLike[str] | None = None,
              frameworks: Iterable[Framework] | None = None, host_warnings: list[str] | None = None) -> Plan:
    """The plan for a ScanResult. `host` is the HostReport of the machine the
    application will run on; `source` the ReleaseSource; `store` the unpacked
    release when already at hand (hashes are filled then, else by Plan.bind);
    `frameworks` default to the rules'. Raises PlanError when nothing can be
    linked or the host lacks what the plan needs; given a `host_warnings` list
    (a dry run), what the host lacks is added to it instead and the plan is
    still made, to be shown, not applied."""
    if mode not in MODES:
        raise PlanError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    root = target_root(result.target)
    release = result.release
    verdicts = [v for v in result.verdicts if not in_fix_dir(v.binary.path)]
    platform = _plan_platform(result, verdicts, source)
    host = host_gate(host, platform, mode, rules, host_warnings)
    chosen = green_lit(result, verdicts, host, rules, host_warnings)
    files, ld_audit, launcher_exe = release_part(rules, release, platform, chosen, mode)
    sdk = host_libraries(host, chosen.families, rules, host_warnings)
    warnings: list[str] = []
    variables = environment(result, rules, platform, mode, sdk, ld_audit,
                            rules.frameworks if frameworks is None else frameworks, warnings)
    launch_dir = launcher_folder(root, launcher_dir)
    programs: list[dict[str, str]] = []
    if mode == "launcher":
        programs = launcher_programs(result, verdicts, chosen.left, root, platform)
        actions = launcher_actions(files, platform, programs, variables, launcher_exe, root, launch_dir,
                                   release.tag)
    else:
        by_path = {v.binary.path: v for v in verdicts}
        actions = place_actions(chosen.linked, chosen.importers, by_path, release, platform, warnings)
    settle(actions, root, store)
    listed = {f.path: f for f in release.files if f.platform == platform}
    required = sorted({a.source for a in actions if a.kind in ("copy", "link") and a.source}
                      | {f.link_to for f in files if f.link_to}
                      | {resolve_row(listed, a.source) or "" for a in actions if a.kind == "copy" and a.source})
    return Plan(
        target=str(root), display=result.target.display, platform=platform, mode=mode,
        release=source.to_dict(), release_sha256=store.sha256 if store is not None else source.sha256,
        families=chosen.families, passthrough=sorted(chosen.passthrough),
        linked=[{"binary": d.binary, "name": d.name, "family": d.family, "load": d.load,
                 "resolved": d.resolved, "how": d.how, "replacement": d.replacement} for d in chosen.linked],
        left_alone=[{"binary": p, "reason": r} for p, r in sorted(chosen.left.items())],
        not_linked=sorted(chosen.not_linked.values(), key=lambda r: r["family"]),
        environment=variables, launcher_exe=launcher_exe, programs=programs, actions=actions,
        required=[r for r in required if r], warnings=warnings, advice=advice(variables, mode),
        host=host_text(host), launcher_dir=rel_or_abs(root, launch_dir),
        scan=scan_record(getattr(result, "options", None)),
    )


def scan_record(options: ScanOptions | None) -> dict[str, Any]:
    """What of a ScanOptions a re-scan of the fixed tree needs, as plain data for the journal."""
    if options is None:
        return {}
    return {"rule_dirs": [str(Path(d).resolve()) for d in options.rule_dirs],
            "search_paths": [str(Path(d).resolve()) for d in options.search_paths],
            "follow_links": bool(options.follow_links), "engine": options.engine}


def _plan_platform(result: ScanResult, verdicts: list[BinaryVerdict], source: ReleaseSource) -> str:
    """The one platform the application's CUDA binaries are for (the release source's too)."""
    if not any(v.verdict != "no-cuda" for v in verdicts):
        raise PlanError(f"nothing to link: no binary of {result.target.display} uses CUDA")
    platform = _choose_platform(verdicts, result.target.display)
    if platform != source.platform:
        raise PlanError(f"the release source is for {source.platform}, the application is {platform}")
    return platform


def _choose_platform(verdicts: list[BinaryVerdict], display: str) -> str:
    using = {platform_of(v.binary.info.format) for v in verdicts if v.verdict != "no-cuda"}
    if len(using) > 1:
        raise PlanError(f"{display} holds Windows and Linux CUDA binaries: fix one platform's folder at a time")
    if using:
        return using.pop()
    every = {platform_of(v.binary.info.format) for v in verdicts}
    return every.pop() if len(every) == 1 else ("windows" if os.name == "nt" else "linux")


