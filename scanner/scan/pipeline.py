"""The scan pipeline: rules → host → discover → read → graph → classify → verdict → packages.

`run_scan` is the library entry point; the CLI only parses options and
renders what comes back. It calls each stage in turn and records how long
each took (`ScanResult.timings`: rules, host, discover, read, analyse).
"""
from __future__ import annotations

import fnmatch
import posixpath
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from cuda4amd.host import HostReport, detect_host, host_gaps, load_host_report
from cuda4amd.model import FileError, ScannedBinary, loader_key, platform_of
from cuda4amd.rules.releases import ZludaRelease
from cuda4amd.rules.ruleset import RuleSet, load_rules
from cuda4amd.scan import discover as discovery
from cuda4amd.scan.classify import binary_identities, classify_edges, in_tree_identities
from cuda4amd.scan.distributions import Distribution, find_distributions, owners_of
from cuda4amd.scan.frontends import not_loaded_sublibraries
from cuda4amd.scan.graph import Edge, dependency_graph, resolve_edges
from cuda4amd.scan.packages import PackageVerdict, package_verdicts
from cuda4amd.scan.read.byname import expand_template
from cuda4amd.scan.read.payload import PayloadInspector
from cuda4amd.scan.read.stage import ReadSettings, read_archives, read_closure, read_outside, read_tree
from cuda4amd.scan.routes import unseen_loaders
from cuda4amd.scan.verdict import BinaryVerdict, TargetVerdict, decide, target_verdict

if TYPE_CHECKING:
    import networkx as nx

    from cuda4amd.rules.frameworks import Framework

#: targets whose wheels and zips are scanned too, their members under the archive's path
FOLDER_KINDS = ("folder", "site-packages", "venv")

@dataclass(frozen=True)
class ScanOptions:
    target: str
    zluda_release: str | None = None
    engine: str = "fast"
    search_paths: tuple[Path, ...] = ()
    rule_dirs: tuple[Path, ...] = ()
    host: str = "none"  # "auto" (probe this machine), "none", or a recorded host report (.json)
    follow_links: bool = False  # walk links to folders outside the target (else reported, not followed)
    jobs: int | None = None  # reading processes; None: one per usable core
    cache: bool = False  # use the per-user cache of file facts


@dataclass
class ScanResult:
    target: discovery.Target
    release: ZludaRelease
    engine: str
    verdicts: list[BinaryVerdict]
    errors: list[FileError]
    verdict: str
    binaries: list[ScannedBinary]
    edges: list[Edge]
    files_seen: int
    packages: list[PackageVerdict] = field(default_factory=list)
    distributions: list[Distribution] = field(default_factory=list)  # every one installed in the target
    host: HostReport | None = None
    basis: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    #: what `verdict` rests on (cuda4amd.scan.verdict.target_verdict); None only for a result made by hand
    judged: TargetVerdict | None = None
    #: what the scan was asked for and the rules it judged with: `scan --fix` plans and verifies with both
    options: ScanOptions | None = None
    rules: RuleSet | None = None

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The dependency graph (networkx), built on first use."""
        return dependency_graph(self.binaries, self.edges)


class Progress:
    """What the pipeline tells a progress display; the default tells nobody."""

    def discovering(self) -> None: ...

    def reading(self, total_bytes: int) -> None: ...

    def advance(self, read_bytes: int) -> None: ...


class _Laps:
    """Seconds per stage: each `done(stage)` records the time since the one before."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._clock = time.perf_counter()

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = now - self._clock
        self._clock = now


def run_scan(options: ScanOptions, progress: Progress | None = None, rules: RuleSet | None = None) -> ScanResult:
    """Scan ``options.target``: each stage in turn; ``rules``: rules loaded already (else from options.rule_dirs)."""
    progress = progress or Progress()
    laps = _Laps()

    # rules: the shipped ones and each --rules folder; the release judged against
    rules = rules or load_rules(options.rule_dirs)
    release = rules.release(options.zluda_release or rules.default_release)
    target = discovery.resolve_target(options.target)
    laps.done("rules")

    # host: this machine, a recorded report or none; before the walk, so a bad report stops the scan at once
    host, basis, judge_host = _host(options, target, rules)
    laps.done("host")

    # discover: the binaries of the tree. A single binary is scanned with its folder, its application
    # directory: the libraries it loads from there decide its verdict too.
    walked = _application_folder(target) if target.kind == "file" else target
    progress.discovering()
    found = discovery.discover(walked, follow_links=options.follow_links, jobs=options.jobs)
    focus = _focus(target, found) if target.kind == "file" else None
    laps.done("discover")

    # read: each binary's facts (scan/read/stage.py), and the distributions installed in the tree
    settings = ReadSettings(options.engine, PayloadInspector(rules, release), options.jobs, options.cache)
    progress.reading(sum(b.size for b in found.binaries))  # by bytes: one 1 GB library is most of a wheel
    if focus is None:
        binaries, read_errors = read_tree(walked, found, settings, progress.advance)
    else:
        binaries, read_errors = read_closure(walked, found, focus, settings, rules, progress.advance)
        _check_focus_read(target, focus, read_errors)
    distributions = find_distributions(target, follow_links=options.follow_links)
    if focus is None and walked.kind in FOLDER_KINDS:
        archived = read_archives(walked, found, settings)
        binaries = sorted(binaries + archived.binaries, key=lambda b: b.path)
        read_errors += archived.errors
        distributions += archived.distributions
        found.files_seen += archived.files_seen
    laps.done("read")

    # graph: which file each library name loads, --search-path libraries read on the way
    frameworks = rules.frameworks if distributions else ()
    _set_owners(binaries, distributions)
    reach = _reach(binaries, distributions, frameworks)

    def resolve(binaries: list[ScannedBinary]) -> list[Edge]:
        return resolve_edges(
            binaries,
            found.aliases,
            rules,
            options.search_paths,
            walked.path if walked.kind != "archive" else None,
            expand=lambda template, platform: expand_template(template, rules, platform),
            reach=reach,
        )

    edges = resolve(binaries)
    if options.search_paths:
        # Libraries found through --search-path are read and judged like the
        # tree's own (their own dependencies too), under their absolute path.
        outside, outside_errors = read_outside(edges, binaries, settings, resolve)
        if outside:
            binaries = binaries + outside
            edges = resolve(binaries)
        read_errors += outside_errors
    # classify, verdict, packages
    by_path = {b.path: b for b in binaries}
    identities = binary_identities(binaries, found.aliases, rules, release)
    judged_in_tree = in_tree_identities(by_path, identities)
    identities.update(judged_in_tree)
    dependencies = classify_edges(by_path, edges, rules, release, judged_in_tree)
    redirected = {d.identity.family for d in dependencies if d.identity.route == "redirect"}
    # and the replaced libraries themselves: what takes their place needs its AMD library on the host
    redirected |= {i.family for i in identities.values() if i.route == "redirect" and i.family}
    gaps = host_gaps(host, redirected, rules=rules) if judge_host and host is not None else {}
    unseen = unseen_loaders(binaries, dependencies, identities, rules)
    not_loaded = not_loaded_sublibraries(binaries, dependencies, identities, rules, release)
    verdicts = decide(binaries, dependencies, identities, gaps, rules.ptx.get(release.tag), unseen, not_loaded)
    hip_sdk = (host.sdk is not None) if judge_host and host is not None else None  # None: not examined
    packages = (package_verdicts(verdicts, distributions, frameworks, rules, release, hip_sdk=hip_sdk)
                if distributions else [])
    _locate_loads(packages, binaries, distributions, frameworks)
    errors = found.errors + read_errors
    if focus is not None:
        binaries, edges, verdicts, errors = _reached_from(focus, binaries, edges, verdicts, errors)
    judged = target_verdict(verdicts, packages, errors)
    laps.done("analyse")

    return ScanResult(
        target=target,
        release=release,
        engine=options.engine,
        verdicts=verdicts,
        errors=sorted(errors, key=lambda e: e.path),
        verdict=judged.verdict,
        binaries=binaries,
        edges=edges,
        files_seen=found.files_seen,
        packages=packages,
        distributions=distributions,
        host=host,
        basis=basis,
        timings=laps.timings,
        judged=judged,
        options=options,
        rules=rules,
    )


def _set_owners(binaries: list[ScannedBinary], distributions: list[Distribution]) -> None:
    """Set each binary's `distribution`: the installed distribution whose RECORD lists it, if any."""
    if not distributions:
        return
    owners = owners_of(distributions, [binary.path for binary in binaries])
    for binary in binaries:
        binary.distribution = owners.get(binary.path)


def _application_folder(target: discovery.Target) -> discovery.Target:
    folder = target.path.parent
    return discovery.Target("folder", folder, target.display, (folder,))


def _focus(target: discovery.Target, found: discovery.Discovery) -> str:
    """The target file's path in its folder's discovery; an input error
    (exit 2) when it is unreadable or neither a binary nor an archive."""
    name = discovery.printable(target.path.name)
    if any(b.path == name for b in found.binaries):
        return name
    if name in found.aliases:
        return found.aliases[name]
    problem = next((e.message for e in found.errors if e.path == name), None)
    if problem is not None:
        raise discovery.TargetError(f"{target.display}: cannot read it ({problem})")
    raise discovery.TargetError(
        f"{target.display}: not a PE or ELF binary, nor a wheel or zip archive (a truncated or damaged archive "
        "has no readable directory)"
    )


def _check_focus_read(target: discovery.Target, focus: str, errors: list[FileError]) -> None:
    problem = next((e.message for e in errors if e.path == focus and e.stage == "read"), None)
    if problem is not None:
        raise discovery.TargetError(f"{target.display}: not a readable binary ({problem})")


def _reached_from(
    focus: str, binaries: list[ScannedBinary], edges: list[Edge], verdicts: list[BinaryVerdict],
    errors: list[FileError],
) -> tuple[list[ScannedBinary], list[Edge], list[BinaryVerdict], list[FileError]]:
    """Keep the target binary and what it loads from its folder, transitively;
    errors only for files it asks for."""
    out: dict[str, list[Edge]] = {}
    for edge in edges:
        out.setdefault(edge.source, []).append(edge)
    keep, stack = {focus}, [focus]
    while stack:
        for edge in out.get(stack.pop(), ()):
            if edge.in_tree and edge.resolved and edge.resolved not in keep:
                keep.add(edge.resolved)
                stack.append(edge.resolved)
    asked = {posixpath.basename(e.name.replace("\\", "/")).casefold() for e in edges if e.source in keep}
    return (
        [b for b in binaries if b.path in keep],
        [e for e in edges if e.source in keep],
        [v for v in verdicts if v.binary.path in keep],
        [e for e in errors if e.path == focus or posixpath.basename(e.path).casefold() in asked],
    )


def _host(options: ScanOptions, target: discovery.Target, rules: RuleSet) -> tuple[HostReport | None, str, bool]:
    """(host report, what the verdict is based on, whether host gaps count)."""
    if options.host == "none":
        return None, "software-only: the host was not examined (--host none)", False
    if options.host != "auto":
        host = load_host_report(options.host)
        return host, f"judged for the recorded host {Path(options.host).name} ({_gpu_text(host)})", True
    host = detect_host(target=str(target.path), rules=rules)
    if host.gpu is None and not host.sdks:
        # the next step (--host FILE.json) is the outputs' to say, where there is a CUDA binary to judge
        return host, "software-only: no AMD GPU or HIP SDK was found on this machine", False
    return host, f"judged for this machine ({_gpu_text(host)})", True


def _gpu_text(host: HostReport) -> str:
    gpu = host.gpu
    if gpu is None:
        return "no AMD GPU"
    return f"{gpu.name}, {gpu.gfx or 'unknown gfx'}" + (f", HIP SDK {host.sdk.version}" if host.sdk else ", no HIP SDK")


def _reach(binaries: list[ScannedBinary], distributions: list[Distribution],
           frameworks: Sequence[Framework]) -> Callable[[str, str], tuple[bool, str | None]]:
    """Whether a library found only elsewhere in the tree counts for a binary
    (graph.resolve_edges' `reach`): within its own distribution, or where
    either file belongs to none, yes (Python packages put their own folders on
    the search path); in another distribution's folder only where the
    consumer's framework rule says it adds that folder ([[search_folders]])."""
    from cuda4amd.rules.frameworks import framework_for

    owner = {b.path: b.distribution for b in binaries}
    formats = {b.path: b.info.format for b in binaries}
    roots = {d.name: posixpath.dirname(d.dist_info) for d in distributions}
    rules_of = {d.name: framework_for(d.name, frameworks) for d in distributions}

    def reach(source: str, hit: str) -> tuple[bool, str | None]:
        mine, theirs = owner.get(source), owner.get(hit)
        if mine is None or theirs is None or mine == theirs:
            return True, None
        framework = rules_of.get(mine)
        if framework is None:
            return False, None
        platform = platform_of(formats.get(source, "ELF"))
        pattern = _added_folder(framework, platform, posixpath.dirname(hit), roots.get(mine, ""))
        return (True, f"framework rule {framework.id}: adds {pattern}") if pattern else (False, None)

    return reach


def _added_folder(framework: Framework, platform: str, folder: str, root: str) -> str | None:
    """The framework's [[search_folders]] glob that matches a tree folder
    (relative to the site-packages folder `root` holding the framework), or None."""
    rel = posixpath.relpath(folder, root) if root else folder
    fold = str.casefold if platform == "windows" else str
    for rule in framework.search_folders:
        if rule.platform not in (None, platform):
            continue
        for pattern in rule.folders:
            if fnmatch.fnmatchcase(fold(rel), fold(pattern)):
                return pattern
    return None


def _locate_loads(packages: Sequence[PackageVerdict], binaries: Sequence[ScannedBinary],
                  distributions: Sequence[Distribution], frameworks: Sequence) -> None:
    """Set `resolved` on each framework-rule load of each package: the tree
    file of that name in the package's own distribution or in a folder its
    framework rule adds ([[search_folders]]; e.g. JAX preloads libcusparse.so.12
    from nvidia/cu13/lib), else None. What that file loads in turn is then in
    the report's graph (binaries[].dependencies of the resolved path)."""
    from cuda4amd.rules.frameworks import framework_for

    roots = {d.name: posixpath.dirname(d.dist_info) for d in distributions}
    named: dict[tuple[str, str], list[ScannedBinary]] = {}
    for binary in binaries:
        platform = platform_of(binary.info.format)
        base = posixpath.basename(binary.path)
        named.setdefault((platform, loader_key(base, platform)), []).append(binary)
    for package in packages:
        framework = framework_for(package.name, frameworks)
        for load in package.loads:
            load["resolved"] = None
            if framework is None:
                continue
            platform = "windows" if load["name"].casefold().endswith(".dll") else "linux"
            key = (platform, loader_key(load["name"], platform))
            for binary in sorted(named.get(key, []), key=lambda b: b.path):
                if binary.distribution == package.name or _added_folder(
                        framework, platform, posixpath.dirname(binary.path), roots.get(package.name, "")):
                    load["resolved"] = binary.path
                    break


