"""The scan pipeline: discover → read → graph → classify → verdict.

`run_scan` is the library entry point; the CLI only parses options and
renders what comes back.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from cuda4amd.host import HostReport, detect_host, host_gaps, load_host_report
from cuda4amd.model import FileError, ScannedBinary
from cuda4amd.rules.loader import RuleSet, ZludaRelease, load_rules
from cuda4amd.scan import discover as discovery
from cuda4amd.scan.classify import binary_identities, classify_edges, in_tree_identities
from cuda4amd.scan.distributions import Distribution, find_distributions, owner_map
from cuda4amd.scan.graph import Edge, dependency_graph, resolve_edges
from cuda4amd.scan.packages import PackageVerdict, package_verdicts
from cuda4amd.scan.read.byname import expand_template
from cuda4amd.scan.read.cache import FactCache
from cuda4amd.scan.read.parallel import read_binaries
from cuda4amd.scan.read.payload import PayloadInspector
from cuda4amd.scan.verdict import BinaryVerdict, decide, overall

if TYPE_CHECKING:
    import networkx as nx


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

    def reading(self, total: int) -> None: ...

    def advance(self) -> None: ...


def run_scan(options: ScanOptions, progress: Progress | None = None, rules: RuleSet | None = None) -> ScanResult:
    progress = progress or Progress()
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    rules = rules or load_rules(options.rule_dirs)
    release = rules.release(options.zluda_release or rules.default_release)
    target = discovery.resolve_target(options.target)
    timings["rules"] = time.perf_counter() - clock

    clock = time.perf_counter()
    host, basis, judge_host = _host(options, target, rules)
    timings["host"] = time.perf_counter() - clock

    clock = time.perf_counter()
    progress.discovering()
    found = discovery.discover(target, follow_links=options.follow_links)
    timings["discover"] = time.perf_counter() - clock

    clock = time.perf_counter()
    progress.reading(len(found.binaries))
    inspector = PayloadInspector(rules, release)
    binaries, read_errors = read_all(target, found.binaries, options.engine, progress.advance, inspector, options.jobs, options.cache)
    extra = discovery.named_skipped(found, {i.name for b in binaries for i in b.info.imports})
    while extra:  # data-named files that some binary imports after all
        more, more_errors = read_all(target, extra, options.engine, progress.advance, inspector, options.jobs, options.cache)
        binaries, read_errors = sorted(binaries + more, key=lambda b: b.path), read_errors + more_errors
        extra = discovery.named_skipped(found, {i.name for b in more for i in b.info.imports})
    timings["read"] = time.perf_counter() - clock

    clock = time.perf_counter()
    distributions = find_distributions(target, follow_links=options.follow_links)
    if distributions:
        owners = owner_map(distributions)
        for binary in binaries:
            binary.distribution = owners.owner_of(binary.path)
    edges = resolve_edges(
        binaries,
        found.aliases,
        rules,
        options.search_paths,
        target.path if target.kind != "archive" else None,
        expand=lambda template, platform: expand_template(template, rules, platform),
    )
    by_path = {b.path: b for b in binaries}
    identities = binary_identities(binaries, found.aliases, rules, release)
    judged_in_tree = in_tree_identities(by_path, identities)
    identities.update(judged_in_tree)
    dependencies = classify_edges(by_path, edges, rules, release, judged_in_tree)
    redirected = {d.identity.family for d in dependencies if d.identity.route == "redirect"}
    gaps = host_gaps(host, redirected, rules=rules) if judge_host and host is not None else {}
    verdicts = decide(binaries, dependencies, identities, gaps)
    packages = package_verdicts(verdicts, distributions, rules.frameworks, rules, release) if distributions else []
    timings["analyse"] = time.perf_counter() - clock

    return ScanResult(
        target=target,
        release=release,
        engine=options.engine,
        verdicts=verdicts,
        errors=sorted(found.errors + read_errors, key=lambda e: e.path),
        verdict=overall(verdicts),
        binaries=binaries,
        edges=edges,
        files_seen=found.files_seen,
        packages=packages,
        distributions=distributions,
        host=host,
        basis=basis,
        timings=timings,
        options=options,
        rules=rules,
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
        return host, (
            "software-only: no AMD GPU or HIP SDK was found on this machine "
            "(pass --host FILE.json, made by `cuda4amd doctor --format json`, to judge for another machine)"
        ), False
    return host, f"judged for this machine ({_gpu_text(host)})", True


def _gpu_text(host: HostReport) -> str:
    gpu = host.gpu
    if gpu is None:
        return "no AMD GPU"
    return f"{gpu.name}, {gpu.gfx or 'unknown gfx'}" + (f", HIP SDK {host.sdk.version}" if host.sdk else ", no HIP SDK")


def read_all(
    target: discovery.Target,
    found: Sequence[discovery.FoundBinary],
    engine: str,
    advance: Callable[[], None] = lambda: None,
    inspector: PayloadInspector | None = None,
    jobs: int | None = 1,
    cache: bool = False,
) -> tuple[list[ScannedBinary], list[FileError]]:
    """Read every binary; with an inspector, also its kernels and by-name loads.

    ``jobs``: worker processes (None: one per usable core); ``cache``: use
    the per-user facts cache (scan/read/cache.py). Neither changes the result.
    """
    facts = FactCache.open(engine, inspector) if cache else None
    try:
        return read_binaries(os.fspath(target.path) if target.kind == "archive" else None,
                             found, engine, advance, inspector, jobs, facts)
    finally:
        if facts is not None:
            facts.close()
