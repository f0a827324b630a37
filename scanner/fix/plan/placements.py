"""Where a plan puts each file: the actions of each mode.

* ``launcher`` (default): the application's files are not touched. The
  green-lit part of the release goes to ``<target>/.cuda4amd/zluda/``, and
  launchers (``.cmd`` + ``.ps1`` on Windows, ``.sh`` on Linux, fix.launchers)
  set the environment and run the program through ``zluda.exe --`` (Windows)
  or with ``LD_LIBRARY_PATH`` and, where an RPATH or a load by full path would
  win, ``LD_AUDIT=<zluda>/zluda_ld`` (Linux).
* ``place``: ZLUDA's files are put next to the binaries that import the
  redirected libraries (or over the NVIDIA file the import resolves to, which
  is backed up), for hosts that cannot use a launcher.
"""
from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PureWindowsPath
from typing import TYPE_CHECKING

from cuda4amd.fix.plan.model import FIX_DIR, STORE_DIR, Action, EnvVar, PlanError, in_fix_dir, sha256_text
from cuda4amd.fix.plan.release_files import is_executable, resolve_row
from cuda4amd.model import loader_key

if TYPE_CHECKING:
    from cuda4amd.fix.archive import Store
    from cuda4amd.fix.plan.green_lit import Dep
    from cuda4amd.rules.releases import ZludaFile, ZludaRelease
    from cuda4amd.scan.pipeline import ScanResult
    from cuda4amd.scan.verdict import BinaryVerdict

__all__ = ["launcher_actions", "launcher_folder", "launcher_programs", "place_actions", "rel_or_abs", "settle"]


# -- launcher mode ------------------------------------------------------------------

def launcher_actions(files: list[ZludaFile], platform: str, programs: list[dict[str, str]], environment: list[EnvVar],
                     launcher_exe: str | None, root: Path, launch_dir: Path, tag: str) -> list[Action]:
    """Launcher mode: the release's files into the store, the launchers' folder, the launchers."""
    from cuda4amd.fix.launchers import launcher_files

    folders = sorted({posixpath.dirname(f.path) for f in files if "/" in f.path})
    actions = [Action("mkdir", STORE_DIR, why="ZLUDA's files for this application")]
    actions += [Action("mkdir", f"{STORE_DIR}/{d}", why="ZLUDA's files") for d in folders]
    for f in sorted(files, key=lambda f: f.path):
        dest = f"{STORE_DIR}/{f.path}"
        if f.link_to:
            target = posixpath.relpath(f.link_to, posixpath.dirname(f.path) or ".")
            actions.append(Action("link", dest, source=f.path, link=target, why=f"{f.replaces} (link)"))
        else:
            actions.append(Action("copy", dest, source=f.path, why=f.replaces,
                                  executable=is_executable(f.path, platform)))
    rel_dir = rel_or_abs(root, launch_dir)
    if os.path.isabs(rel_dir):
        if not launch_dir.is_dir():
            raise PlanError(f"the launchers' folder {launch_dir} does not exist")
    elif rel_dir != ".":
        parts = rel_dir.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub != FIX_DIR and not (root / sub).is_dir():
                actions.append(Action("mkdir", sub, why="the launchers' folder"))
    for rel, text, executable in launcher_files(
            platform=platform, programs=programs, environment=environment, launcher_exe=launcher_exe,
            root=root, launch_dir=launch_dir, tag=tag):
        actions.append(Action("write", rel, content=text, sha256=sha256_text(text), executable=executable,
                              why="launcher"))
    return actions


def settle(actions: list[Action], root: Path, store: Store | None) -> None:
    """Mark the destinations that exist now (they are backed up), and fill the
    copies' hashes when the release is at hand."""
    for a in actions:
        if a.kind in ("copy", "write", "link"):
            a.replaces = os.path.lexists(_absolute(root, a.path))
    if store is not None:
        for a in actions:
            if a.kind == "copy":
                sha = store.sha_of(a.source) if a.source is not None else None
                if sha is None:
                    raise PlanError(f"the release has no file {a.source}")
                a.sha256 = sha


def _absolute(root: Path, path: str) -> Path:
    return Path(path) if os.path.isabs(path) else root.joinpath(*path.split("/"))


def launcher_folder(root: Path, launcher_dir: str | os.PathLike[str] | None) -> Path:
    """Where the launchers go: `--launchers DIR`, else the target's .cuda4amd."""
    if launcher_dir is None:
        return root / FIX_DIR
    return Path(launcher_dir).expanduser().resolve()


def rel_or_abs(root: Path, path: Path) -> str:
    """`path` relative to the root ('/'-separated), or absolute when outside it."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def launcher_programs(result: ScanResult, verdicts: list[BinaryVerdict], left: Mapping[str, str], root: Path,
                      platform: str) -> list[dict[str, str]]:
    """The executables launchers are written for: every executable of the
    tree that is not blocked, and a venv's Python."""
    found: list[str] = []  # binary paths are relative to the root (a single file's folder too)
    for v in verdicts:
        kind = v.binary.info.kind
        if v.binary.path in left or v.verdict == "blocked":
            continue
        if (platform == "windows" and kind == "exe") or (platform == "linux" and kind == "executable"):
            found.append(v.binary.path)
    if result.target.kind == "venv":
        for rel in ("Scripts/python.exe",) if platform == "windows" else ("bin/python",):
            if os.path.lexists(root / rel):
                found.append(rel)
    names: dict[str, int] = {}
    programs: list[dict[str, str]] = []
    for rel in sorted(dict.fromkeys(found)):
        stem = posixpath.basename(rel)
        if platform == "windows" and stem.lower().endswith(".exe"):
            stem = stem[:-4]
        stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem) or "program"
        if stem.lower() in ("zluda-run",) or stem.lower() in names:
            names[stem.lower()] = names.get(stem.lower(), 1) + 1
            stem = f"{stem}-{names[stem.lower()]}"
        names.setdefault(stem.lower(), 1)
        programs.append({"name": stem, "path": rel})
    return programs


# -- place mode ---------------------------------------------------------------------

def place_actions(linked: list[Dep], importers: list[BinaryVerdict], by_path: Mapping[str, BinaryVerdict],
                  release: ZludaRelease, platform: str, warnings: list[str]) -> list[Action]:
    """Placement mode: ZLUDA's file for each linked name next to the binary
    that imports it, or over the in-tree NVIDIA file the import resolves to.

    Nothing is placed outside the target (issue 11: the tool writes only in
    the target, its .cuda4amd/ and the launcher folder). A library read
    through --search-path lies outside it: on Windows its imports are placed
    in the folder of each program of the target that loads it, since the
    loader looks in the application's folder first for every implicitly
    linked DLL (Microsoft, "Dynamic-link library search order", standard
    order, SafeDllSearchMode on or off); where no program of the target loads
    it, and on Linux (ld.so looks in the importer's own RUNPATH, then
    LD_LIBRARY_PATH), it is left out with a note to use the launcher."""
    placer = _Placer(release, platform, by_path, warnings)
    for d in linked:
        placer.place(d)
    placer.note_outside()
    if platform == "windows":
        placer.place_drivers(importers)
    return sorted(placer.dests.values(), key=lambda a: a.path)


@dataclass
class _Placer:
    """The place-mode actions as they are chosen: one copy per destination (as the loader names it)."""

    release: ZludaRelease
    platform: str
    by_path: Mapping[str, BinaryVerdict]
    warnings: list[str]
    dests: dict[str, Action] = field(default_factory=dict)
    driver_folders: set[str] = field(default_factory=set)
    outside: dict[str, list[str]] = field(default_factory=dict)  # a --search-path library -> names left out
    rows: dict[str, ZludaFile] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rows = {f.path: f for f in self.release.files if f.platform == self.platform}

    def add(self, dest: str, source_row: ZludaFile, why: str) -> None:
        key = loader_key(dest, self.platform)
        if key in self.dests:
            return
        source = resolve_row(self.rows, source_row.path) or source_row.path
        self.dests[key] = Action("copy", dest, source=source, why=why)
        self.driver_folders.add(posixpath.dirname(dest))

    def place(self, d: Dep) -> None:
        row = self.release.replacement_for(d.name, self.platform)
        if row is None:
            return
        if d.resolved and d.in_tree:
            self.add(d.resolved, row, f"ZLUDA's {row.name} in place of NVIDIA's (backed up), for {d.binary}")
        elif not _in_target(d.binary):
            folders = _program_folders_loading(d.binary, self.by_path) if self.platform == "windows" else []
            for folder in folders:
                name = posixpath.join(folder, row.name) if folder else row.name
                self.add(name, row, f"ZLUDA's {row.name} in the folder of the program that loads {d.binary} "
                                    f"(searched before the library's own folder)")
            if not folders:
                self.outside.setdefault(d.binary, []).append(d.name)
        else:
            self.next_to(d, row)

    def next_to(self, d: Dep, row: ZludaFile) -> None:
        """ZLUDA's file next to the in-tree binary that imports it (Linux: in its $ORIGIN search path)."""
        folder = posixpath.dirname(d.binary)
        name = row.name if self.platform == "windows" else d.name
        why = f"ZLUDA's {row.name} next to {d.binary}"
        origin = None
        if self.platform == "linux":
            origin = _origin_folder(self.by_path.get(d.binary))
            if origin is not None:
                folder, why = origin, f"ZLUDA's {row.name} in {d.binary}'s $ORIGIN search path"
        dest = posixpath.join(folder, name) if folder else name
        if self.platform == "linux" and origin is None:
            self.warnings.append(f"{dest}: the loader finds it next to {d.binary} only through an RPATH/RUNPATH "
                                 f"with $ORIGIN or LD_LIBRARY_PATH; the launcher mode does not depend on that")
        self.add(dest, row, why)

    def note_outside(self) -> None:
        for binary, names in sorted(self.outside.items()):
            where = ("no program of the target loads it" if self.platform == "windows"
                     else "ld.so finds its libraries through its own RUNPATH or LD_LIBRARY_PATH")
            self.warnings.append(f"{binary} lies outside the target (found through --search-path) and {where}: "
                                 f"ZLUDA's {', '.join(sorted(set(names)))} for it are not placed (nothing is "
                                 f"written outside the target); use the launcher mode (--mode launcher) for it")

    def place_drivers(self, importers: list[BinaryVerdict]) -> None:
        """Windows: ZLUDA's driver in every folder a file was placed in and every program's folder."""
        driver_rows = [f for f in self.release.files if f.platform == "windows" and "/" not in f.path
                       and f.library == "driver"]
        for v in importers:
            if v.binary.info.kind == "exe" and _in_target(v.binary.path):
                self.driver_folders.add(posixpath.dirname(v.binary.path))
        for folder in sorted(self.driver_folders):
            for row in driver_rows:
                dest = posixpath.join(folder, row.name) if folder else row.name
                self.add(dest, row, f"ZLUDA's {row.name} (the driver every ZLUDA library runs on)")


def _origin_folder(verdict: BinaryVerdict | None) -> str | None:
    """The first in-tree folder of an ELF binary's RUNPATH (else RPATH) that is
    relative to $ORIGIN: where the loader will look for its libraries."""
    if verdict is None:
        return None
    info = verdict.binary.info
    base = posixpath.dirname(verdict.binary.path)
    for entry in (info.runpath or info.rpath):
        for prefix in ("$ORIGIN", "${ORIGIN}"):
            if entry == prefix or entry.startswith(prefix + "/"):
                folder = posixpath.normpath(posixpath.join(base, entry[len(prefix):].lstrip("/")))
                if folder == ".":
                    return ""
                if not folder.startswith("..") and not in_fix_dir(folder):
                    return folder
    return None


def _in_target(path: str) -> bool:
    """Whether a scan path is a file of the target (relative, "/"-separated),
    not one read through --search-path (those keep their absolute path)."""
    return not (posixpath.isabs(path) or PureWindowsPath(path).drive or path == ".." or path.startswith("../"))


def _program_folders_loading(binary: str, by_path: Mapping[str, BinaryVerdict]) -> list[str]:
    """The folders of the target's programs (exe files) that load `binary`,
    directly or through the libraries they load."""
    loaders: dict[str, set[str]] = {}
    for path, verdict in by_path.items():
        for dep in verdict.dependencies:
            if dep.edge.resolved:
                loaders.setdefault(dep.edge.resolved, set()).add(path)
    seen, stack = {binary}, [binary]
    folders: set[str] = set()
    while stack:
        for parent in loaders.get(stack.pop(), ()):
            if parent in seen:
                continue
            seen.add(parent)
            stack.append(parent)
            loader = by_path.get(parent)
            if loader is not None and loader.binary.info.kind == "exe" and _in_target(parent):
                folders.add(posixpath.dirname(parent))
    return sorted(folders)


