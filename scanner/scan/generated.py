"""Package verdicts for code generated at run time (rules/runtime/generators.toml).

A package that generates its GPU kernels while the program runs (XLA, Triton,
CuPy's NVRTC kernels, Warp, Numba) has no kernels on disk for the scan to
judge: what its generator hands the driver decides. A generator of SASS makes
the package at best `partial` (a setting makes it emit PTX, or it is needed by
some features only) and `blocked` when every GPU operation goes through it and
no setting gives ZLUDA PTX it can run.

    packages = apply_generators(packages, distributions, load_generators())
"""
from __future__ import annotations

from typing import Iterable, Sequence

from cuda4amd.rules.runtime import Generator, generators_for
from cuda4amd.scan.distributions import Distribution
from cuda4amd.scan.packages import PackageVerdict

RANK = {"no-cuda": -1, "ready": 0, "partial": 1, "blocked": 2}


def apply_generators(
    packages: Sequence[PackageVerdict],
    distributions: Iterable[Distribution],
    generators: Sequence[Generator],
) -> list[PackageVerdict]:
    """``packages`` with the generators of each distribution applied; a
    distribution that carries a SASS generator but no CUDA binary (pure
    Python, e.g. numba-cuda) gets a package verdict of its own. Sorted as
    package_verdicts sorts (by canonical name)."""
    by_name = {p.name: p for p in packages}
    out = list(packages)
    for dist in distributions:
        package = by_name.get(dist.name)
        has_cuda = package is not None and package.verdict != "no-cuda"
        found = generators_for(dist.name, generators, has_cuda)
        if not found:
            continue
        if package is None:
            package = PackageVerdict(dist.name, dist.version, "no-cuda")
            by_name[dist.name] = package
            out.append(package)
        for generator in found:
            _apply(package, generator)
    order = {d.name: d.canonical_name for d in distributions}
    return sorted(out, key=lambda p: order.get(p.name, p.name.lower()))


def generator_entry(generator: Generator) -> dict:
    """The report's `packages[].generators[]` entry."""
    return {
        "id": generator.id,
        "name": generator.name,
        "emits": generator.emits,
        "needed": generator.needed,
        "switches": [{"setting": s.setting, "emits": s.emits, "confidence": s.confidence}
                     for s in generator.switches],
        "zluda": generator.zluda or None,
    }


def _apply(package: PackageVerdict, generator: Generator) -> None:
    package.generators.append(generator_entry(generator))
    if generator.emits == "ptx":
        return
    # settings that help under ZLUDA: PTX output (unless no PTX route reaches ZLUDA), or no generation
    ways_out = [s for s in generator.ptx_switches if not generator.zluda or s.emits == "none"]
    to_ptx = [s for s in ways_out if s.emits == "ptx"]
    what = f"{generator.name} generates GPU code at run time as SASS (a cubin): {generator.how}; ZLUDA runs only PTX"
    if generator.zluda:
        what += f" ({generator.zluda})"
    # every GPU operation needs it and nothing makes it emit PTX: nothing of it runs
    # ("generate nothing" then means "do not use it", which is advice, not a way to run)
    verdict = "blocked" if generator.needed == "always" and not to_ptx else "partial"
    if RANK[verdict] > RANK.get(package.verdict, -1):
        package.verdict = verdict
        package.reasons.insert(0, what)  # it decides the verdict: its reason comes first
    else:
        package.reasons.append(what)
    for switch in ways_out:
        doing = "emits PTX" if switch.emits == "ptx" else "generates nothing"
        caveat = " (unverified)" if switch.confidence != "verified" else ""
        advice = f"{generator.name}: {switch.setting}: it then {doing}{caveat}"
        if switch.note:
            advice += f"; {switch.note}"
        if advice not in package.advice:
            package.advice.append(advice)
