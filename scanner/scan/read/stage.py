"""The read stage: the facts of every binary the scan judges.

    settings = ReadSettings(engine="fast", inspector=PayloadInspector(rules, release), jobs=None, cache=True)
    binaries, errors = read_tree(target, found, settings)

What is read, by what the scan was asked for:

* a folder, venv or archive: every binary discovery found, then the
  data-named files a binary imports after all (:func:`read_tree`), and in a
  folder the members of the wheels and zips in it (:func:`read_archives`);
* a single binary: it and only the files of its folder it loads,
  transitively (:func:`read_closure`);
* with --search-path: the libraries found there, and theirs (:func:`read_outside`).

Each file is read by read.item.read_item, in this process or in workers
(read.parallel), its facts taken from the facts cache where they are there.
"""
from __future__ import annotations

import os
import posixpath
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cuda4amd.model import FileError, ScannedBinary, platform_of
from cuda4amd.scan import discover as discovery
from cuda4amd.scan.distributions import Distribution, find_distributions
from cuda4amd.scan.read.byname import expand_template
from cuda4amd.scan.read.cache import FactCache
from cuda4amd.scan.read.engine import open_regular
from cuda4amd.scan.read.item import read_item
from cuda4amd.scan.read.parallel import read_binaries

if TYPE_CHECKING:
    from cuda4amd.rules.ruleset import RuleSet
    from cuda4amd.scan.graph import Edge
    from cuda4amd.scan.read.payload import PayloadInspector

__all__ = ["ArchivesRead", "ReadSettings", "read_all", "read_archives", "read_closure", "read_outside", "read_tree"]

#: --search-path: at most this many files read outside the tree (a search path of a whole disk stays bounded)
OUTSIDE_LIMIT = 1000


def _ignore(read_bytes: int) -> None:
    """The default progress: nobody is told."""


@dataclass(frozen=True)
class ReadSettings:
    """How binaries are read: the reader, what reads their kernels and by-name loads, the worker
    processes (1: this process; None: one per usable core) and whether the per-user facts cache is used."""

    engine: str
    inspector: PayloadInspector | None = None
    jobs: int | None = 1
    cache: bool = False


@dataclass
class ArchivesRead:
    """What the wheels and zips of a folder hold, paths under the archive's path in the folder."""

    binaries: list[ScannedBinary] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    distributions: list[Distribution] = field(default_factory=list)
    files_seen: int = 0


def read_all(
    target: discovery.Target,
    found: Sequence[discovery.FoundBinary],
    engine: str,
    advance: Callable[[int], None] = _ignore,
    inspector: PayloadInspector | None = None,
    jobs: int | None = 1,
    cache: bool = False,
) -> tuple[list[ScannedBinary], list[FileError]]:
    """Read every binary of ``found``; with an inspector, also its kernels and by-name loads.

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


def _read(target: discovery.Target, found: Sequence[discovery.FoundBinary], settings: ReadSettings,
          advance: Callable[[int], None]) -> tuple[list[ScannedBinary], list[FileError]]:
    return read_all(target, found, settings.engine, advance, settings.inspector, settings.jobs, settings.cache)


def read_tree(target: discovery.Target, found: discovery.Discovery, settings: ReadSettings,
              advance: Callable[[int], None] = _ignore) -> tuple[list[ScannedBinary], list[FileError]]:
    """Read what discovery found, then the data-named files that some binary read imports after all
    (discover.named_skipped), until none is left; sorted by path."""
    binaries, errors = _read(target, found.binaries, settings, advance)
    extra = discovery.named_skipped(found, {i.name for b in binaries for i in b.info.imports})
    while extra:
        more, more_errors = _read(target, extra, settings, advance)
        binaries, errors = sorted(binaries + more, key=lambda b: b.path), errors + more_errors
        extra = discovery.named_skipped(found, {i.name for b in more for i in b.info.imports})
    return binaries, errors


def read_closure(target: discovery.Target, found: discovery.Discovery, focus: str, settings: ReadSettings,
                 rules: RuleSet, advance: Callable[[int], None] = _ignore) -> tuple[list[ScannedBinary], list[FileError]]:
    """Read the binary ``focus``, then only the binaries of its folder whose file names it (or what it
    loads, transitively) asks for: every way the graph resolves a name ends at a file of that name, so
    nothing reachable is missed and a big folder is not read whole."""
    by_name: dict[str, list[discovery.FoundBinary]] = {}
    real = {b.path: b for b in found.binaries}

    def add_aliases(aliases: Sequence[str]) -> None:
        for alias in aliases:
            if found.aliases[alias] in real:
                by_name.setdefault(posixpath.basename(alias).casefold(), []).append(real[found.aliases[alias]])

    for item in found.binaries:
        by_name.setdefault(posixpath.basename(item.path).casefold(), []).append(item)
    add_aliases(list(found.aliases))
    wanted = [real[focus]]
    done: set[str] = set()
    binaries: list[ScannedBinary] = []
    errors: list[FileError] = []
    while wanted:
        batch = sorted({w.path: w for w in wanted if w.path not in done}.values(), key=lambda w: w.path)
        done.update(w.path for w in batch)
        read, failed = _read(target, batch, settings, advance)
        binaries += read
        errors += failed
        wanted = []
        for binary in read:
            names = _names_asked(binary, rules)
            # data-named files discovery did not sniff, when this binary asks for them by name after all
            known_aliases = set(found.aliases)
            for item in discovery.named_skipped(found, set(names)):
                real[item.path] = item
                by_name.setdefault(posixpath.basename(item.path).casefold(), []).append(item)
            add_aliases([alias for alias in found.aliases if alias not in known_aliases])
            for name in names:
                wanted += by_name.get(posixpath.basename(name.replace("\\", "/")).casefold(), [])
    binaries.sort(key=lambda b: b.path)
    return binaries, errors


def _names_asked(binary: ScannedBinary, rules: RuleSet) -> list[str]:
    """The file names a binary loads: its imports, and its by-name loads (templates expanded)."""
    platform = platform_of(binary.info.format)
    names = [i.name for i in binary.info.imports]
    for ref in binary.by_name:
        names += list(expand_template(ref.name, rules, platform)) if ref.template else [ref.name]
    return names


def read_archives(folder: discovery.Target, found: discovery.Discovery, settings: ReadSettings) -> ArchivesRead:
    """Read the wheels and zip archives discovery saw below a folder target: their binaries, errors and
    distributions, with paths prefixed by the archive's path in the folder."""
    archives, errors = _archives_in(folder, found)
    read = ArchivesRead(errors=errors)
    for path in archives:
        prefix = discovery.printable(os.path.relpath(path, folder.path)).replace(os.sep, "/") + "/"
        archive = discovery.Target("archive", path, prefix.rstrip("/"))
        try:
            members = discovery.discover(archive)
        except discovery.TargetError as exc:
            read.errors.append(FileError(prefix.rstrip("/"), "discover", str(exc)))
            continue
        binaries, member_errors = read_tree(archive, members, settings)
        for binary in binaries:
            binary.path = prefix + binary.path
        read.binaries += binaries
        read.errors += [replace(e, path=prefix + e.path) for e in members.errors + member_errors]
        read.distributions += [
            replace(d, dist_info=prefix + d.dist_info, files=frozenset(prefix + f for f in d.files))
            for d in find_distributions(archive)
        ]
        read.files_seen += members.files_seen
    return read


def _archives_in(folder: discovery.Target, found: discovery.Discovery) -> tuple[list[Path], list[FileError]]:
    """The wheels and zip archives discovery saw below a folder target (its walk, so the
    same link policy and no second walk of the tree: that walk was 0.45 s of a 69k-file
    venv); a `.whl`/`.zip` that is no readable zip is an error."""
    archives: list[Path] = []
    errors: list[FileError] = []
    for disk_path in found.archives:
        path = Path(disk_path)
        rel = discovery.printable(os.path.relpath(path, folder.path)).replace(os.sep, "/")
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


def read_outside(edges: list[Edge], binaries: list[ScannedBinary], settings: ReadSettings,
                 resolve: Callable[[list[ScannedBinary]], list[Edge]],
                 limit: int = OUTSIDE_LIMIT) -> tuple[list[ScannedBinary], list[FileError]]:
    """Read the binaries that ``edges`` resolve to through --search-path (under their absolute path),
    and those theirs resolve to (``resolve``: the edges of a list of binaries), until no new one turns
    up (at most ``limit`` files)."""
    known = {b.path for b in binaries}
    outside: list[ScannedBinary] = []
    errors: list[FileError] = []
    pending = _outside_paths(edges, known)
    while pending and len(outside) + len(errors) < limit:
        for path in pending:
            known.add(path)
            try:
                size = os.path.getsize(path)
            except OSError as exc:
                errors.append(FileError(path, "read", exc.strerror or str(exc)))
                continue
            item = discovery.FoundBinary(path, "", size, disk_path=path)
            outcome = read_item(item, settings.engine, settings.inspector, None)
            errors.extend(outcome.errors)
            if outcome.binary is not None:
                outside.append(outcome.binary)
        pending = _outside_paths(resolve(binaries + outside), known)
    return outside, errors


def _outside_paths(edges: list[Edge], known: set[str]) -> list[str]:
    return sorted({e.resolved for e in edges if e.how == "search-path" and e.resolved and e.resolved not in known})
