"""Verdicts per installed Python distribution, with the framework's advice.

People think in packages (`torch 2.3.0+cu118`), not in the .pyd files inside
them: each distribution gets the overall verdict of the binaries its RECORD
lists, the reasons of the ones that are not ready, and the switches or
replacements its framework rules suggest for what is blocked.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from cuda4amd.model import platform_of
from cuda4amd.rules.frameworks import Framework, advice_for, framework_for
from cuda4amd.rules.loader import RuleSet, ZludaRelease
from cuda4amd.scan.classify import identify
from cuda4amd.scan.distributions import Distribution
from cuda4amd.scan.verdict import BinaryVerdict, overall

SHOWN_REASONS = 5


@dataclass
class PackageVerdict:
    name: str
    version: str
    verdict: str
    framework: str | None = None
    binaries: list[str] = field(default_factory=list)  # its CUDA-using binaries
    reasons: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    # libraries its framework rules say it loads by name that no binary of it
    # was seen to name (e.g. through cuda.pathfinder or ctypes with a bare stem)
    loads: list[dict] = field(default_factory=list)


def package_verdicts(
    verdicts: Sequence[BinaryVerdict],
    distributions: Iterable[Distribution],
    frameworks: Sequence[Framework],
    rules: RuleSet,
    release: ZludaRelease,
) -> list[PackageVerdict]:
    by_name: dict[str, list[BinaryVerdict]] = {}
    for verdict in verdicts:
        if verdict.binary.distribution:
            by_name.setdefault(verdict.binary.distribution, []).append(verdict)
    result = []
    for dist in sorted(distributions, key=lambda d: d.canonical_name):
        owned = by_name.get(dist.name, [])
        if not owned:
            continue
        package = PackageVerdict(dist.name, dist.version, overall(owned))
        using = [v for v in owned if v.verdict != "no-cuda"]
        package.binaries = [v.binary.path for v in using]
        order = {"blocked": 0, "degraded": 1, "ready": 2}
        for v in sorted(using, key=lambda v: (order[v.verdict], v.binary.path)):
            if v.verdict != "ready" and v.reasons:
                package.reasons.append(f"{posixpath.basename(v.binary.path)}: {v.reasons[0]}")
        framework = framework_for(dist.name, frameworks)
        if framework is not None:
            package.framework = framework.id
            troubled = _troubled_families(using)
            for load in _unseen_loads(framework, owned, rules, release):
                package.loads.append(load)
                if load["route"] in ("blocked", "stub"):
                    troubled.add(load["family"])
                    package.reasons.append(
                        f"{framework.name} loads {load['name']} by name ({load['when']}; framework rule): "
                        + ("ZLUDA implements none of its functions" if load["route"] == "stub" else "no AMD route through ZLUDA")
                    )
            package.advice = advice_for(framework, troubled, _kernel_state(using))
        if len(package.reasons) > SHOWN_REASONS:
            hidden = len(package.reasons) - SHOWN_REASONS
            package.reasons = package.reasons[:SHOWN_REASONS] + [f"… and {hidden} more"]
        result.append(package)
    return result


def _unseen_loads(framework: Framework, owned: Sequence[BinaryVerdict], rules: RuleSet, release: ZludaRelease) -> list[dict]:
    """The framework's by-name loads of families none of its binaries was seen to load."""
    platforms = {platform_of(v.binary.info.format) for v in owned}
    seen = {dep.identity.family for v in owned for dep in v.dependencies if dep.identity.family}
    loads = []
    for load in framework.loads:
        if load.load != "by-name" or load.family in seen:
            continue
        for platform in sorted(platforms):
            if load.platform not in (None, platform):
                continue
            names = [n for n in load.names if not any(c in n for c in "*?[") and rules.family_for(n, platform)]
            if not names:
                continue
            identity = identify(names[-1], platform, rules, release)
            loads.append({
                "family": load.family,
                "name": names[-1],
                "when": load.when,
                "route": identity.route,
                "basis": "framework-rule",
            })
    return loads


def _troubled_families(verdicts: Iterable[BinaryVerdict]) -> set[str]:
    """Families whose route is blocked or stub somewhere in these binaries."""
    return {
        dep.identity.family
        for v in verdicts
        for dep in v.dependencies
        if dep.identity.family and dep.identity.route in ("blocked", "stub")
    }


def _kernel_state(verdicts: Iterable[BinaryVerdict]) -> str | None:
    states = {v.binary.kernels.state for v in verdicts if v.binary.kernels is not None}
    return "sass-only" if "sass-only" in states else None
