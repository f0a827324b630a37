"""Verdicts per installed Python distribution, with the framework's advice.

People think in packages (`torch 2.3.0+cu118`), not in the .pyd files inside
them. What a user runs of a package is what they import: its Python
extension modules, whose verdicts already carry those of the libraries they
load. So a package with CUDA-using extension modules is judged by them
(all blocked → `blocked`, all ready → `ready`, else `partial`: something of
it runs); one without (NVIDIA's library wheels) by all its CUDA binaries.
A framework rule's by-name load with no AMD route keeps a package from
`ready`. So does a code generator that hands the driver SASS
(rules/runtime/generators.toml: XLA, Triton, CuPy's NVRTC kernels, ...): a
package that makes its GPU code while the program runs has no kernels on
disk to judge, and what its generator emits decides. Such a package is at
best `partial` (a setting makes it emit PTX, or only some features use it)
and `blocked` when every GPU operation goes through it and no setting gives
ZLUDA PTX it can run; a distribution with such a generator and no CUDA
binary (pure Python, e.g. numba-cuda) gets a package verdict all the same.
A generator whose distribution ships a backend that compiles for AMD GPUs
itself and is the one taken under ZLUDA (Triton's AMD backend, when no
NVIDIA backend ships beside it) hands ZLUDA nothing: it is judged by what
that backend needs on the host (the HIP SDK), not as SASS.
`counts` and `summary` say what the verdict rests on, in words that agree
with the numbers.

Only GPU paths count (docs/exit-status.md, the verdict contract): a binary
whose only CUDA contact is loading the driver by name, naming none of its
functions, with no kernels, no CUDA library and no CUDA-using binary it
loads, does no GPU work of the package (ONNX Runtime's CPU core beside its
CUDA provider) and, ready, does not make a package with blocked GPU paths
`partial`. Advice never steers to a part that cannot run: a switch (a
setting of the package) is said only while some GPU path of it (or of the
parts it names, `uses`) is not blocked, an [[instead]] that names parts of
it only while one of those is not; and it fits the target's platform.
"""
from __future__ import annotations

import fnmatch
import functools
import posixpath
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from cuda4amd.model import platform_of
from cuda4amd.rules.frameworks import Framework, advice_for, framework_for
from cuda4amd.rules.releases import ZludaRelease
from cuda4amd.rules.ruleset import RuleSet
from cuda4amd.rules.runtime import Generator, GeneratorBackend, generators_for
from cuda4amd.scan.classify import identify
from cuda4amd.scan.distributions import Distribution
from cuda4amd.scan.verdict import LEAST_RUNNABLE_SHARE, BinaryVerdict, overall
from cuda4amd.words import counted, said_once

SHOWN_REASONS = 5
#: package verdicts in the order of how bad they are
PACKAGE_RANK = {"no-cuda": -1, "ready": 0, "partial": 1, "blocked": 2}
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
    # code generators it carries (rules/runtime/generators.toml), as the report's packages[].generators[]
    generators: list[dict] = field(default_factory=list)
    # what the verdict rests on: "extension-modules" or "binaries", and how many are in each state
    counts: dict = field(default_factory=dict)
    summary: str = ""
    #: clauses the summary ends with (a generator's AMD backend taken under ZLUDA)
    summary_notes: list[str] = field(default_factory=list, repr=False)


def is_extension_module(path: str) -> bool:
    """Whether a file is a Python extension module (what `import` loads)."""
    return bool(_EXTENSION.search(posixpath.basename(path)))


def package_verdicts(
    verdicts: Sequence[BinaryVerdict],
    distributions: Iterable[Distribution],
    frameworks: Sequence[Framework],
    rules: RuleSet,
    release: ZludaRelease,
    *,
    hip_sdk: bool | None = None,
) -> list[PackageVerdict]:
    """`hip_sdk`: whether the host has the HIP SDK (ROCm); None when the host was not examined."""
    by_name: dict[str, list[BinaryVerdict]] = {}
    for verdict in verdicts:
        if verdict.binary.distribution:
            by_name.setdefault(verdict.binary.distribution, []).append(verdict)
    result = []
    cuda_paths = {v.binary.path for v in verdicts if v.verdict != "no-cuda"}
    for dist in sorted(distributions, key=lambda d: d.canonical_name):
        owned = by_name.get(dist.name, [])
        using = [v for v in owned if v.verdict != "no-cuda"]
        generators = generators_for(dist.name, rules.generators, has_cuda=bool(using))
        if not owned and not generators:
            continue
        extensions = [v for v in using if is_extension_module(v.binary.path)]
        judged, cpu_only = gpu_paths(extensions or using, cuda_paths)
        package = PackageVerdict(dist.name, dist.version, overall(owned) if not using else overall(judged))
        package.binaries = [v.binary.path for v in using]
        order = {"blocked": 0, "degraded": 1, "ready": 2}
        others = [v for v in using if v not in judged]
        by_reason: dict[str, list[str]] = {}  # one deciding reason of several binaries is said once
        for v in (sorted(judged, key=lambda v: (order[v.verdict], v.binary.path))
                  + sorted(others, key=lambda v: (order[v.verdict], v.binary.path))):
            if v.verdict != "ready" and v.reasons:
                names = by_reason.setdefault(v.reasons[0], [])
                if posixpath.basename(v.binary.path) not in names:
                    names.append(posixpath.basename(v.binary.path))
        package.reasons += [f"{', '.join(names)}: {reason}" for reason, names in by_reason.items()]
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
                        + ("ZLUDA implements none of its functions" if load["route"] == "stub"
                           else "no AMD route through ZLUDA")
                    )
            platforms = {platform_of(v.binary.info.format) for v in owned}
            package.advice = advice_for(framework, troubled, _kernel_state(using), platforms=platforms,
                                        can_run=functools.partial(_can_run, judged, using))
        if unrouted and package.verdict in ("ready", "no-cuda"):
            package.verdict = "partial"  # what it loads by name fails: never a plain ready
        own = package.verdict  # what its binaries (and by-name loads) say, before its generators
        runs = _can_run(judged, using, ())  # a setting of the package helps only where some of it can run
        sass = [g for g in generators if _apply_generator(package, g, dist.files, hip_sdk, advise=runs)]
        package.counts, package.summary = _summary(own, judged, "extension-modules" if extensions else "binaries",
                                                   unrouted, len(cpu_only))
        for note in package.summary_notes:
            package.summary += f"; {note}"
        if sass:  # the numbers say what is on disk; the generator, why that is not the verdict
            makers = "; ".join(g.name for g in sass)
            many = len(sass) > 1
            package.summary += (f"; run-time code generator{'s' if many else ''}: {makers} "
                                f"(emit{'' if many else 's'} SASS, which ZLUDA cannot run)")
        if len(package.reasons) > SHOWN_REASONS:
            hidden = len(package.reasons) - SHOWN_REASONS
            package.reasons = [*package.reasons[:SHOWN_REASONS], f"… and {hidden} more"]
        result.append(package)
    return result


def gpu_paths(judged: Sequence[BinaryVerdict], cuda_paths: Collection[str]
              ) -> tuple[list[BinaryVerdict], list[BinaryVerdict]]:
    """(the binaries a package's verdict is over, the ready CPU-only parts left out of it): every judged
    binary but the ready ones that do no GPU work (`is_cpu_part`) — unless that is all of them, then
    nothing is left out (a package whose only CUDA contact is such a part is judged by it)."""
    cpu_only = [v for v in judged if v.verdict == "ready" and is_cpu_part(v, cuda_paths)]
    if len(cpu_only) == len(judged):
        return list(judged), []
    return [v for v in judged if v not in cpu_only], cpu_only


def is_cpu_part(verdict: BinaryVerdict, cuda_paths: Collection[str]) -> bool:
    """Whether a CUDA-using binary does no GPU work itself: its only CUDA contact is the driver loaded
    by name, naming none of its functions (no import, no name it resolves), it carries no kernels, is no
    NVIDIA library, and loads no binary of the tree that uses CUDA (`cuda_paths`). Such a binary can ask
    whether a GPU is there; what the GPU runs goes through other binaries."""
    binary = verdict.binary
    kernels = binary.kernels
    if verdict.identity.family is not None or (kernels is not None and (kernels.containers or kernels.entries)):
        return False
    cuda = [dep for dep in verdict.dependencies if dep.is_cuda]
    if not cuda or any(dep.identity.family != "driver_api" or dep.edge.load != "by-name"
                       or any(dep.symbols.values()) for dep in cuda):
        return False
    names = binary.driver_names
    if names is not None and (names.names or names.runtime_table):
        return False
    return not any(dep.edge.resolved in cuda_paths for dep in verdict.dependencies if not dep.is_cuda)


def _can_run(judged: Sequence[BinaryVerdict], using: Sequence[BinaryVerdict], uses: Sequence[str]) -> bool:
    """Whether the part of a package that an advice line steers to can run: with `uses`, some of its CUDA
    binaries (`using`) whose file name matches one of those globs is not blocked (a part the package does
    not have cannot run either); without, some of its GPU paths (`judged`) is not blocked."""
    if uses:
        return any(v.verdict != "blocked" for v in using
                   if any(fnmatch.fnmatch(posixpath.basename(v.binary.path).lower(), glob.lower()) for glob in uses))
    # no GPU path to judge by: what it loads by name and its generators decide, not this
    return not judged or any(v.verdict != "blocked" for v in judged)


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


def _apply_generator(package: PackageVerdict, generator: Generator, files: frozenset[str] = frozenset(),
                     hip_sdk: bool | None = None, advise: bool = True) -> bool:
    """Record the generator on the package and judge by what it emits (or by the AMD backend it takes);
    returns whether it hands the driver SASS (and so decides against ready).
    `advise`: whether its settings are advice (not when no GPU path of the package can run)."""
    entry = generator_entry(generator)
    package.generators.append(entry)
    backend = generator.backend_in(files)
    if backend is not None:
        taken = backend.is_taken(files)
        entry["backend"] = {"id": backend.id, "taken": taken, "emits": backend.emits, "confidence": backend.confidence}
        if taken:
            _apply_backend(package, generator, backend, hip_sdk)
            return False
    if generator.emits == "ptx":
        return False
    # settings that help under ZLUDA: PTX output (unless no PTX route reaches ZLUDA), or no generation
    ways_out = [s for s in generator.ptx_switches if not generator.zluda or s.emits == "none"]
    to_ptx = [s for s in ways_out if s.emits == "ptx"]
    what = f"{generator.name} generates GPU code at run time as SASS (a cubin): {generator.how}; ZLUDA runs only PTX"
    if generator.zluda:
        what += f" ({generator.zluda})"
    if backend is not None:  # it ships one that makes AMD code, which is not the one taken under ZLUDA
        what += f"; it ships its {backend.name} too, but {backend.not_taken}"
        if backend.instead and backend.instead not in package.advice:
            package.advice.append(backend.instead)
    # every GPU operation needs it and nothing makes it emit PTX: nothing of it runs
    # ("generate nothing" then means "do not use it", which is advice, not a way to run)
    verdict = "blocked" if generator.needed == "always" and not to_ptx else "partial"
    if PACKAGE_RANK[verdict] > PACKAGE_RANK.get(package.verdict, -1):
        package.verdict = verdict
        package.reasons.insert(0, what)  # it decides the verdict: its reason comes first
    else:
        package.reasons.append(what)
    for switch in ways_out if advise else ():
        doing = "emits PTX" if switch.emits == "ptx" else "generates nothing"
        caveat = " (unverified)" if switch.confidence != "verified" else ""
        advice = f"{generator.name}: {switch.setting}: it then {doing}{caveat}"
        if switch.note:
            advice += f"; {switch.note}"
        package.advice = said_once([*package.advice, advice])  # a framework switch may say it already
    return True


def _apply_backend(package: PackageVerdict, generator: Generator, backend: GeneratorBackend,
                   hip_sdk: bool | None) -> None:
    """The generator's AMD backend is the one taken: its kernels are HIP code objects the HIP runtime runs
    beside ZLUDA, so it is gated by the host's HIP SDK, not judged as SASS."""
    caveat = " (read from its source, not run)" if backend.confidence != "verified" else ""
    package.summary_notes.append(f"run-time code generator: {generator.name} through its {backend.name} "
                                 f"(HIP code objects, beside ZLUDA{caveat})")
    if package.verdict == "no-cuda":  # GPU work all the same: through the HIP runtime, beside ZLUDA
        package.verdict = "ready"
    if hip_sdk is False:
        what = (f"this host: {generator.name}'s {backend.name} {backend.how}; this host has no HIP SDK (ROCm): "
                "install it, with HIP_PATH set on Windows")
        if PACKAGE_RANK["blocked"] > PACKAGE_RANK.get(package.verdict, -1):
            package.verdict = "blocked"
        package.reasons.insert(0, what)
    advice = f"{generator.name}: {backend.taken}"
    if advice not in package.advice:
        package.advice.append(advice)


def _summary(verdict: str, judged: Sequence[BinaryVerdict], basis: str, unrouted: bool,
             cpu_only: int = 0) -> tuple[dict, str]:
    """The counts the package verdict rests on, and a sentence that agrees with them; `cpu_only`: the
    ready binaries left out as CPU-only parts (`gpu_paths`), said after them."""
    text, counts = _counted(verdict, judged, basis, unrouted)
    if cpu_only:
        counts["cpu_only"] = cpu_only
        text += (f"; {counted(cpu_only, 'more CUDA binary', 'more CUDA binaries')} only "
                 f"{'loads' if cpu_only == 1 else 'load'} the CUDA driver by name (no kernels, no CUDA library, no "
                 "driver function named): a CPU part, not counted")
    return counts, text


def _counted(verdict: str, judged: Sequence[BinaryVerdict], basis: str, unrouted: bool) -> tuple[str, dict]:
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
    return text, {"basis": basis, **counts}


def _unseen_loads(framework: Framework, owned: Sequence[BinaryVerdict], rules: RuleSet,
                  release: ZludaRelease) -> list[dict]:
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
    """"sass-only" when a binary's kernels are SASS-only, or carry usable PTX in too few of their modules
    to run (cuda4amd.scan.verdict.LEAST_RUNNABLE_SHARE): the advice for SASS-only kernels fits both."""
    for v in verdicts:
        kernels = v.binary.kernels
        if kernels is None:
            continue
        if kernels.state == "sass-only" or (kernels.modules and kernels.modules_with_ptx / kernels.modules
                                            < LEAST_RUNNABLE_SHARE):
            return "sass-only"
    return None
