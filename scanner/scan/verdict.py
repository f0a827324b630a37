"""Decide per binary and overall, following DESIGN.md §3.

A binary's own CUDA dependencies and its kernels (PTX per fat binary
module) give it a verdict; then verdicts flow along the graph: a binary is at
best as good as the libraries it loads statically from the tree (or from
--search-path, or an NVIDIA library ZLUDA does not replace, judged in-tree),
and delay/by-name loads pass on at most `degraded`. A binary that uses CUDA
with no visible loader (cuda4amd.scan.routes) is at best `degraded` before
that flow, so what loads it is too.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from cuda4amd.model import FileError, ScannedBinary
from cuda4amd.rules.kernels import PtxAcceptance
from cuda4amd.scan.classify import Dependency, Identity
from cuda4amd.scan.frontends import REPLACED, NotLoaded
from cuda4amd.scan.read.demangle import demangled_names, shown
from cuda4amd.words import counted

RANK = {"no-cuda": -1, "ready": 0, "degraded": 1, "blocked": 2}
LOADED = {"static": "imported", "delay": "delay-loaded", "by-name": "loaded by name"}
LIST_AT_MOST = 5
#: the target's verdicts from best to worst (docs/exit-status.md): `incomplete` replaces any but `blocked`
TARGET_ORDER = ("no-cuda", "ready", "partial", "incomplete", "blocked")
#: a binary's verdict as a part of the target: a degraded binary runs only in part
AS_PART = {"ready": "ready", "degraded": "partial", "blocked": "blocked"}
#: FileError stages that leave a file, or its kernels, unread (model.FileError: "loader" and "strings" are
#: notes on a file that was read)
UNREAD_STAGES = frozenset({"discover", "read", "kernels"})
#: a binary with PTX that ZLUDA can use in fewer than this share of its kernel modules is `blocked`, not
#: `degraded` (docs/exit-status.md, the verdict contract): most of its GPU code cannot run, so a workload
#: reaches a kernel that fails; at this share or above it runs in part
LEAST_RUNNABLE_SHARE = 0.5


@dataclass
class BinaryVerdict:
    binary: ScannedBinary
    identity: Identity  # what the binary itself is (an NVIDIA library, or not CUDA)
    dependencies: list[Dependency]
    verdict: str = "no-cuda"
    # (rank, text): kept with their weight so the deciding reason comes first
    _reasons: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: what it imports statically that was found nowhere (not beside it, in the tree nor a system library)
    missing: list[str] = field(default_factory=list)
    #: False for a library that never loads under ZLUDA (a sub-library only a replaced front-end loads)
    loaded: bool = True
    #: a family's advice -> the library whose reason said it: said once per binary (docs/exit-status.md)
    advised: dict[str, str] = field(default_factory=dict)

    @property
    def reasons(self) -> list[str]:
        return [text for _, text in sorted(self._reasons, key=lambda r: -r[0])]

    def worsen(self, verdict: str, reason: str | None = None) -> bool:
        changed = RANK[verdict] > RANK[self.verdict]
        if changed:
            self.verdict = verdict
        if reason and all(reason != text for _, text in self._reasons):
            self._reasons.append((RANK[verdict], reason))
            changed = True
        return changed


def decide(
    binaries: list[ScannedBinary],
    dependencies: list[Dependency],
    identities: dict[str, Identity],
    host_gaps: dict[str, list[str]] | None = None,
    ptx: PtxAcceptance | None = None,
    unseen_loaders: Mapping[str, str] | None = None,
    not_loaded: Mapping[str, NotLoaded] | None = None,
) -> list[BinaryVerdict]:
    """Verdicts per binary. `host_gaps` (family -> reasons the host cannot
    serve it; "driver_api" ones hit every CUDA user) comes from cuda4amd.host;
    `ptx`: what the ZLUDA release does with module PTX (rules/kernels/), None
    when nothing is known about it; `unseen_loaders` (path -> reason, from
    cuda4amd.scan.routes): binaries that use CUDA with no visible loader; `not_loaded` (path -> why, from
    cuda4amd.scan.frontends): sub-libraries that only a front-end ZLUDA replaces loads, judged as what
    takes that front-end's place."""
    not_loaded = not_loaded or {}
    by_source: dict[str, list[Dependency]] = {b.path: [] for b in binaries}
    for dep in dependencies:
        by_source[dep.edge.source].append(dep)
    results = {b.path: BinaryVerdict(b, identities[b.path], by_source[b.path]) for b in binaries}
    for result in results.values():
        why = not_loaded.get(result.binary.path)
        if why is not None:
            _judge_not_loaded(result, why)
        else:
            _judge_own(result, ptx)
        unseen = (unseen_loaders or {}).get(result.binary.path)
        if unseen and why is None and result.verdict in ("ready", "no-cuda"):
            result.worsen("degraded", unseen)  # its CUDA comes some way the scan cannot see
        _judge_host(result, host_gaps or {}, why)
    _propagate(results, set(not_loaded))
    if any(_judge_missing(result) for result in results.values()):
        _propagate(results, set(not_loaded))  # what loads a binary that now misses a library is no better than it
    return [results[b.path] for b in binaries]


def overall(verdicts: list[BinaryVerdict]) -> str:
    """ready, partial, blocked or no-cuda over binaries (a package's verdict, cuda4amd.scan.packages)."""
    return _over([AS_PART[v.verdict] for v in verdicts if v.verdict != "no-cuda"])


def _over(parts: Sequence[str]) -> str:
    """The verdict over parts (each ready, partial or blocked): all ready, all blocked, else partial."""
    if not parts:
        return "no-cuda"
    if all(p == "ready" for p in parts):
        return "ready"
    if all(p == "blocked" for p in parts):
        return "blocked"
    return "partial"


class Package(Protocol):
    """What the target verdict needs of a package verdict (cuda4amd.scan.packages.PackageVerdict)."""

    verdict: str
    binaries: list[str]


@dataclass(frozen=True)
class TargetVerdict:
    """The target's verdict and what it rests on (docs/exit-status.md, "One basis")."""

    verdict: str  # one of TARGET_ORDER
    of_read: str  # the verdict over what was read: `verdict` unless that is `incomplete`
    basis: str  # "binaries", "packages" or "packages-and-binaries": what the parts are
    parts: dict[str, int]  # how many parts are ready, partial, blocked
    unread: int  # files (or their kernels) that could not be read


def target_verdict(verdicts: Sequence[BinaryVerdict], packages: Sequence[Package] = (),
                   errors: Sequence[FileError] = ()) -> TargetVerdict:
    """The one basis of the headline, the counts, the exit status and the JSON `verdict`: the parts are
    the target's CUDA packages (each with its package verdict, which already weighs its binaries) and its
    CUDA binaries that belong to no package (ready, degraded as partial, blocked). So a one-package
    target has that package's verdict. A file that could not be read makes any verdict but `blocked`
    `incomplete`: what was read cannot vouch for it, and a blocked target stays blocked."""
    owned = {path for p in packages for path in p.binaries}
    cuda_packages = [p.verdict for p in packages if p.verdict != "no-cuda"]
    loose = [AS_PART[v.verdict] for v in verdicts if v.verdict != "no-cuda" and v.binary.path not in owned]
    parts = cuda_packages + loose
    of_read = _over(parts)
    unread = len({e.path for e in errors if e.stage in UNREAD_STAGES})
    basis = "binaries" if not cuda_packages else "packages" if not loose else "packages-and-binaries"
    return TargetVerdict(
        verdict="incomplete" if unread and of_read != "blocked" else of_read,
        of_read=of_read,
        basis=basis,
        parts={state: parts.count(state) for state in ("ready", "partial", "blocked")},
        unread=unread,
    )


def _judge_own(result: BinaryVerdict, ptx: PtxAcceptance | None = None) -> None:
    me = result.identity
    if me.family is not None:
        if me.route == "redirect":
            result.worsen("ready", f"NVIDIA {me.family_name} library: ZLUDA's {me.replacement} takes its place, this "
                                   "file is not used")
            return  # its own imports never load
        if me.route == "stub":
            result.worsen("degraded", f"NVIDIA {me.family_name} library: ZLUDA's {me.replacement} takes its place, but "
                                      "every function of it returns NOT_SUPPORTED")
            return
        if me.route == "blocked" and me.basis == "family-default":
            result.worsen("blocked", f"NVIDIA {me.family_name} library that ZLUDA does not replace (decided by the "
                                     "family default: it carries no fat binary to judge it by)")
        elif me.route == "unknown":
            result.worsen("degraded", "looks like an NVIDIA CUDA library that cuda4amd has no rule for")
        elif me.basis != "in-tree":
            result.worsen("ready", f"NVIDIA {me.family_name} library: runs unchanged on ZLUDA's driver")
    _judge_kernels(result, ptx)
    bind_now = result.binary.info.bind_now
    for dep in result.dependencies:
        if not dep.is_cuda:
            if dep.edge.how == "unresolved" and dep.edge.load == "static":
                result.missing.append(dep.edge.name)  # judged once its own verdict is known (_judge_missing)
            elif dep.edge.how == "unresolved":
                result.notes.append(f"needs {dep.edge.name}, which is neither in the scanned tree nor a known system "
                                    "library")
            continue
        _judge_dependency(result, dep, bind_now)


def _judge_missing(result: BinaryVerdict) -> bool:
    """A CUDA user that statically imports a library found nowhere is not ready: the loader refuses to
    start it without that library (Windows' loader, ld.so for DT_NEEDED), and what the library does with
    CUDA was not seen. A binary without CUDA keeps it as a note (it says nothing about CUDA). True when a
    verdict changed."""
    if not result.missing:
        return False
    if result.verdict == "no-cuda":
        result.notes += [f"needs {name}, which is neither in the scanned tree nor a known system library"
                         for name in result.missing]
        return False
    loader = "Windows" if result.binary.info.format == "PE" else "the dynamic loader"
    changed = False
    for name in result.missing:
        changed |= result.worsen(
            "degraded", f"needs {name}, which is neither beside it, in the scanned tree nor a system library: "
                        f"{loader} refuses to load it without it, and what it does with CUDA was not seen; "
                        "scan the folder or pass --search-path")
    return changed


def _judge_not_loaded(result: BinaryVerdict, why: NotLoaded) -> None:
    """A sub-library only a replaced front-end loads: what runs in its place is ZLUDA's front-end, so it
    is judged as that (its own kernels and imports never load)."""
    split, front = why.split, why.front
    result.loaded = False
    lead = (f"{split.name} sub-library loaded only by NVIDIA's {split.front} (or another sub-library), which "
            f"ZLUDA's {front.replacement} replaces: it is not loaded under ZLUDA")
    if front.route == "stub":
        result.worsen("degraded", f"{lead}, and every function of ZLUDA's {front.replacement} returns NOT_SUPPORTED")
    else:
        result.worsen("ready", lead)


def _judge_host(result: BinaryVerdict, gaps: dict[str, list[str]], not_loaded: NotLoaded | None = None) -> None:
    if result.verdict == "no-cuda":
        return
    if result.identity.route in REPLACED or not_loaded is not None:
        # what takes its place is ZLUDA's library, which needs the family's AMD library on this host
        # (ZLUDA's cuDNN: MIOpen): without it, that library serves no call
        route = not_loaded.front.route if not_loaded is not None else result.identity.route
        if route == "redirect":
            for gap in gaps.get(result.identity.family or "", ()):
                result.worsen("blocked", f"this host: {gap}")
        return
    for gap in gaps.get("driver_api", ()):
        result.worsen("blocked", f"this host: {gap}")
    for dep in result.dependencies:
        if dep.identity.route != "redirect":
            continue
        for gap in gaps.get(dep.identity.family or "", ()):
            result.worsen("blocked" if dep.edge.load == "static" else "degraded", f"this host: {gap}")


def _judge_kernels(result: BinaryVerdict, ptx: PtxAcceptance | None = None) -> None:
    """Kernels decide per module: the CUDA runtime registers each fat binary
    container as a module and ZLUDA compiles a module only from its own PTX,
    so PTX in one module does not help the kernels of another."""
    kernels = result.binary.kernels
    if kernels is None:
        return
    me = result.identity
    owner = f"NVIDIA {me.family_name} library that ZLUDA does not replace: " if me.family else ""
    if kernels.state == "sass-only":
        carried = [f"SASS for {_names(kernels.sass_archs)}"] if kernels.sass_archs else []
        carried += [f"LTO-IR for {_names(kernels.lto_ir_archs)}"] if kernels.lto_ir_archs else []
        result.worsen("blocked", f"{owner}its GPU kernels carry no PTX ({'; '.join(carried)}); ZLUDA runs only PTX")
        return
    if kernels.state == "relocatable-ptx-only":
        result.worsen("degraded", f"{owner}its PTX exists only as relocatable device code (-rdc); whether ZLUDA can "
                                  "link it at load time is not known")
        return
    total, usable = kernels.modules, kernels.modules_with_ptx
    debug = ""
    if ptx is not None and not ptx.debug_target and kernels.modules_debug_ptx_only:
        usable -= kernels.modules_debug_ptx_only
        debug = (
            f"only debug PTX (nvcc -G: `.target …, debug`) in {_count(kernels.modules_debug_ptx_only, 'module')}, "
            f"which ZLUDA {ptx.tag}'s PTX parser does not accept ({ptx.debug_target_source})"
        )
    if ptx is not None and not ptx.codeless_module_loads and kernels.codeless_containers:
        # Whether the CUDA runtime asks the driver to load a module without
        # kernels is not established, so this is said, not judged.
        result.notes.append(
            f"fat binary containers without PTX or code (nvlink's device-link stub): {kernels.codeless_containers}; "
            f"ZLUDA {ptx.tag} refuses to load a module without PTX "
            f"({ptx.codeless_module_source}), which matters only if the CUDA runtime loads it"
        )
    judged = _judge_ptx_check(result, ptx, owner)
    if judged == "blocked":
        return
    if usable >= total:
        if judged is None:  # else the check said what of that PTX ZLUDA drops: no "it can run" beside it
            result.worsen("ready", f"{owner}its kernels carry PTX, so it can run on ZLUDA's driver" if owner else None)
    elif usable <= 0:
        result.worsen("blocked", f"{owner}none of its {_count(total, 'kernel module')} carries PTX that ZLUDA can use"
                      + (f": {debug}" if debug else ""))
    else:
        share = failing_share(usable, total)
        failing = (f"the kernels of the other {total - usable} ({share} %) carry no PTX that ZLUDA can use "
                   "(it runs only PTX)")
        if usable / total < LEAST_RUNNABLE_SHARE:
            result.worsen("blocked", f"{owner}PTX in only {usable} of its {total} kernel modules: {failing}, so most "
                                     "of its GPU code cannot run under ZLUDA" + (f" ({debug})" if debug else ""))
        else:
            result.worsen("degraded", f"{owner}PTX in {usable} of its {total} kernel modules; {failing}, so they fail"
                          + (f" ({debug})" if debug else ""))


def failing_share(usable: int, total: int) -> int:
    """The percentage of `total` kernel modules without usable PTX, rounded, but never 0 or 100 while
    some modules fail and some run (1 of 300 running is not "100 % fail")."""
    return min(99, max(1, round(100 * (total - usable) / total)))


def _judge_ptx_check(result: BinaryVerdict, ptx: PtxAcceptance | None, owner: str) -> str | None:
    """ZLUDA's PTX check at the release (cuda4amd.scan.read.ptx): a registered container that fails to
    load blocks the binary; dropped kernels (the parser's, or all of an empty module's) degrade it.
    What it decided: "blocked" (nothing else about its kernels matters), "degraded", or None."""
    kernels = result.binary.kernels
    check = kernels.ptx_check(ptx.tag) if kernels is not None and ptx is not None else None
    if check is None or ptx is None:
        return None
    containers = check["containers"]
    refusal = check["first_refusal"] or {"construct": "?", "source": "?"}
    first = f"first construct {refusal['construct']} ({refusal['source']})"
    if containers["load_fails"]:
        carrying = sum(containers.values())
        result.worsen("blocked", f"{owner}{containers['load_fails']} of its {_count(carrying, 'PTX kernel module')} "
                                 f"fail to load on ZLUDA {ptx.tag} (its PTX translator refuses them): {first}")
        return "blocked"
    dropped = check["dropped_kernels"]
    if dropped:
        demangled = demangled_names(dropped[:LIST_AT_MOST])  # only those the reason shows
        listed = [shown(name, demangled) for name in dropped[:LIST_AT_MOST]] + dropped[LIST_AT_MOST:]
        result.worsen("degraded", f"{owner}{len(dropped)} of {check['kernels']} kernels are dropped by ZLUDA "
                                  f"{ptx.tag}'s PTX parser ({_names(listed)}): {first}")
    if containers["no_ptx"]:
        result.worsen("degraded", f"{owner}{_count(containers['no_ptx'], 'kernel module')} with PTX that ZLUDA "
                                  f"{ptx.tag} cannot read (not UTF-8, or not decompressible): it loads an empty module "
                                  f"({refusal['source']})")
    return "degraded" if dropped or containers["no_ptx"] else None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _judge_dependency(result: BinaryVerdict, dep: Dependency, bind_now: bool) -> None:
    ident, edge = dep.identity, dep.edge
    name, family, load = edge.template or edge.name, ident.family_name, edge.load
    eager = load == "static" and (edge.platform == "windows" or bind_now)
    if ident.route in ("redirect", "stub"):
        result.worsen("ready")
        missing = dep.symbols.get("missing", ())
        stubs = dep.symbols.get("stub", ())
        if missing:
            listed = _names(missing)
            if eager:
                imported = counted(len(missing), "imported function")
                result.worsen("blocked", f"{name}: {imported} not exported by ZLUDA's {ident.replacement} ({listed}); "
                                         "the loader refuses this binary")
            else:
                functions = counted(len(missing), "function")
                result.worsen("degraded", f"{name} ({LOADED[load]}): {functions} not exported by ZLUDA's "
                                          f"{ident.replacement} ({listed}); calling them fails")
        if ident.route == "stub":
            result.worsen("degraded", f"{name}: ZLUDA's {family} replacement has no implemented functions; every call "
                                      "returns NOT_SUPPORTED")
        elif stubs:
            one = len(stubs) == 1
            what = (counted(len(stubs), "imported function") if load != "by-name"
                    else counted(len(stubs), "function") + " it resolves by name (cuGetProcAddress/dlsym)")
            result.worsen("degraded", f"{name}: {what} {'is a ZLUDA stub' if one else 'are ZLUDA stubs'} that "
                                      f"{'returns' if one else 'return'} NOT_SUPPORTED ({_names(stubs)})")
        if edge.ordinals:
            result.worsen("degraded", f"{name}: imported by ordinal ({_names([str(o) for o in edge.ordinals])}); "
                                      "ZLUDA's ordinals differ from NVIDIA's, so these cannot be checked")
    elif ident.route == "blocked":
        if ident.basis == "in-tree":
            advice = f"NVIDIA's {family} here ({edge.resolved}) has SASS-only kernels, and ZLUDA runs only PTX"
        else:
            advice = ident.advice or f"{family} has no route through ZLUDA"
            # several libraries of one family (TensorRT's nvinfer, nvonnxparser, nvinfer_plugin): its advice once
            first = result.advised.setdefault(advice, name)
            if first != name:
                advice = f"needs {family} too (see {first})"
        if load == "static":
            result.worsen("blocked", f"{name}: {advice}")
        else:
            result.worsen("degraded", f"{name} ({LOADED[load]}): the binary loads, but what uses it fails; {advice}")
    elif ident.route == "unknown":
        result.worsen("degraded", f"{name}: an NVIDIA library cuda4amd has no rule for")
    else:  # passthrough
        result.worsen("ready")
        _judge_runtime_calls(result, name, dep)


def _judge_runtime_calls(result: BinaryVerdict, name: str, dep: Dependency) -> None:
    """NVIDIA's cudart runs unchanged on ZLUDA's driver: an imported runtime function is as good as the
    driver function it ends in (rules/runtime/cudart-to-driver.toml, from NVIDIA's documentation). cudart
    resolves driver functions when it starts, so one ZLUDA lacks or stubs fails only when called:
    degraded, whatever the load."""
    for state, what in (("stub", "a ZLUDA stub that returns NOT_SUPPORTED"),
                        ("missing", "not exported by ZLUDA's driver, so calling it fails")):
        calls = [c.call for c in dep.runtime_calls if c.state == state]
        if not calls:
            continue
        one = len(calls) == 1
        sections = ", ".join(dict.fromkeys(c.section for c in calls[:LIST_AT_MOST]))
        result.worsen("degraded", f"{name}: {counted(len(calls), 'imported function')} {'ends' if one else 'end'} "
                                  f"in a driver function that is {what}: "
                                  f"{_names(f'{c.runtime} → {c.driver}' for c in calls)} (NVIDIA CUDA Runtime "
                                  f"API, See also of {'it' if one else 'each'}: {sections})")


def _propagate(results: dict[str, BinaryVerdict], not_loaded: set[str] | None = None) -> None:
    """Verdicts along the graph; a binary that never loads (a sub-library only a replaced front-end
    loads) passes nothing on from what it would load."""
    links = [
        (result, dep)
        for result in results.values()
        if result.binary.path not in (not_loaded or ())
        for dep in result.dependencies
        # in the tree, or read through --search-path
        if dep.edge.resolved in results and dep.edge.resolved != result.binary.path
        and (not dep.is_cuda or _judged_in_tree(dep))
    ]
    changed = True
    while changed:  # verdicts only get worse and reasons only accumulate: this ends
        changed = False
        for result, dep in links:
            needed = results[dep.edge.resolved or ""]  # in results: the links above are resolved
            if needed.verdict == "no-cuda":
                continue
            deciding = needed.reasons[0] if needed.reasons else needed.verdict
            if needed.verdict == "ready":
                changed |= result.worsen("ready")
            elif needed.verdict == "blocked" and dep.edge.load == "static":
                changed |= result.worsen("blocked", f"needs {dep.edge.resolved}, which is blocked: {deciding}")
            else:
                changed |= result.worsen("degraded", f"loads {dep.edge.resolved} ({dep.edge.load}), which is "
                                                     f"{needed.verdict}: {deciding}")


def _judged_in_tree(dep: Dependency) -> bool:
    """An NVIDIA library ZLUDA does not replace, found in the tree and judged
    by its own kernels and driver calls: its importers inherit that verdict
    (a blocked one is judged on the edge itself, see _judge_dependency)."""
    return dep.identity.basis == "in-tree" and dep.identity.route == "passthrough"


def _names(names: Iterable[str]) -> str:
    listed = list(names)
    shown = ", ".join(listed[:LIST_AT_MOST])
    return shown + (f" and {len(listed) - LIST_AT_MOST} more" if len(listed) > LIST_AT_MOST else "")
