"""The dependency graph: which binary loads which library, and where that library is.

Names resolve the way each platform's loader would: PE names
case-insensitively through the importing binary's folder, the application
folders and extra search paths; ELF names through RPATH/RUNPATH with
$ORIGIN. A library found only somewhere else in the scanned tree is still
linked ("elsewhere-in-tree"): Python packages put such folders on the DLL
search path at run time (os.add_dll_directory, preloading), so the edge is
real, but the report says how it was found.
"""
from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from cuda4amd.model import LoadKind, ScannedBinary, loader_key
from cuda4amd.model import platform_of as platform_of_format

if TYPE_CHECKING:
    import networkx as nx

Platform = str  # "windows" | "linux"
#: a template's expansions (file names) on a platform
Expand = Callable[[str, Platform], Sequence[str]]
#: (source, hit) -> (whether the source's loader may use the hit, through what)
Reach = Callable[[str, str], tuple[bool, str | None]]
#: a file name's system-library kind on a platform, None for no system library
SystemKind = Callable[[str, Platform], str | None]
#: where a name resolves: (resolved path, how, in the tree, system kind, via)
Resolution = tuple[str | None, str, bool, str | None, str | None]


class SystemLibraries(Protocol):
    def system_kind(self, file_name: str, platform: str) -> str | None: ...


@dataclass(frozen=True)
class Edge:
    source: str  # relative path of the importing binary
    name: str  # the library name as the binary asks for it
    load: LoadKind
    symbols: tuple[str, ...]
    ordinals: tuple[int, ...]
    platform: Platform
    resolved: str | None  # relative path in the tree, an absolute path outside it, or None
    # same-folder | app-folder | rpath | runpath | search-path | elsewhere-in-tree | framework-folder | system |
    # unresolved
    how: str
    in_tree: bool
    system_kind: str | None = None
    template: str | None = None  # a by-name load written as a pattern, e.g. nvrtc64_%d_0.dll
    via: str | None = None  # framework-folder: which framework rule adds that folder, and its source


def platform_of(binary: ScannedBinary) -> Platform:
    return platform_of_format(binary.info.format)


class _TreeIndex:
    """Relative paths of the scanned tree, looked up per platform's name rules."""

    def __init__(self, binaries: Sequence[ScannedBinary], aliases: dict[str, str]):
        self.exact: dict[str, str] = {b.path: b.path for b in binaries}
        for alias, real in aliases.items():
            if real in self.exact:
                self.exact.setdefault(alias, real)
        self.folded = {path.casefold(): real for path, real in sorted(self.exact.items())}
        self.by_name: dict[str, list[str]] = {}
        self.by_folded_name: dict[str, list[str]] = {}
        for path, real in sorted(self.exact.items()):
            name = posixpath.basename(path)
            self.by_name.setdefault(name, []).append(real)
            self.by_folded_name.setdefault(name.casefold(), []).append(real)

    def at(self, rel: str, platform: Platform) -> str | None:
        if platform == "windows":
            return self.folded.get(rel.casefold())
        return self.exact.get(rel)

    def everywhere(self, name: str, platform: Platform) -> list[str]:
        hits = self.by_folded_name.get(name.casefold()) if platform == "windows" else self.by_name.get(name)
        return hits or []


class _DiskLookup:
    """Case-insensitive (Windows) or exact file lookup in folders outside the tree."""

    def __init__(self) -> None:
        self._listings: dict[str, dict[str, str]] = {}

    def find(self, folder: str, name: str, platform: Platform) -> str | None:
        if platform != "windows":
            path = os.path.join(folder, name)
            return path if os.path.isfile(path) else None
        listing = self._listings.get(folder)
        if listing is None:
            try:
                listing = {entry.casefold(): entry for entry in os.listdir(folder)}
            except OSError:
                listing = {}
            self._listings[folder] = listing
        real = listing.get(name.casefold())
        return os.path.join(folder, real) if real else None


def resolve_edges(
    binaries: Sequence[ScannedBinary],
    aliases: dict[str, str],
    system: SystemLibraries,
    search_paths: Iterable[Path] = (),
    target_root: Path | None = None,
    expand: Expand = lambda template, platform: (),
    reach: Reach = lambda source, hit: (True, None),
) -> list[Edge]:
    """Resolve every import and by-name load of every binary.

    `reach(source, hit)` -> (allowed, via) decides whether a library found
    only elsewhere in the tree counts for `source`: another distribution's
    folder does only where a framework rule says the consumer adds it (`via`
    names that rule; the edge's how is then `framework-folder`)."""
    index = _TreeIndex(binaries, aliases)
    disk = _DiskLookup()
    extra = [os.fspath(p) for p in search_paths]
    app_folders = sorted(
        {posixpath.dirname(b.path) for b in binaries if b.info.format == "PE" and b.info.kind == "exe"},
        key=lambda d: (d.count("/"), d),
    )
    # Each system name is looked up once, each template expanded once (both
    # depend on their arguments only); a binary's search folders are worked
    # out once, not for every name it loads.
    kinds: dict[tuple[str, str], str | None] = {}

    def system_kind(name: str, platform: Platform) -> str | None:
        key = (name, platform)
        if key not in kinds:
            kinds[key] = system.system_kind(name, platform)
        return kinds[key]

    expansions: dict[tuple[str, str], Sequence[str]] = {}

    def expand_once(template: str, platform: Platform) -> Sequence[str]:
        key = (template, platform)
        if key not in expansions:
            expansions[key] = tuple(expand(template, platform))
        return expansions[key]

    edges: list[Edge] = []
    for binary in binaries:
        platform = platform_of(binary)
        resolve = _Resolver(binary, platform, index, disk, extra, app_folders, target_root, system_kind,
                            reach).resolve
        for imported in binary.info.imports:
            resolved, how, in_tree, system_kind_of, via = resolve(imported.name)
            edges.append(
                Edge(binary.path, imported.name, imported.load, imported.symbols, imported.ordinals,
                     platform, resolved, how, in_tree, system_kind_of, via=via)
            )
        edges += _by_name_edges(binary, platform, resolve, expand_once)
    return edges


def dependency_graph(binaries: Sequence[ScannedBinary], edges: Sequence[Edge]) -> nx.DiGraph:
    """The networkx DiGraph of binaries and the libraries they load.

    Nodes: binaries by relative path (kind "binary"; those read through
    --search-path by absolute path), other libraries as "lib:<name>" (kind
    "library"); system libraries are left out.
    Built on demand (ScanResult.graph): importing networkx costs more than a
    whole verdict, and only graph consumers need it.
    """
    import networkx as nx

    graph = nx.DiGraph()
    read = {binary.path for binary in binaries}
    for binary in binaries:
        graph.add_node(binary.path, kind="binary", format=binary.info.format)
    for edge in edges:
        if edge.how == "system":
            continue  # system libraries are known and kept out of the findings
        shown = edge.template or edge.name
        known = edge.in_tree or edge.resolved in read  # in the tree, or read through --search-path
        node = edge.resolved if known else f"lib:{loader_key(shown, edge.platform)}"
        if not known:
            graph.add_node(node, kind="library", name=shown, resolved=edge.resolved)
        graph.add_edge(edge.source, node, load=edge.load, name=shown, how=edge.how)
    return graph


def _by_name_edges(binary: ScannedBinary, platform: Platform, resolve: Callable[[str], Resolution],
                   expand: Expand) -> list[Edge]:
    """Edges for the CUDA libraries a binary names for loading at run time.

    A name it also imports is not a second edge; a template stands for the
    first of its expansions found in the tree, or else for its first expansion.
    """
    fold = str.casefold if platform == "windows" else (lambda name: name)
    seen = {fold(i.name) for i in binary.info.imports} | {fold(posixpath.basename(binary.path))}
    edges = []
    for ref in binary.by_name:
        candidates = expand(ref.name, platform) if ref.template else (ref.name,)
        if not candidates or fold(ref.name) in seen:
            continue
        seen.add(fold(ref.name))
        found = [(name, resolve(name)) for name in candidates]
        name, (resolved, how, in_tree, system_kind, via) = next(
            ((n, r) for n, r in found if r[2]), found[0]
        )
        edges.append(
            Edge(binary.path, name, "by-name", (), (), platform, resolved, how, in_tree, system_kind,
                 template=ref.name if ref.template else None, via=via)
        )
    return edges


def _prefix(folder: str) -> str:
    """What posixpath.join(folder, name) puts before a name without '/'."""
    return folder if not folder or folder.endswith("/") else folder + "/"


class _Resolver:
    """Where one binary's loader finds a library name (see resolve_edges)."""

    def __init__(self, binary: ScannedBinary, platform: Platform, index: _TreeIndex, disk: _DiskLookup,
                 extra: list[str], app_folders: list[str], target_root: Path | None, system_kind: SystemKind,
                 reach: Reach) -> None:
        self.binary, self.platform, self.index, self.disk = binary, platform, index, disk
        self.extra, self.target_root, self.system_kind, self.reach = extra, target_root, system_kind, reach
        self.here = here = posixpath.dirname(binary.path)
        # Windows: the binary's folder, then the application folders, as
        # casefolded prefixes of index.folded keys (casefolding goes character
        # by character, so folding prefix and name apart is folding the path)
        self.folders: list[tuple[str, str]] = []
        # ELF, in search order: (a prefix in the tree, or None; a folder outside
        # it, or None; whether a file found there is normalised; how)
        self.search: list[tuple[str | None, str | None, bool, str]] = []
        if platform == "windows":
            self.folders = [(_prefix(here).casefold(), "same-folder")] + [
                (_prefix(f).casefold(), "app-folder") for f in app_folders if f != here]
            return
        info = binary.info
        entries = [(p, "rpath") for p in info.rpath] if not info.runpath else []
        entries += [(p, "runpath") for p in info.runpath]
        for raw, how in entries:
            folder = raw.replace("${ORIGIN}", "$ORIGIN")
            if folder.startswith("$ORIGIN"):
                below = folder[len("$ORIGIN"):].lstrip("/")
                rel = posixpath.normpath(posixpath.join(here, below))
                if not rel.startswith(".."):
                    self.search.append(("" if rel == "." else _prefix(rel), None, False, how))
                elif target_root is not None:  # $ORIGIN/.. leaving the tree
                    self.search.append((None, os.path.join(target_root, here, below), True, how))
            elif folder.startswith("/"):
                self.search.append((None, folder, False, how))

    def resolve(self, name: str) -> Resolution:
        platform, index, disk = self.platform, self.index, self.disk
        if "/" in name or (platform == "windows" and "\\" in name):
            rel = posixpath.normpath(posixpath.join(self.here, name.replace("\\", "/")))
            hit = index.at(rel, platform)
            return (hit, "same-folder", True, None, None) if hit else _outside(name, platform, self.system_kind)

        if platform == "windows":
            folded = name.casefold()
            for folder, how in self.folders:
                hit = index.folded.get(folder + folded)
                if hit:
                    return hit, how, True, None, None
        else:
            for in_tree, outside_folder, normalise, how in self.search:
                if in_tree is not None:
                    hit = index.exact.get(in_tree + name)
                    if hit:
                        return hit, how, True, None, None
                elif outside_folder is not None:
                    outside = disk.find(outside_folder, name, platform)
                    if outside:
                        return os.path.normpath(outside) if normalise else outside, how, False, None, None

        kind = self.system_kind(name, platform)
        if kind is not None:
            return None, "system", False, kind, None
        for folder in self.extra:
            outside = disk.find(folder, name, platform)
            if outside:
                return outside, "search-path", False, None, None
        for hit in index.everywhere(name, platform):
            allowed, via = self.reach(self.binary.path, hit)
            if allowed:
                return hit, "framework-folder" if via else "elsewhere-in-tree", True, None, via
        return None, "unresolved", False, None, None


def _outside(name: str, platform: Platform, system_kind: SystemKind) -> Resolution:
    kind = system_kind(posixpath.basename(name.replace("\\", "/")), platform)
    if kind is not None:
        return None, "system", False, kind, None
    return None, "unresolved", False, None, None
