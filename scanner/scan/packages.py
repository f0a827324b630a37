"""Verdicts per installed Python distribution, with the framework's advice.

People think in packages (`torch 2.3.0+cu118`), not in the .pyd files inside
them. What a user runs of a package is what they import: its Python
extension modules, whose verdicts already carry those of the libraries they
load. So a package with CUDA-using extension modules is judged by them
(all blocked → `blocked`, all ready → `ready`, else `partial`: something of
it runs); one without (NVIDIA's library wheels) by all its CUDA binaries.
A framework rule's by-name load with no AMD route keeps a package from
`ready`. `counts` and `summary` say what the verdict rests on, in words
that agree with the numbers.
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from cuda4amd.model import platform_of
from cuda4amd.rules.frameworks import Framework, advice_for, framework_for
from cuda4amd.rules.loader import RuleSet, ZludaRelease
from cuda4amd.scan.classify import identify
from cuda4amd.scan.distributions import Distribution
from cuda4amd.scan.verdict import BinaryVerdict, overall

SHOWN_REASONS = 5
#: Python extension modules: `.pyd` (Windows), and `.so` files with a PEP 3149
#: tag (`.cpython-312-x86_64-linux-gnu.so`, `.abi3.so`, `.pypy310-pp73-….so`)
#: or an untagged `name.so` that is not a `lib*.so` library
_EXTENSION = re.compile(r"(\.pyd|\.(cpython-[^.]+|abi3|pypy[^.]*)\.so|^(?!lib)[^.]+\.so)$", re.IGNORECASE)


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
    # what the verdict rests on: "extension-modules" or "binaries", and how many are in each state
    counts: dict = field(default_factory=dict)
    summary: str = ""


def is_extension_module(path: str) -> bool:
    """Whether a file is a Python extension module (what `import` loads)."""
    return bool(_EXTENSION.search(posixpath.basename(path)))


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
        using = [v for v in owned if v.verdict != "no-cuda"]
        extensions = [v for v in using if is_extension_module(v.binary.path)]
        judged = extensions or using
        package = PackageVerdict(dist.name, dist.version, overall(owned) if not using else overall(judged))
        package.binaries = [v.binary.path for v in using]
        order = {"blocked": 0, "degraded": 1, "ready": 2}
        others = [v for v in using if v not in judged]
        for v in sorted(judged, key=lambda v: (order[v.verdict], v.binary.path)) + sorted(others, key=lambda v: (order[v.verdict], v.binary.path)):
            if v.verdict != "ready" and v.reasons:
                package.reasons.append(f"{posixpath.basename(v.binary.path)}: {v.reasons[0]}")
        unrouted = False
        framework = framework_for(dist.name, frameworks)
        if framework is not None:
            package.framework = framework.id
            troubled = _troubled_families(using)
            for load in _unseen_loads(framework, owned, rules, release):
                package.loads.append(load)
                if load["route"] in ("blocked", "stub"):
                    troubled.add(load["family"])
                    unrouted = True
                    package.reasons.append(
                        f"{framework.name} loads {load['name']} by name ({load['when']}; framework rule): "
                        + ("ZLUDA implements none of its functions" if load["route"] == "stub" else "no AMD route through ZLUDA")
                    )
            package.advice = advice_for(framework, troubled, _kernel_state(using))
        if unrouted and package.verdict in ("ready", "no-cuda"):
            package.verdict = "partial"  # what it loads by name fails: never a plain ready
        package.counts, package.summary = _summary(package.verdict, judged, "extension-modules" if extensions else "binaries", unrouted)
        if len(package.reasons) > SHOWN_REASONS:
            hidden = len(package.reasons) - SHOWN_REASONS
            package.reasons = package.reasons[:SHOWN_REASONS] + [f"… and {hidden} more"]
        result.append(package)
    return result


def _summary(verdict: str, judged: Sequence[BinaryVerdict], basis: str, unrouted: bool) -> tuple[dict, str]:
    """The counts the package verdict rests on, and a sentence that agrees with them."""
    counts = {state: sum(1 for v in judged if v.verdict == state) for state in ("ready", "degraded", "blocked")}
    total = sum(counts.values())
    noun = "CUDA extension module" if basis == "extension-modules" else "CUDA binary"
    nouns = noun + ("s" if total != 1 else "") if noun.endswith("module") else ("CUDA binaries" if total != 1 else noun)
    parts = [f"{n} {state}" for state, n in counts.items() if n]
    if not total:
        text = "no CUDA binary of it" + ("; what its framework loads by name has no AMD route" if unrouted else "")
    elif verdict == "blocked":
        text = f"all {total} {nouns} blocked" if total > 1 else f"its {noun} is blocked"
    elif verdict == "ready":
        text = f"all {total} {nouns} ready" if total > 1 else f"its {noun} is ready"
    else:
        text = f"{total} {nouns}: " + ", ".join(parts)
        if unrouted:
            text += "; what its framework loads by name has no AMD route"
    return {"basis": basis, **counts}, text


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
