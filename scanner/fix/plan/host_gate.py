"""The host gate of a plan: a host that cannot run ZLUDA (in this mode) is refused, and the
families whose AMD library it lacks are kept out of the plan.

A dry run (a `host_warnings` list) refuses less: what the host lacks is noted
there and the plan is still made, to be shown, not applied. A missing host
report, place mode without HIP_PATH and a redacted HIP SDK path still refuse.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from cuda4amd.fix.plan.model import PlanError

if TYPE_CHECKING:
    from cuda4amd.host.report import HostReport
    from cuda4amd.host.sdk import HipSdk
    from cuda4amd.rules.ruleset import RuleSet

# host/gaps and report/redact are imported in the steps that use them: this package loads with the journal

__all__ = ["GAPS_THE_PLAN_CLOSES", "excluded_families", "host_gate", "host_libraries", "host_text"]

#: gaps that do not keep a family out of the plan: the launcher sets HIP_PATH, and place mode requires it
GAPS_THE_PLAN_CLOSES = ("hip-path-unset",)


def host_gate(host: HostReport | None, platform: str, mode: str, rules: RuleSet,
              host_warnings: list[str] | None) -> HostReport:
    """The host, unless it cannot run ZLUDA at all, or not in this mode (a dry run: note what
    it lacks in `host_warnings`; a missing host report and place mode's HIP_PATH still refuse)."""
    from cuda4amd.host.gaps import find_gaps

    if host is None:
        raise PlanError("the host lacks a host report: scan on the machine that runs the application "
                        "(--host auto), or pass --host FILE.json made by `cuda4amd doctor --format json` there")
    if host.platform != platform:
        _host_problem(f"the host is {host.platform.capitalize()} but the application is "
                      f"{platform.capitalize()}: fix it on (or with a host report of) a {platform} machine",
                      host_warnings)
    driver_gaps = find_gaps(host, ["driver_api"], rules=rules)
    if driver_gaps:
        _host_problem("the host lacks what ZLUDA needs: " + "; ".join(g.text for g in driver_gaps)
                      + " (judge another machine with --host FILE.json)", host_warnings)
    if platform == "windows" and mode == "place" and (host.sdk is None or "HIP_PATH" not in host.sdk.found_by):
        raise PlanError("placement mode needs HIP_PATH set on the host (ZLUDA finds rocBLAS, hipBLASLt and "
                        "rocSPARSE next to itself or through %HIP_PATH%\\bin, and otherwise shows a modal error "
                        "dialog); set HIP_PATH for the user, or use the launcher (--mode launcher)")
    return host


def host_libraries(host: HostReport, families: list[str], rules: RuleSet,
                   host_warnings: list[str] | None) -> HipSdk | None:
    """The HIP SDK the linked families' AMD libraries come from (None when none needs one, or a
    dry run's host has none: its host_warnings say so already)."""
    from cuda4amd.host.gaps import family_libraries
    from cuda4amd.report.redact import is_redacted

    sdk = host.sdk
    libraries = family_libraries(rules)
    if any(f in libraries for f in families) and sdk is None and host_warnings is None:  # excluded; defensive
        raise PlanError("the host lacks a HIP SDK (ROCm), which ZLUDA's libraries load")
    if sdk is not None and is_redacted(sdk.root):
        raise PlanError(f"the host report's HIP SDK path is redacted ({sdk.root}): "
                        f"make the report on that machine with the path kept, or fix there")
    return sdk


def excluded_families(host: HostReport, families: list[str], rules: RuleSet,
                      host_warnings: list[str] | None) -> dict[str, str]:
    """family -> why this host cannot serve it, for the families whose AMD library it lacks (a dry
    run excludes none: the reasons go to its `host_warnings`, so that the plan shows them linked)."""
    from cuda4amd.host.gaps import find_gaps

    excluded: dict[str, str] = {}
    for gap in find_gaps(host, [f for f in families if f != "driver_api"], rules=rules):
        if gap.code not in GAPS_THE_PLAN_CLOSES:
            excluded[gap.family] = f"{excluded[gap.family]}; {gap.text}" if gap.family in excluded else gap.text
    if host_warnings is not None:
        host_warnings.extend(excluded[family] for family in sorted(excluded))
        return {}
    return excluded


def host_text(host: HostReport) -> str:
    """The host as the plan names it: its GPU and HIP SDK."""
    gpu = host.gpu
    parts = [f"{gpu.name} ({gpu.gfx or 'unknown gfx'})" if gpu else "no GPU"]
    sdk = host.sdk
    parts.append(f"HIP SDK {sdk.version or '?'} at {sdk.root}" if sdk else "no HIP SDK")
    return ", ".join(parts)


def _host_problem(message: str, host_warnings: list[str] | None) -> None:
    """Something the host lacks: a dry run (a `host_warnings` list) notes it and plans on; otherwise
    the plan is refused."""
    if host_warnings is None:
        raise PlanError(message)
    host_warnings.append(message)
