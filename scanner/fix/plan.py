"""The fix plan: what linking ZLUDA to a scanned application will do, as data.

    plan = make_plan(result, rules=rules, host=host, source=source, store=store, mode="launcher")
    print(plan.render()); plan.to_dict()

Only the green-lit set is linked: the dependencies whose route is
``redirect`` (ZLUDA's file takes the name) or ``passthrough`` (NVIDIA's own
library on ZLUDA's driver) of binaries that are not blocked. Families the host
cannot serve (no MIOpen for cuDNN, no rocBLAS kernels for the GPU, ...) are not
linked, and the binaries that import them statically are left alone with the
reason, like blocked binaries. The driver (``nvcuda.dll`` / ``libcuda.so.1``)
is always linked: every redirected library and every passthrough library runs
on it.

Modes:

* ``launcher`` (default): the application's files are not touched. The
  green-lit part of the release goes to ``<target>/.cuda4amd/zluda/``, and
  launchers (``.cmd`` + ``.ps1`` on Windows, ``.sh`` on Linux) set the
  environment and run the program through ``zluda.exe --`` (Windows) or with
  ``LD_LIBRARY_PATH`` and, where an RPATH or a load by full path would win,
  ``LD_AUDIT=<zluda>/zluda_ld`` (Linux).
* ``place``: ZLUDA's files are put next to the binaries that import the
  redirected libraries (or over the NVIDIA file the import resolves to, which
  is backed up), for hosts that cannot use a launcher.

Every action names its destination (relative to the target, or absolute
when outside it: launchers in another folder), its source in the release and
the sha256 its destination will have. The journal (journal.py) adds the
before-state and backups when it applies the plan.
"""
from __future__ import annotations

import hashlib
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path, PureWindowsPath
from typing import Any, Iterable

from cuda4amd.model import loader_key, platform_of

# The planner's helpers from host/, report/, launchers and the framework rules are imported in the
# steps that use them: the journal imports this module for Plan, and `cuda4amd run` / `undo` start
# with the journal, so this module stays as light as its data classes.

__all__ = ["PlanError", "Action", "EnvVar", "Plan", "make_plan", "FIX_DIR", "STORE_DIR", "JOURNAL_NAME",
           "BACKUP_DIR", "REPORT_PATH", "sha256_text",
           "MODES", "expand_parts", "PLAN_SCHEMA", "target_root", "in_fix_dir"]

PLAN_SCHEMA = "cuda4amd.fix-plan/1"
#: the fix folder and what it holds, relative to the target root: the one place these paths are named
FIX_DIR = ".cuda4amd"
STORE_DIR = f"{FIX_DIR}/zluda"          # ZLUDA's files (launcher mode)
JOURNAL_NAME = "journal.json"           # in FIX_DIR
BACKUP_DIR = f"{FIX_DIR}/backup"        # what the fix replaced
REPORT_PATH = f"{FIX_DIR}/after-report.json"  # added after applying, not part of the plan
MODES = ("launcher", "place")
#: the release files zluda.exe (or v5's zluda_with.exe) needs to start a program
WINDOWS_LAUNCHER_FILES = ("zluda.exe", "zluda_with.exe", "zluda_redirect.dll")
LINUX_AUDIT_FILES = ("libzluda_ld.so", "zluda_ld")
GREEN_VERDICTS = ("ready", "degraded")

Parts = tuple[tuple[str, str], ...]  # ("lit", text) | ("root", "") | ("home", "")


class PlanError(Exception):
    """The fix cannot be planned; the message says what is missing and what to do."""


@dataclass
class Action:
    kind: str                      # "mkdir" | "copy" | "link" | "write"
    path: str                      # '/'-separated, relative to the target root, or absolute (outside it)
    source: str | None = None      # copy: release-relative path of the file in the store
    sha256: str | None = None      # copy / write: the destination's content afterwards
    link: str | None = None        # link: the symlink's target
    content: str | None = None     # write: the text written
    executable: bool = False
    why: str = ""
    replaces: bool = False         # the destination exists now (it will be backed up)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Action":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def key(self) -> tuple:
        return (self.kind, self.path, self.sha256, self.link)


@dataclass(frozen=True)
class EnvVar:
    """An environment variable the launchers and `cuda4amd run` set.

    op "set": `values` holds one value; "prepend": the values go in front of
    the variable's current value (PATH-like, ';' on Windows, ':' on Linux).
    A value is a tuple of parts: ("lit", text), ("root", "") for the target
    folder, ("home", "") for the user's home folder."""

    name: str
    op: str
    values: tuple[Parts, ...]
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "values": [[list(p) for p in v] for v in self.values],
                "why": self.why}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EnvVar":
        return cls(data["name"], data["op"], tuple(tuple((k, t) for k, t in v) for v in data["values"]),
                   data.get("why", ""))


@dataclass
class Plan:
    target: str                    # absolute root folder of the fix
    display: str                   # the target as the user wrote it
    platform: str
    mode: str
    release: dict[str, Any]        # ReleaseSource.to_dict()
    release_sha256: str | None     # archive sha256 (or folder tree hash) when known
    families: list[str]            # families linked through ZLUDA's files
    passthrough: list[str]         # NVIDIA libraries that run on ZLUDA's driver
    linked: list[dict[str, Any]]   # one row per linked dependency edge
    left_alone: list[dict[str, Any]]
    not_linked: list[dict[str, Any]]
    environment: list[EnvVar]
    launcher_exe: str | None       # Windows: zluda.exe, relative to the root (launcher mode)
    programs: list[dict[str, str]]  # the programs launchers were written for
    actions: list[Action]
    required: list[str]            # release files the plan needs (checked in the archive)
    warnings: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    host: str = ""
    launcher_dir: str = FIX_DIR
    #: the scan options the plan was judged with (rules folders, search paths, links, engine), so
    #: `verify` re-scans the way the fix was judged without the user passing them again
    scan: dict[str, Any] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return Path(self.target)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": PLAN_SCHEMA, "target": self.target, "display": self.display, "platform": self.platform,
            "mode": self.mode, "release": self.release, "release_sha256": self.release_sha256,
            "families": self.families, "passthrough": self.passthrough, "linked": self.linked,
            "left_alone": self.left_alone, "not_linked": self.not_linked,
            "environment": [e.to_dict() for e in self.environment], "launcher_exe": self.launcher_exe,
            "programs": self.programs, "actions": [a.to_dict() for a in self.actions],
            "required": self.required, "warnings": self.warnings, "advice": self.advice, "host": self.host,
            "launcher_dir": self.launcher_dir, "scan": self.scan,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Plan":
        return cls(
            target=data["target"], display=data["display"], platform=data["platform"], mode=data["mode"],
            release=data["release"], release_sha256=data.get("release_sha256"), families=data["families"],
            passthrough=data["passthrough"], linked=data["linked"], left_alone=data["left_alone"],
            not_linked=data["not_linked"], environment=[EnvVar.from_dict(e) for e in data["environment"]],
            launcher_exe=data.get("launcher_exe"), programs=data["programs"],
            actions=[Action.from_dict(a) for a in data["actions"]], required=data["required"],
            warnings=data.get("warnings", []), advice=data.get("advice", []), host=data.get("host", ""),
            launcher_dir=data.get("launcher_dir", FIX_DIR), scan=data.get("scan", {}),
        )

    def key(self) -> tuple:
        """What makes two plans the same change: mode, release and the actions' results."""
        return (self.mode, self.platform, self.release_sha256, tuple(sorted(a.key() for a in self.actions)))

    def bind(self, store) -> None:
        """Fill the hashes that were unknown before the release was at hand."""
        self.release_sha256 = store.sha256
        for a in self.actions:
            if a.kind == "copy":
                sha = store.sha_of(a.source)
                if sha is None:
                    raise PlanError(f"the release has no file {a.source} (needed for {a.path})")
                a.sha256 = sha

    def render(self) -> str:
        return render_plan(self)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def _host_problem(message: str, host_warnings: list[str] | None) -> None:
    """Something the host lacks: a dry run (a `host_warnings` list) notes it and plans on; otherwise
    the plan is refused."""
    if host_warnings is None:
        raise PlanError(message)
    host_warnings.append(message)


def target_root(target) -> Path:
    """The folder a fix works in: the target folder, or a single binary's folder."""
    if target.kind == "archive":
        raise PlanError(f"{target.display} is an archive: install or unpack it, then fix the folder")
    path = Path(target.path).resolve()
    return path.parent if target.kind == "file" else path


def in_fix_dir(rel: str | None) -> bool:
    return rel is not None and (rel == FIX_DIR or rel.startswith(FIX_DIR + "/"))


def root_path(rel: str, platform: str) -> Parts:
    """Parts of a path inside the target root."""
    sep = "\\" if platform == "windows" else "/"
    return (("root", ""), ("lit", sep + rel.replace("/", sep)))


def literal_path(text: str, platform: str) -> Parts:
    """Parts of an absolute path that may start with the home folder as a report
    records it (``~`` / ``%USERPROFILE%``)."""
    if platform == "windows" and text.upper().startswith("%USERPROFILE%"):
        return (("home", ""), ("lit", text[len("%USERPROFILE%"):]))
    if platform != "windows" and (text == "~" or text.startswith("~/")):
        return (("home", ""), ("lit", text[1:]))
    return (("lit", text),)


def expand_parts(parts: Iterable[tuple[str, str]], root: str | os.PathLike[str]) -> str:
    """A value as `cuda4amd run` sets it."""
    out: list[str] = []
    for kind, text in parts:
        if kind == "root":
            out.append(os.fspath(root))
        elif kind == "home":
            profile = os.environ.get("USERPROFILE") if os.name == "nt" else None
            out.append(profile or str(Path.home()))
        else:
            out.append(text)
    return "".join(out)


def _platform_of(binary) -> str:
    return platform_of(binary.info.format)


@dataclass
class _Dep:
    binary: str
    name: str
    family: str
    route: str
    load: str
    resolved: str | None
    in_tree: bool
    how: str
    replacement: str | None
    family_name: str


def _deps(verdict) -> list[_Dep]:
    out = []
    for d in verdict.dependencies:
        ident, edge = d.identity, d.edge
        if ident.family is None:
            continue
        resolved, in_tree, how = edge.resolved, edge.in_tree, edge.how
        if in_tree and in_fix_dir(resolved):  # an earlier fix's own files are not the application's
            resolved, in_tree, how = None, False, "unresolved"
        out.append(_Dep(verdict.binary.path, edge.name, ident.family, ident.route or "unknown", edge.load,
                        resolved, in_tree, how, ident.replacement, ident.family_name or ident.family))
    return out


# ---------------------------------------------------------------------------
# make_plan
# ---------------------------------------------------------------------------

def make_plan(result, *, rules, host, source, store=None, mode: str = "launcher",
              launcher_dir: str | os.PathLike[str] | None = None, frameworks=None,
              host_warnings: list[str] | None = None) -> Plan:
    """The plan for a ScanResult. `host` is the HostReport of the machine the
    application will run on; `source` the ReleaseSource; `store` the unpacked
    release when already at hand (hashes are filled then, else by Plan.bind);
    `frameworks` default to the rules'. Raises PlanError when nothing can be
    linked or the host lacks what the plan needs; given a `host_warnings` list
    (a dry run), what the host lacks is added to it instead and the plan is
    still made, to be shown, not applied."""
    if mode not in MODES:
        raise PlanError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    root = target_root(result.target)
    release = result.release
    verdicts = [v for v in result.verdicts if not in_fix_dir(v.binary.path)]
    platform = _plan_platform(result, verdicts, source)
    _host_gate(host, platform, mode, rules, host_warnings)
    chosen = _green_lit(result, verdicts, host, rules, host_warnings)
    files, ld_audit, launcher_exe = _release_part(rules, release, platform, chosen, mode)
    sdk = _host_libraries(host, chosen.families, rules, host_warnings)
    warnings: list[str] = []
    environment = _environment(result, rules, platform, mode, sdk, ld_audit,
                               rules.frameworks if frameworks is None else frameworks, warnings)
    launch_dir = _launcher_dir(root, launcher_dir)
    programs: list[dict[str, str]] = []
    if mode == "launcher":
        programs = _programs(result, verdicts, chosen.left, root, platform)
        actions = _launcher_actions(files, platform, programs, environment, launcher_exe, root, launch_dir,
                                    release.tag)
    else:
        by_path = {v.binary.path: v for v in verdicts}
        actions = _placements(chosen.linked, chosen.importers, by_path, release, platform, root, warnings)
    _settle(actions, root, store)
    listed = {f.path: f for f in release.files if f.platform == platform}
    required = sorted({a.source for a in actions if a.kind in ("copy", "link") and a.source}
                      | {f.link_to for f in files if f.link_to}
                      | {_resolve_row(listed, a.source) or "" for a in actions if a.kind == "copy" and a.source})
    return Plan(
        target=str(root), display=result.target.display, platform=platform, mode=mode,
        release=source.to_dict(), release_sha256=store.sha256 if store is not None else source.sha256,
        families=chosen.families, passthrough=sorted(chosen.passthrough),
        linked=[{"binary": d.binary, "name": d.name, "family": d.family, "load": d.load,
                 "resolved": d.resolved, "how": d.how, "replacement": d.replacement} for d in chosen.linked],
        left_alone=[{"binary": p, "reason": r} for p, r in sorted(chosen.left.items())],
        not_linked=sorted(chosen.not_linked.values(), key=lambda r: r["family"]),
        environment=environment, launcher_exe=launcher_exe, programs=programs, actions=actions,
        required=[r for r in required if r], warnings=warnings, advice=_advice(environment, mode),
        host=_host_text(host), launcher_dir=_rel_or_abs(root, launch_dir),
        scan=scan_record(getattr(result, "options", None)),
    )


def scan_record(options) -> dict[str, Any]:
    """What of a ScanOptions a re-scan of the fixed tree needs, as plain data for the journal."""
    if options is None:
        return {}
    return {"rule_dirs": [str(Path(d).resolve()) for d in options.rule_dirs],
            "search_paths": [str(Path(d).resolve()) for d in options.search_paths],
            "follow_links": bool(options.follow_links), "engine": options.engine}


def _plan_platform(result, verdicts, source) -> str:
    """The one platform the application's CUDA binaries are for (the release source's too)."""
    if not any(v.verdict != "no-cuda" for v in verdicts):
        raise PlanError(f"nothing to link: no binary of {result.target.display} uses CUDA")
    platform = _choose_platform(verdicts, result.target.display)
    if platform != source.platform:
        raise PlanError(f"the release source is for {source.platform}, the application is {platform}")
    return platform


# -- the host gate --------------------------------------------------------------

def _host_gate(host, platform: str, mode: str, rules, host_warnings: list[str] | None) -> None:
    """Refuse a host that cannot run ZLUDA at all, or not in this mode (a dry run: note what
    it lacks in `host_warnings`; a missing host report and place mode's HIP_PATH still refuse)."""
    from cuda4amd.host.gaps import find_gaps

    if host is None:
        raise PlanError("the host lacks a host report: scan on the machine that runs the application "
                        "(--host auto), or pass --host FILE.json made by `cuda4amd doctor --format json` there")
    if host.platform != platform:
        _host_problem(f"the host is {host.platform.capitalize()} but the application is "
                      f"{platform.capitalize()}: fix it on (or with a host report of) a {platform} machine",
                      host_warnings)
    driver_gaps = find_gaps(host, ["driver_api"], rules=rules)
    if driver_gaps:
        _host_problem("the host lacks what ZLUDA needs: " + "; ".join(g.text for g in driver_gaps)
                      + " (judge another machine with --host FILE.json)", host_warnings)
    if platform == "windows" and mode == "place" and (host.sdk is None or "HIP_PATH" not in host.sdk.found_by):
        raise PlanError("placement mode needs HIP_PATH set on the host (ZLUDA finds rocBLAS, hipBLASLt and "
                        "rocSPARSE next to itself or through %HIP_PATH%\\bin, and otherwise shows a modal error "
                        "dialog); set HIP_PATH for the user, or use the launcher (--mode launcher)")


def _host_libraries(host, families: list[str], rules, host_warnings: list[str] | None):
    """The HIP SDK the linked families' AMD libraries come from (None when none needs one, or a
    dry run's host has none: its host_warnings say so already)."""
    from cuda4amd.host.gaps import family_libraries
    from cuda4amd.report.redact import is_redacted

    sdk = host.sdk
    libraries = family_libraries(rules)
    if any(f in libraries for f in families) and sdk is None and host_warnings is None:  # excluded; defensive
        raise PlanError("the host lacks a HIP SDK (ROCm), which ZLUDA's libraries load")
    if sdk is not None and is_redacted(sdk.root):
        raise PlanError(f"the host report's HIP SDK path is redacted ({sdk.root}): "
                        f"make the report on that machine with the path kept, or fix there")
    return sdk


# -- the green-lit set ------------------------------------------------------------

#: gaps that do not keep a family out of the plan: the launcher sets HIP_PATH, and place mode requires it
GAPS_THE_PLAN_CLOSES = ("hip-path-unset",)


@dataclass
class _GreenLit:
    """What the plan links: the importers that run, their linked and passthrough
    dependencies, and what is left out with the reason."""

    importers: list[Any]
    linked: list[_Dep]
    passthrough: set[str]
    not_linked: dict[str, dict[str, Any]]
    left: dict[str, str]         # binary path -> why it is left alone
    excluded: dict[str, str]     # family -> why this host cannot serve it
    families: list[str]


def _green_lit(result, verdicts, host, rules, host_warnings: list[str] | None) -> _GreenLit:
    deps = {v.binary.path: _deps(v) for v in verdicts}
    left = {v.binary.path: (f"blocked: {v.reasons[0]}" if v.reasons else "blocked")
            for v in verdicts if v.verdict == "blocked"}

    def is_importer(v) -> bool:  # a binary that runs and whose CUDA imports count
        return (v.verdict in GREEN_VERDICTS and v.binary.path not in left
                and v.identity.route not in ("redirect", "stub"))

    candidates = {d.family for v in verdicts if is_importer(v) for d in deps[v.binary.path] if d.route == "redirect"}
    excluded = _excluded_families(host, sorted(candidates), rules, host_warnings)
    _leave_alone(verdicts, deps, excluded, left, is_importer)
    importers = [v for v in verdicts if is_importer(v)]
    if not importers and excluded:
        raise PlanError("the host lacks what the plan needs: "
                        + "; ".join(f"{excluded[f]}" for f in sorted(excluded))
                        + " (judge another machine with --host FILE.json)")
    if not importers:
        raise PlanError(f"nothing to link: no binary of {result.target.display} can run through ZLUDA "
                        f"({_count_text(verdicts, left)})")
    linked: list[_Dep] = []
    passthrough: set[str] = set()
    not_linked: dict[str, dict[str, Any]] = {}
    for v in importers:
        for d in deps[v.binary.path]:
            if d.route == "redirect" and d.family not in excluded:
                linked.append(d)
            elif d.route == "passthrough":
                passthrough.add(d.family)
            else:
                reason = excluded.get(d.family) if d.route == "redirect" else None
                row = not_linked.setdefault(d.family, {"family": d.family, "name": d.family_name,
                                                       "route": d.route, "names": [], "why": ""})
                if d.name not in row["names"]:
                    row["names"].append(d.name)
                row["why"] = (f"this host: {reason}" if reason else _route_why(d.route))
    families = sorted({d.family for d in linked} | {"driver_api"})
    return _GreenLit(importers, linked, passthrough, not_linked, left, excluded, families)


def _excluded_families(host, families: list[str], rules, host_warnings: list[str] | None) -> dict[str, str]:
    """family -> why this host cannot serve it, for the families whose AMD library it lacks (a dry
    run excludes none: the reasons go to its `host_warnings`, so that the plan shows them linked)."""
    from cuda4amd.host.gaps import find_gaps

    excluded: dict[str, str] = {}
    for gap in find_gaps(host, [f for f in families if f != "driver_api"], rules=rules):
        if gap.code not in GAPS_THE_PLAN_CLOSES:
            excluded[gap.family] = f"{excluded[gap.family]}; {gap.text}" if gap.family in excluded else gap.text
    if host_warnings is not None:
        host_warnings.extend(excluded[family] for family in sorted(excluded))
        return {}
    return excluded


def _leave_alone(verdicts, deps, excluded: dict[str, str], left: dict[str, str], is_importer) -> None:
    """Binaries that need an excluded family statically are left alone, and so
    is whatever needs them statically (fixed point over in-tree static edges)."""
    changed = True
    while changed:
        changed = False
        for v in verdicts:
            path = v.binary.path
            if not is_importer(v):
                continue
            why = next((f"this host: {excluded[d.family]} ({d.name})" for d in deps[path]
                        if d.route == "redirect" and d.family in excluded and d.load == "static"), None)
            if why is None:
                why = next((f"needs {d.edge.resolved}, which is left alone" for d in v.dependencies
                            if d.identity.family is None and d.edge.in_tree and d.edge.load == "static"
                            and d.edge.resolved in left and d.edge.resolved != path), None)
            if why is not None:
                left[path] = why
                changed = True


# -- release files ----------------------------------------------------------------

def _release_part(rules, release, platform: str, chosen: _GreenLit, mode: str):
    """(the release rows the plan copies, whether Linux needs LD_AUDIT, the
    Windows launcher zluda.exe relative to the root or None)."""
    ld_audit = platform == "linux" and mode == "launcher" and any(
        d.in_tree and d.how != "runpath" for d in chosen.linked)
    files = _release_files(rules, release, platform, chosen.families, mode, ld_audit)
    launcher_exe = None
    if platform == "windows" and mode == "launcher":
        listed = {f.path for f in release.files if f.platform == platform}
        exe = next((n for n in ("zluda.exe", "zluda_with.exe") if n in listed), None)
        if exe is None:
            raise PlanError(f"ZLUDA {release.tag} ships no launcher (zluda.exe) for Windows: use --mode place")
        launcher_exe = f"{STORE_DIR}/{exe}"
    return files, ld_audit, launcher_exe


# -- actions per mode ---------------------------------------------------------------

def _launcher_actions(files, platform: str, programs, environment, launcher_exe, root: Path, launch_dir: Path,
                      tag: str) -> list[Action]:
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
                                  executable=_is_executable(f.path, platform)))
    rel_dir = _rel_or_abs(root, launch_dir)
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


def _settle(actions: list[Action], root: Path, store) -> None:
    """Mark the destinations that exist now (they are backed up), and fill the
    copies' hashes when the release is at hand."""
    for a in actions:
        if a.kind in ("copy", "write", "link"):
            a.replaces = os.path.lexists(_absolute(root, a.path))
    if store is not None:
        for a in actions:
            if a.kind == "copy":
                sha = store.sha_of(a.source)
                if sha is None:
                    raise PlanError(f"the release has no file {a.source}")
                a.sha256 = sha


def _count_text(verdicts, left) -> str:
    using = [v for v in verdicts if v.verdict != "no-cuda"]
    if not using:
        return "none uses CUDA"
    return f"{len(using)} use CUDA, {len(left)} are blocked or left alone"


def _route_why(route: str) -> str:
    return {"stub": "ZLUDA's replacement only returns NOT_SUPPORTED: not linked",
            "blocked": "no AMD route through ZLUDA",
            "unknown": "an NVIDIA library cuda4amd has no rule for"}.get(route, route)


def _choose_platform(verdicts, display: str) -> str:
    using = {_platform_of(v.binary) for v in verdicts if v.verdict != "no-cuda"}
    if len(using) > 1:
        raise PlanError(f"{display} holds Windows and Linux CUDA binaries: fix one platform's folder at a time")
    if using:
        return using.pop()
    every = {_platform_of(v.binary) for v in verdicts}
    return every.pop() if len(every) == 1 else ("windows" if os.name == "nt" else "linux")


def _resolve_row(listed: dict, path: str | None) -> str | None:
    seen = set()
    while path in listed and listed[path].link_to and path not in seen:
        seen.add(path)
        path = listed[path].link_to
    return path


def _release_files(rules, release, platform: str, families: list[str], mode: str, ld_audit: bool):
    """The release rows the link uses: each linked family's top-level files,
    the launcher's (Windows) or the LD_AUDIT module (Linux), and link targets."""
    rows = {f.path: f for f in release.files if f.platform == platform}
    libraries = set()
    for fam in families:
        family = rules.family(fam)
        if family is not None:
            libraries.update(family.zluda_libraries)
    chosen = {p for p, f in rows.items() if "/" not in p and f.library in libraries}
    if mode == "launcher":
        extra = WINDOWS_LAUNCHER_FILES if platform == "windows" else (LINUX_AUDIT_FILES if ld_audit else ())
        chosen |= {p for p in extra if p in rows}
        if platform == "linux" and ld_audit and "zluda_ld" not in rows:
            raise PlanError(f"ZLUDA {release.tag} has no zluda_ld (LD_AUDIT) for Linux, which this application "
                            f"needs (an RPATH or a load by full path would find NVIDIA's library first)")
    more = list(chosen)
    while more:
        f = rows[more.pop()]
        if f.link_to and f.link_to in rows and f.link_to not in chosen:
            chosen.add(f.link_to)
            more.append(f.link_to)
    if not any(rows[p].library == "driver" for p in chosen):
        raise PlanError(f"ZLUDA {release.tag} lists no driver library for {platform}")
    return [rows[p] for p in sorted(chosen)]


def _is_executable(path: str, platform: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return platform == "linux" and ".so" not in name


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _absolute(root: Path, path: str) -> Path:
    return Path(path) if os.path.isabs(path) else root.joinpath(*path.split("/"))


def _launcher_dir(root: Path, launcher_dir) -> Path:
    if launcher_dir is None:
        return root / FIX_DIR
    return Path(launcher_dir).expanduser().resolve()


def _rel_or_abs(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _host_text(host) -> str:
    gpu = host.gpu
    parts = [f"{gpu.name} ({gpu.gfx or 'unknown gfx'})" if gpu else "no GPU"]
    sdk = host.sdk
    parts.append(f"HIP SDK {sdk.version or '?'} at {sdk.root}" if sdk else "no HIP SDK")
    return ", ".join(parts)


def _programs(result, verdicts, left, root: Path, platform: str) -> list[dict[str, str]]:
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
    programs = []
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


def _environment(result, rules, platform: str, mode: str, sdk, ld_audit: bool, frameworks,
                 warnings: list[str]) -> list[EnvVar]:
    env: list[EnvVar] = []
    sep = "\\" if platform == "windows" else "/"
    if sdk is not None:
        sdk_root = sdk.root.rstrip("\\/")
        hip_path = sdk_root + "\\" if platform == "windows" else sdk_root
        env.append(EnvVar("HIP_PATH", "set", (literal_path(hip_path, platform),),
                          "ZLUDA finds rocBLAS, hipBLASLt, rocSPARSE and MIOpen through it"))
    if mode == "launcher":
        store = root_path(STORE_DIR, platform)
        if platform == "windows":
            values = [store] + ([literal_path(sdk.root.rstrip("\\") + sep + "bin", platform)] if sdk else [])
            env.append(EnvVar("PATH", "prepend", tuple(values), "ZLUDA's folder, then the HIP SDK's bin"))
        else:
            values = [store]
            if sdk is not None:
                lib = sdk.libraries.get("rocblas")
                lib_dir = posixpath.dirname(lib.file) if lib and lib.file else "lib"
                values.append(literal_path(sdk.root.rstrip("/") + "/" + (lib_dir or "lib"), platform))
            env.append(EnvVar("LD_LIBRARY_PATH", "prepend", tuple(values), "ZLUDA's libraries, then ROCm's"))
            if ld_audit:
                env.append(EnvVar("LD_AUDIT", "prepend", (root_path(f"{STORE_DIR}/zluda_ld", platform),),
                                  "an RPATH or a load by full path would find NVIDIA's library first"))
    elif platform == "linux" and sdk is not None:
        lib = sdk.libraries.get("rocblas")
        lib_dir = posixpath.dirname(lib.file) if lib and lib.file else "lib"
        env.append(EnvVar("LD_LIBRARY_PATH", "prepend", (literal_path(sdk.root.rstrip("/") + "/" + lib_dir,
                                                                     platform),), "ROCm's libraries"))
    for name, value, why in _framework_switches(result, rules, platform, frameworks, warnings):
        env.append(EnvVar(name, "set", ((("lit", value),),), why))
    return env


def _framework_switches(result, rules, platform: str, frameworks, warnings: list[str]):
    """(name, value, why) of the environment switches the scan's packages ask
    for: env switches that avoid a blocked or stubbed family (or SASS-only
    kernels) of the package, and those recommended under ZLUDA."""
    packages = [p for p in getattr(result, "packages", []) if p.framework]
    if not packages:
        return []
    from cuda4amd.rules.frameworks import SASS_ONLY

    if frameworks is None:
        frameworks = rules.frameworks
    by_id = {fw.id: fw for fw in frameworks}
    by_dist: dict[str, list] = {}
    for v in result.verdicts:
        if v.binary.distribution:
            by_dist.setdefault(v.binary.distribution, []).append(v)
    chosen: dict[str, tuple[str, str]] = {}
    for pkg in packages:
        fw = by_id.get(pkg.framework)
        if fw is None:
            continue
        owned = [v for v in by_dist.get(pkg.name, []) if v.verdict != "no-cuda"]
        hit = {d.identity.family for v in owned for d in v.dependencies
               if d.identity.family and d.identity.route in ("blocked", "stub")}
        if any(v.binary.kernels is not None and v.binary.kernels.state == "sass-only" for v in owned):
            hit.add(SASS_ONLY)
        for sw in fw.switches:
            if sw.kind != "env" or (sw.platform and sw.platform != platform):
                continue
            if not (sw.recommended or set(sw.avoids) & hit):
                continue
            name, sep, value = sw.setting.partition("=")
            name = name.strip()
            if not sep or not name.replace("_", "").isalnum():
                continue
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            why = f"{fw.name}: " + ("recommended under ZLUDA" if sw.recommended and not set(sw.avoids) & hit
                                    else "avoids " + ", ".join(fw.family_name(a) for a in sw.avoids))
            if name in chosen and chosen[name][0] != value:
                warnings.append(f"{name}: {fw.name} asks for {value!r}, another package for "
                                f"{chosen[name][0]!r}; the first is kept")
                continue
            chosen.setdefault(name, (value, why))
    return [(n, v, w) for n, (v, w) in chosen.items()]


def _advice(environment: list[EnvVar], mode: str) -> list[str]:
    if mode != "place":
        return []
    return [f"set {e.name}={expand_parts(e.values[0], '<target>')} in the environment the application starts "
            f"in ({e.why})" for e in environment if e.op == "set" and e.name != "HIP_PATH"]


def _origin_folder(verdict) -> str | None:
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


def _placements(linked: list[_Dep], importers, by_path, release, platform: str, root: Path,
                warnings: list[str]) -> list[Action]:
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
    dests: dict[str, Action] = {}
    driver_folders: set[str] = set()
    rows = {f.path: f for f in release.files if f.platform == platform}

    def add(dest: str, source_row, why: str) -> None:
        key = loader_key(dest, platform)
        if key in dests:
            return
        source = _resolve_row(rows, source_row.path) or source_row.path
        dests[key] = Action("copy", dest, source=source, why=why)
        driver_folders.add(posixpath.dirname(dest))

    outside: dict[str, list[str]] = {}  # a --search-path library -> the names left out for it
    for d in linked:
        row = release.replacement_for(d.name, platform)
        if row is None:
            continue
        if d.resolved and d.in_tree:
            add(d.resolved, row, f"ZLUDA's {row.name} in place of NVIDIA's (backed up), for {d.binary}")
        elif not _in_target(d.binary):
            folders = _program_folders_loading(d.binary, by_path) if platform == "windows" else []
            for folder in folders:
                name = posixpath.join(folder, row.name) if folder else row.name
                add(name, row, f"ZLUDA's {row.name} in the folder of the program that loads {d.binary} "
                               f"(searched before the library's own folder)")
            if not folders:
                outside.setdefault(d.binary, []).append(d.name)
        else:
            folder = posixpath.dirname(d.binary)
            name = row.name if platform == "windows" else d.name
            why = f"ZLUDA's {row.name} next to {d.binary}"
            origin = None
            if platform == "linux":
                origin = _origin_folder(by_path.get(d.binary))
                if origin is not None:
                    folder, why = origin, f"ZLUDA's {row.name} in {d.binary}'s $ORIGIN search path"
            dest = posixpath.join(folder, name) if folder else name
            if platform == "linux" and origin is None:
                warnings.append(f"{dest}: the loader finds it next to {d.binary} only through an RPATH/RUNPATH "
                                f"with $ORIGIN or LD_LIBRARY_PATH; the launcher mode does not depend on that")
            add(dest, row, why)
    for binary, names in sorted(outside.items()):
        where = ("no program of the target loads it" if platform == "windows"
                 else "ld.so finds its libraries through its own RUNPATH or LD_LIBRARY_PATH")
        warnings.append(f"{binary} lies outside the target (found through --search-path) and {where}: "
                        f"ZLUDA's {', '.join(sorted(set(names)))} for it are not placed (nothing is written "
                        f"outside the target); use the launcher mode (--mode launcher) for it")
    if platform == "windows":
        driver_rows = [f for f in release.files if f.platform == "windows" and "/" not in f.path
                       and f.library == "driver"]
        for v in importers:
            if v.binary.info.kind == "exe" and _in_target(v.binary.path):
                driver_folders.add(posixpath.dirname(v.binary.path))
        for folder in sorted(driver_folders):
            for row in driver_rows:
                dest = posixpath.join(folder, row.name) if folder else row.name
                add(dest, row, f"ZLUDA's {row.name} (the driver every ZLUDA library runs on)")
    return sorted(dests.values(), key=lambda a: a.path)


def _in_target(path: str) -> bool:
    """Whether a scan path is a file of the target (relative, "/"-separated),
    not one read through --search-path (those keep their absolute path)."""
    return not (posixpath.isabs(path) or PureWindowsPath(path).drive or path == ".." or path.startswith("../"))


def _program_folders_loading(binary: str, by_path) -> list[str]:
    """The folders of the target's programs (exe files) that load `binary`,
    directly or through the libraries they load."""
    loaders: dict[str, set[str]] = {}
    for path, verdict in by_path.items():
        for dep in verdict.dependencies:
            if dep.edge.resolved:
                loaders.setdefault(dep.edge.resolved, set()).add(path)
    seen, stack, folders = {binary}, [binary], set()
    while stack:
        for parent in loaders.get(stack.pop(), ()):
            if parent in seen:
                continue
            seen.add(parent)
            stack.append(parent)
            verdict = by_path.get(parent)
            if verdict is not None and verdict.binary.info.kind == "exe" and _in_target(parent):
                folders.add(posixpath.dirname(parent))
    return sorted(folders)


# ---------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------

def _short(sha: str | None) -> str:
    return sha[:16] + "…" if sha else "(known once the release is at hand)"


def render_plan(plan: Plan) -> str:
    rel = plan.release
    lines = [f"cuda4amd fix plan: {plan.display} ({plan.platform}, {plan.mode} mode)"]
    size = f", {rel['size']:,} bytes" if rel.get("size") else ""
    where = {"pin": f"pinned; from {rel['location']}", "archive": f"local archive {rel['location']}",
             "folder": f"local folder {rel['location']}"}[rel["kind"]]
    lines.append(f"ZLUDA {rel['tag']}: {rel['asset']}{size}, sha256 {plan.release_sha256 or rel.get('sha256') or '?'}"
                 f" ({where})")
    lines.append(f"host: {plan.host}")
    lines.append("linked through ZLUDA:")
    shown = set()
    for row in plan.linked:
        key = (row["binary"], row["name"])
        if key in shown:
            continue
        shown.add(key)
        lines.append(f"  {row['family']:<11} {row['name']}  ← {row['binary']} ({row['load']})")
    lines.append("  driver_api  always (every ZLUDA library runs on ZLUDA's driver)")
    if plan.passthrough:
        lines.append("runs unchanged on ZLUDA's driver: " + ", ".join(plan.passthrough))
    if plan.not_linked:
        lines.append("not linked:")
        for row in plan.not_linked:
            lines.append(f"  {row['name']} ({row['route']}): {', '.join(row['names'])}: {row['why']}")
    if plan.left_alone:
        lines.append("left alone:")
        for row in plan.left_alone:
            lines.append(f"  {row['binary']}: {row['reason']}")
    if plan.environment:
        lines.append("environment:")
        for e in plan.environment:
            sep = ";" if plan.platform == "windows" else ":"
            value = sep.join(expand_parts(v, "<target>") for v in e.values)
            if e.op == "prepend":
                value += f"{sep}${e.name}" if plan.platform == "linux" else f"{sep}%{e.name}%"
            lines.append(f"  {e.name}={value}" + (f"  ({e.why})" if e.why else ""))
    lines.append(f"actions ({len(plan.actions)}), under <target> = {plan.target}:")
    for a in plan.actions:
        if a.kind == "mkdir":
            lines.append(f"  mkdir  {a.path}")
        elif a.kind == "link":
            lines.append(f"  link   {a.path} -> {a.link}")
        elif a.kind == "copy":
            extra = " (replaces an existing file: backed up)" if a.replaces else ""
            lines.append(f"  copy   {a.path}  ← zluda/{a.source}  sha256 {_short(a.sha256)}{extra}")
        else:
            extra = " (replaces an existing file: backed up)" if a.replaces else ""
            lines.append(f"  write  {a.path}  sha256 {_short(a.sha256)}{extra}")
    lines.append(f"  + the journal {FIX_DIR}/{JOURNAL_NAME} (backups in {BACKUP_DIR}/) and the "
                 f"after-report {REPORT_PATH}")
    if plan.programs:
        lines.append("launchers: " + ", ".join(p["name"] for p in plan.programs)
                     + f" and zluda-run (any program), in {plan.launcher_dir}")
    for w in plan.warnings:
        lines.append(f"warning: {w}")
    for line in plan.advice:
        lines.append(f"advice: {line}")
    return "\n".join(lines) + "\n"
