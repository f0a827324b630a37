"""The fix plan as data: its actions, environment and rows, the `.cuda4amd/` paths, and its text.

    plan = Plan.from_dict(data); plan.to_dict(); print(plan.render())

Every action names its destination (relative to the target, or absolute
when outside it: launchers in another folder), its source in the release and
the sha256 its destination will have. The journal (fix.journal) adds the
before-state and backups when fix.apply carries the plan out. Building a plan
is fix.plan.make's; this module stays as light as its data classes, since the
journal, `cuda4amd run` and `undo` import it.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda4amd.fix.archive import Store
    from cuda4amd.scan.discover import Target

__all__ = ["BACKUP_DIR", "FIX_DIR", "JOURNAL_NAME", "MODES", "PLAN_SCHEMA", "REPORT_PATH", "STORE_DIR", "Action",
           "EnvVar", "Parts", "Plan", "PlanError", "expand_parts", "in_fix_dir", "literal_path", "render_plan",
           "root_path", "sha256_text", "target_root"]

PLAN_SCHEMA = "cuda4amd.fix-plan/1"
#: the fix folder and what it holds, relative to the target root: the one place these paths are named
FIX_DIR = ".cuda4amd"
STORE_DIR = f"{FIX_DIR}/zluda"          # ZLUDA's files (launcher mode)
JOURNAL_NAME = "journal.json"           # in FIX_DIR
BACKUP_DIR = f"{FIX_DIR}/backup"        # what the fix replaced
REPORT_PATH = f"{FIX_DIR}/after-report.json"  # added after applying, not part of the plan
MODES = ("launcher", "place")

Parts = tuple[tuple[str, str], ...]  # ("lit", text) | ("root", "") | ("home", "")
ActionKey = tuple[str, str, str | None, str | None]  # what an action changes: kind, path, sha256, link


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
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Action:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def key(self) -> ActionKey:
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
    def from_dict(cls, data: dict[str, Any]) -> EnvVar:
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
    def from_dict(cls, data: dict[str, Any]) -> Plan:
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

    def key(self) -> tuple[str, str, str | None, tuple[ActionKey, ...]]:
        """What makes two plans the same change: mode, release and the actions' results."""
        return (self.mode, self.platform, self.release_sha256, tuple(sorted(a.key() for a in self.actions)))

    def bind(self, store: Store) -> None:
        """Fill the hashes that were unknown before the release was at hand."""
        self.release_sha256 = store.sha256
        for a in self.actions:
            if a.kind == "copy":
                sha = store.sha_of(a.source) if a.source is not None else None
                if sha is None:
                    raise PlanError(f"the release has no file {a.source} (needed for {a.path})")
                a.sha256 = sha

    def render(self) -> str:
        return render_plan(self)


def target_root(target: Target) -> Path:
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


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
    lines += _linked_lines(plan)
    if plan.environment:
        lines.append("environment:")
        lines += [_environment_line(e, plan.platform) for e in plan.environment]
    lines.append(f"actions ({len(plan.actions)}), under <target> = {plan.target}:")
    lines += [_action_line(a) for a in plan.actions]
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


def _linked_lines(plan: Plan) -> list[str]:
    """What is linked, what runs unchanged, what is not linked and what is left alone."""
    lines = ["linked through ZLUDA:"]
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
    return lines


def _environment_line(e: EnvVar, platform: str) -> str:
    sep = ";" if platform == "windows" else ":"
    value = sep.join(expand_parts(v, "<target>") for v in e.values)
    if e.op == "prepend":
        value += f"{sep}${e.name}" if platform == "linux" else f"{sep}%{e.name}%"
    return f"  {e.name}={value}" + (f"  ({e.why})" if e.why else "")


def _action_line(a: Action) -> str:
    if a.kind == "mkdir":
        return f"  mkdir  {a.path}"
    if a.kind == "link":
        return f"  link   {a.path} -> {a.link}"
    extra = " (replaces an existing file: backed up)" if a.replaces else ""
    if a.kind == "copy":
        return f"  copy   {a.path}  ← zluda/{a.source}  sha256 {_short(a.sha256)}{extra}"
    return f"  write  {a.path}  sha256 {_short(a.sha256)}{extra}"
