"""The scan pipeline: discover → read → graph → classify → verdict.

`run_scan` is the library entry point; the CLI only parses options and
renders what comes back.
"""
from __future__ import annotations

import fnmatch
import os
import posixpath
import time
import zipfile
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from cuda4amd.host import HostReport, detect_host, host_gaps, load_host_report
from cuda4amd.model import FileError, ScannedBinary, loader_key, platform_of
from cuda4amd.rules.releases import ZludaRelease
from cuda4amd.rules.ruleset import RuleSet, load_rules
from cuda4amd.scan import discover as discovery
from cuda4amd.scan.classify import binary_identities, classify_edges, in_tree_identities
from cuda4amd.scan.distributions import Distribution, find_distributions, owners_of
from cuda4amd.scan.graph import Edge, dependency_graph, resolve_edges
from cuda4amd.scan.packages import PackageVerdict, package_verdicts
from cuda4amd.scan.read.byname import expand_template
from cuda4amd.scan.read.cache import FactCache
from cuda4amd.scan.read.engine import MalformedBinary, mapped, open_regular, read_buffer
from cuda4amd.scan.read.parallel import ReadPool, read_binaries
from cuda4amd.scan.read.payload import PayloadInspector
from cuda4amd.scan.routes import unseen_loaders
from cuda4amd.scan.verdict import BinaryVerdict, decide, overall

if TYPE_CHECKING:
    import networkx as nx

    from cuda4amd.scan.walk_ahead import WalkAhead


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


def run_scan(options: ScanOptions, progress: Progress | None = None, rules: RuleSet | None = None,
             walk_ahead: WalkAhead | None = None) -> ScanResult:
    """Scan ``options.target``. ``walk_ahead``: the tree's walk, begun before (scan.walk_ahead); taken
    instead of walking when it walked this scan's tree as this scan would."""
    progress = progress or Progress()
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    rules = rules or load_rules(options.rule_dirs)
    release = rules.release(options.zluda_release or rules.default_release)
    target = discovery.resolve_target(options.target)
    timings["rules"] = time.perf_counter() - clock

    def examine_host():
        clock = time.perf_counter()
        examined = _host(options, target, rules)
        timings["host"] = time.perf_counter() - clock
        return examined

    # A recorded host report is read now (a bad one stops the scan before it
    # starts); this machine is examined while the workers read, if any do.
    host_report = cache(examine_host)  # computed on the first call, which may come early
    if options.host != "auto":
        host_report()

    inspector = PayloadInspector(rules, release)  # one for the scan: its name patterns are compiled once
    installed = cache(lambda: find_distributions(target, follow_links=options.follow_links))
    walk: list[discovery.Discovery] = []  # the walk's result, once there is one
    # which installed distribution lists each binary the walk found: a lookup per path (owners_of)
    found_owners = cache(lambda: owners_of(installed(), [b.path for b in walk[0].binaries]))

    # What analysis needs besides the facts and no walk, the longest first (the distributions: 0.1 s of a
    # 69k-file venv): made while this process would only wait, on the walk ahead or on the workers that read.
    needs = (installed, lambda: _releases_parsed(rules), host_report)

    def meanwhile() -> None:
        """While the workers read: what needs no walk, and the owners of the binaries the walk found."""
        for need in needs:
            need()
        if walk:
            found_owners()

    # A single binary is scanned with its folder, its application directory:
    # the libraries it loads from there decide its verdict too.
    walked = _application_folder(target) if target.kind == "file" else target
    with _shared_workers(walked, options, inspector) as workers:
        if walk_ahead is not None:
            # A re-scan reads no file: these would come after the walk, one after another. Each is begun
            # only while the child still walks (what is left is made while the workers read, if any do):
            # the distributions, begun last, ran on for 40 ms after the walk (docs/performance.md, 2026-12-03).
            for need in needs:
                if not walk_ahead.walking():
                    break
                need()
        clock = time.perf_counter()
        progress.discovering()
        found = walk_ahead.take(walked, options.follow_links, options.jobs) if walk_ahead is not None else None
        if found is None:
            found = discovery.discover(walked, follow_links=options.follow_links, jobs=options.jobs,
                                       executor=workers.executor if workers is not None else None)
        walk.append(found)
        focus = _focus(target, found) if target.kind == "file" else None
        timings["discover"] = time.perf_counter() - clock
        clock = time.perf_counter()
        binaries, read_errors = _read_stage(walked, target, found, focus, options, progress, inspector, rules,
                                            meanwhile, workers)
    distributions = list(installed())
    if walked.kind in ("folder", "site-packages", "venv") and focus is None:
        # wheels and zips in a folder are scanned too, their members under the archive's path
        archives, archive_errors = _archives_in(walked, found)
        read_errors += archive_errors
        for archive in archives:
            more, more_errors, more_distributions, seen = _scan_archive(walked, archive, options, inspector)
            binaries += more
            read_errors += more_errors
            distributions += more_distributions
            found.files_seen += seen
        binaries.sort(key=lambda b: b.path)
    timings["read"] = time.perf_counter() - clock

    clock = time.perf_counter()
    frameworks = rules.frameworks if distributions else ()
    if distributions:
        owners: dict[str, str] = {}
        asked: set[str] = set()
        if len(distributions) == len(installed()):  # else archives in the tree added some: all are asked anew
            owners, asked = dict(found_owners()), {b.path for b in found.binaries}
        rest = [binary.path for binary in binaries if binary.path not in asked]  # a path's owner is its own
        if rest:
            owners.update(owners_of(distributions, rest))
        for binary in binaries:
            binary.distribution = owners.get(binary.path)
    reach = _reach(binaries, distributions, frameworks)
    def resolve(binaries):
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
        outside, outside_errors = _read_outside(edges, binaries, options.engine, inspector, resolve)
        if outside:
            binaries = binaries + outside
            edges = resolve(binaries)
        read_errors += outside_errors
    by_path = {b.path: b for b in binaries}
    identities = binary_identities(binaries, found.aliases, rules, release)
    judged_in_tree = in_tree_identities(by_path, identities)
    identities.update(judged_in_tree)
    dependencies = classify_edges(by_path, edges, rules, release, judged_in_tree)
    redirected = {d.identity.family for d in dependencies if d.identity.route == "redirect"}
    host, basis, judge_host = host_report()
    gaps = host_gaps(host, redirected, rules=rules) if judge_host and host is not None else {}
    unseen = unseen_loaders(binaries, dependencies, identities, rules)
    verdicts = decide(binaries, dependencies, identities, gaps, rules.ptx.get(release.tag), unseen)
    packages = package_verdicts(verdicts, distributions, frameworks, rules, release) if distributions else []
    _locate_loads(packages, binaries, distributions, frameworks)
    errors = found.errors + read_errors
    if focus is not None:
        binaries, edges, verdicts, errors = _reached_from(focus, binaries, edges, verdicts, errors)
    timings["analyse"] = time.perf_counter() - clock

    return ScanResult(
        target=target,
        release=release,
        engine=options.engine,
        verdicts=verdicts,
        errors=sorted(errors, key=lambda e: e.path),
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


def _read_outside(edges, binaries, engine, inspector, resolve, limit: int = 1000):
    """Read the binaries that edges resolve to through --search-path, and
    theirs, until no new one turns up (at most `limit` files)."""
    known = {b.path for b in binaries}
    outside: list[ScannedBinary] = []
    errors: list[FileError] = []
    pending = sorted({e.resolved for e in edges if e.how == "search-path" and e.resolved and e.resolved not in known})
    while pending and len(outside) + len(errors) < limit:
        fresh = []
        for path in pending:
            known.add(path)
            try:
                with mapped(path) as buf:
                    info = read_buffer(buf, engine, path if engine == "lief" else None, exports=False)
                    binary = ScannedBinary(path, info, os.path.getsize(path))
                    payload = inspector.inspect(path, buf, info)
                    binary.kernels, binary.by_name = payload.kernels, payload.by_name
                    binary.driver_names, binary.calls_cuda = payload.driver_names, payload.calls_cuda
                    errors.extend(payload.errors)
            except MalformedBinary as exc:
                errors.append(FileError(path, "read", str(exc)))
                continue
            except OSError as exc:
                errors.append(FileError(path, "read", exc.strerror or str(exc)))
                continue
            outside.append(binary)
            fresh.append(binary)
        edges = resolve(binaries + outside)
        pending = sorted({e.resolved for e in edges if e.how == "search-path" and e.resolved and e.resolved not in known})
    return outside, errors


def _archives_in(target: discovery.Target, found: discovery.Discovery) -> tuple[list[Path], list[FileError]]:
    """The wheels and zip archives discovery saw below a folder target (its walk, so the
    same link policy and no second walk of the tree: that walk was 0.45 s of a 69k-file
    venv); a `.whl`/`.zip` that is no readable zip is an error."""
    archives: list[Path] = []
    errors: list[FileError] = []
    for disk_path in found.archives:
        path = Path(disk_path)
        rel = discovery.printable(os.path.relpath(path, target.path)).replace(os.sep, "/")
        try:
            with open_regular(path) as handle:  # a FIFO swapped in after the listing is refused
                readable = zipfile.is_zipfile(handle)
        except OSError as exc:
            errors.append(FileError(rel, "discover", exc.strerror or str(exc)))
            continue
        if readable:
            archives.append(path)
        else:
            errors.append(FileError(rel, "discover", "not a readable zip archive (truncated or damaged?)"))
    return archives, errors


def _shared_workers(walked: discovery.Target, options: ScanOptions, inspector: PayloadInspector):
    """The worker processes a folder scan's walk and read stage share (started
    on first use), or nothing where both stay in one process."""
    from contextlib import nullcontext

    from cuda4amd.scan.workers import usable_cores

    workers = options.jobs if options.jobs is not None else usable_cores()
    if walked.kind == "archive" or workers <= 1 or options.engine != "fast":
        return nullcontext(None)
    return ReadPool(None, options.engine, inspector, workers)


def _read_stage(walked: discovery.Target, target: discovery.Target, found: discovery.Discovery,
                focus: str | None, options: ScanOptions, progress: Progress, inspector: PayloadInspector,
                rules: RuleSet, meanwhile: Callable[[], None], workers: ReadPool | None):
    """(binaries, errors): what the scan reads; ``meanwhile`` is run while the workers read, if any do."""
    if focus is None:
        progress.reading(len(found.binaries))
        return _read_found(walked, found, options, progress.advance, inspector, meanwhile, workers)
    binaries, read_errors = _read_closure(walked, found, focus, options, progress, inspector, rules)
    _check_focus_read(target, focus, read_errors)
    return binaries, read_errors


def _read_found(walked: discovery.Target, found: discovery.Discovery, options: ScanOptions,
                advance: Callable[[], None], inspector: PayloadInspector,
                meanwhile: Callable[[], object] | None = None,
                workers: ReadPool | None = None) -> tuple[list[ScannedBinary], list[FileError]]:
    """Read what discovery found, then the data-named files that some binary read imports after all
    (discover.named_skipped), until none is left. ``meanwhile``: run while workers read, if any do."""
    binaries, errors = read_all(walked, found.binaries, options.engine, advance, inspector, options.jobs, options.cache,
                                meanwhile, workers)
    extra = discovery.named_skipped(found, {i.name for b in binaries for i in b.info.imports})
    while extra:
        more, more_errors = read_all(walked, extra, options.engine, advance, inspector, options.jobs, options.cache,
                                     pool=workers)
        binaries, errors = sorted(binaries + more, key=lambda b: b.path), errors + more_errors
        extra = discovery.named_skipped(found, {i.name for b in more for i in b.info.imports})
    return binaries, errors


def _scan_archive(walked: discovery.Target, path: Path, options: ScanOptions, inspector: PayloadInspector):
    """Read one archive of a folder: its binaries, errors and distributions,
    with paths prefixed by the archive's path in the folder."""
    prefix = discovery.printable(os.path.relpath(path, walked.path)).replace(os.sep, "/") + "/"
    archive = discovery.Target("archive", path, prefix.rstrip("/"))
    try:
        found = discovery.discover(archive)
    except discovery.TargetError as exc:
        return [], [FileError(prefix.rstrip("/"), "discover", str(exc))], [], 0
    binaries, errors = _read_found(archive, found, options, lambda: None, inspector)
    for binary in binaries:
        binary.path = prefix + binary.path
    errors = [replace(e, path=prefix + e.path) for e in found.errors + errors]
    distributions = [
        replace(d, dist_info=prefix + d.dist_info, files=frozenset(prefix + f for f in d.files))
        for d in find_distributions(archive)
    ]
    return binaries, errors, distributions, found.files_seen


def _read_closure(walked, found, focus: str, options: ScanOptions, progress: Progress, inspector: PayloadInspector,
                  rules: RuleSet):
    """Read the target binary, then only the binaries of its folder whose
    file names it (or what it loads, transitively) asks for: every way the
    graph resolves a name ends at a file of that name, so nothing reachable
    is missed and a big folder is not read whole."""
    by_name: dict[str, list[discovery.FoundBinary]] = {}
    real = {b.path: b for b in found.binaries}
    for item in found.binaries:
        by_name.setdefault(posixpath.basename(item.path).casefold(), []).append(item)
    for alias, target in found.aliases.items():
        if target in real:
            by_name.setdefault(posixpath.basename(alias).casefold(), []).append(real[target])
    wanted = [real[focus]]
    done: set[str] = set()
    binaries: list[ScannedBinary] = []
    errors: list[FileError] = []
    progress.reading(len(found.binaries))
    while wanted:
        batch = sorted({w.path: w for w in wanted if w.path not in done}.values(), key=lambda w: w.path)
        done.update(w.path for w in batch)
        read, failed = read_all(walked, batch, options.engine, progress.advance, inspector, options.jobs, options.cache)
        binaries += read
        errors += failed
        wanted = []
        for binary in read:
            platform = platform_of(binary.info.format)
            names = [i.name for i in binary.info.imports]
            for ref in binary.by_name:
                names += list(expand_template(ref.name, rules, platform)) if ref.template else [ref.name]
            # data-named files discovery did not sniff, when this binary asks for them by name after all
            known_aliases = set(found.aliases)
            for item in discovery.named_skipped(found, set(names)):
                real[item.path] = item
                by_name.setdefault(posixpath.basename(item.path).casefold(), []).append(item)
            for alias in set(found.aliases) - known_aliases:
                if found.aliases[alias] in real:
                    by_name.setdefault(posixpath.basename(alias).casefold(), []).append(real[found.aliases[alias]])
            for name in names:
                wanted += by_name.get(posixpath.basename(name.replace("\\", "/")).casefold(), [])
    binaries.sort(key=lambda b: b.path)
    return binaries, errors


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


def _reached_from(focus: str, binaries: list[ScannedBinary], edges: list[Edge],
                  verdicts: list[BinaryVerdict], errors: list[FileError]):
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


def _reach(binaries: list[ScannedBinary], distributions: list[Distribution], frameworks: Sequence):
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


def _added_folder(framework, platform: str, folder: str, root: str) -> str | None:
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


def _releases_parsed(rules: RuleSet) -> None:
    """Every release table parsed (RuleSet.release keeps each): a binary that
    names driver functions is judged against all of them (classify), and the
    parsing is best done while waiting on workers."""
    for tag in rules.release_tags:
        rules.release(tag)


def read_all(
    target: discovery.Target,
    found: Sequence[discovery.FoundBinary],
    engine: str,
    advance: Callable[[], None] = lambda: None,
    inspector: PayloadInspector | None = None,
    jobs: int | None = 1,
    cache: bool = False,
    meanwhile: Callable[[], object] | None = None,
    pool: ReadPool | None = None,
) -> tuple[list[ScannedBinary], list[FileError]]:
    """Read every binary; with an inspector, also its kernels and by-name loads.

    ``jobs``: worker processes (None: one per usable core); ``cache``: use
    the per-user facts cache (scan/read/cache.py). Neither changes the result.
    ``meanwhile``: called once while workers read, if any do.
    """
    facts = FactCache.open(engine, inspector) if cache else None
    try:
        return read_binaries(os.fspath(target.path) if target.kind == "archive" else None,
                             found, engine, advance, inspector, jobs, facts, meanwhile, pool)
    finally:
        if facts is not None:
            facts.close()
