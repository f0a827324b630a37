"""The journal: every change of a fix, written down before it happens — its format, reading, writing and checks.

``<root>/.cuda4amd/journal.json`` (schema ``cuda4amd.fix-journal/1``) holds the
plan and, per action, its state (``pending`` → ``started`` → ``done``, and
``undone``), what the destination was before (absent, a folder, a file with
its sha256 and mode, or a link and its target), where the old file was
backed up (``.cuda4amd/backup/<path>``) and the temporary file the new content
is written to. It is replaced atomically (temporary file, fsync, rename, fsync
of the folder) before each change and after it, so whatever stops a run —
an exception, Ctrl-C, power loss, a full disk, a file locked by a running
program — it describes every change that may have happened. fix.apply makes
the changes (and finishes an unfinished journal), fix.undo walks them back.

Trust (docs/security.md): a journal is only loaded when its MAC verifies
under this user's key (cuda4amd.fix.state), its recorded root is the folder
it was found in and every path in it stays inside the target, its
``.cuda4amd`` or the plan's launcher folder; anything else is refused, never
resumed or undone.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda4amd.fix.fileops import TMP_SUFFIX, FileOps, is_link, read_regular, readlink_text
from cuda4amd.fix.plan.model import BACKUP_DIR, FIX_DIR, JOURNAL_NAME, REPORT_PATH, Plan
from cuda4amd.fix.state import StateError, journal_mac, mac_matches
from cuda4amd.userdirs import state_dir

__all__ = ["ACTION_KINDS", "ACTION_STATES", "JOURNAL_SCHEMA", "FixDirError", "Journal", "allowed_roots",
           "backup_path", "journal_path", "journal_problem", "load_journal", "new_journal", "only_our_leftovers",
           "state_after", "temp_path"]

JOURNAL_SCHEMA = "cuda4amd.fix-journal/1"
MAX_JOURNAL_BYTES = 64 << 20  # a real journal is a few hundred KiB; more is not ours
ACTION_KINDS = ("mkdir", "copy", "write", "link")
ACTION_STATES = ("pending", "started", "done", "undone")


class FixDirError(Exception):
    """``.cuda4amd`` exists but is not a cuda4amd fix folder (or its journal is unreadable or not ours)."""


def journal_path(root: Path) -> Path:
    return Path(root) / FIX_DIR / JOURNAL_NAME


@dataclass
class Journal:
    path: Path
    data: dict[str, Any]
    # what is on disk, less the "updated" stamp: a save that would change
    # nothing else writes nothing, so a re-run of a finished fix leaves the tree as it was
    on_disk: str | None = None

    @property
    def root(self) -> Path:
        return Path(self.data["root"])

    @property
    def actions(self) -> list[dict[str, Any]]:
        return self.data["actions"]

    @property
    def state(self) -> str:
        return self.data["state"]

    @state.setter
    def state(self, value: str) -> None:
        self.data["state"] = value

    @property
    def plan(self) -> Plan:
        data = dict(self.data["plan"])
        data["actions"] = [{k: a[k] for k in a if k not in ("status", "before", "backup", "temp")}
                           for a in self.actions if a["path"] != REPORT_PATH]
        return Plan.from_dict(data)

    @property
    def complete(self) -> bool:
        return self.state in ("applied", "verified", "verify-failed")

    def save(self, ops: FileOps) -> None:
        content = self._content()
        if content == self.on_disk:
            return
        self.data["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            self.data["mac"] = journal_mac(self.data)  # binds it to this user's key: see load_journal
        except StateError as exc:
            raise OSError(errno.EACCES, str(exc)) from None
        # compact: the C encoder, and the journal is rewritten around every change
        text = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        ops.atomic_write(self.path, (text.replace(',{"kind":', ',\n{"kind":') + "\n").encode("utf-8"))
        self.on_disk = content

    def _content(self) -> str:
        return json.dumps({k: v for k, v in self.data.items() if k not in ("updated", "mac")}, sort_keys=True)

    def abs(self, path: str) -> Path:
        return Path(path) if os.path.isabs(path) else self.root.joinpath(*path.split("/"))


def load_journal(root: Path) -> Journal | None:
    """The journal of a fix of `root`, or None. Raises FixDirError when
    ``.cuda4amd`` holds something else, is a link, or its journal cannot be
    read, was not written by this tool for this user (its MAC), was written
    for another folder, or names a path outside the target."""
    root = Path(root)
    fix_dir = root / FIX_DIR
    path = fix_dir / JOURNAL_NAME
    try:
        fix_st: os.stat_result | None = os.lstat(fix_dir)
    except OSError:
        fix_st = None
    if fix_st is not None and is_link(fix_st):
        raise FixDirError(f"{fix_dir} is a link (to {readlink_text(fix_dir)}): cuda4amd writes only into a real "
                          f"folder of the target; move it away first")
    if not os.path.lexists(path):
        if fix_dir.is_dir() and not only_our_leftovers(fix_dir):
            raise FixDirError(f"{fix_dir} exists and holds no cuda4amd journal: move it away first")
        if fix_st is not None and not stat.S_ISDIR(fix_st.st_mode):
            raise FixDirError(f"{fix_dir} exists and is not a folder: move it away first")
        return None
    try:
        data = json.loads(read_regular(path, MAX_JOURNAL_BYTES).decode("utf-8", "surrogateescape"))
    except (OSError, ValueError) as exc:
        raise FixDirError(f"{path}: cannot read the journal ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != JOURNAL_SCHEMA:
        raise FixDirError(f"{path}: not a cuda4amd journal ({JOURNAL_SCHEMA})")
    refuse = (f"{path} was not written by cuda4amd for this user, so it is neither resumed nor undone "
              f"(the folder may come from elsewhere with it)")
    try:
        if not mac_matches(data):
            raise FixDirError(f"{refuse}: its MAC does not verify under the key in {state_dir()}. Nothing was "
                              f"changed; if you did not put it there, remove {fix_dir} (see docs/security.md)")
    except StateError as exc:
        raise FixDirError(f"{refuse}: {exc}") from None
    here = os.path.normcase(str(root.resolve()))
    if not isinstance(data.get("root"), str) or os.path.normcase(data["root"]) != here:
        raise FixDirError(f"{path} belongs to a fix of {data.get('root')!r}, not of {root.resolve()}: a fixed "
                          f"folder that was moved or copied is undone (or run) at its old place; nothing was "
                          f"changed")
    problem = journal_problem(data)
    if problem:
        raise FixDirError(f"{path}: {problem}; refused, nothing was changed")
    journal = Journal(path, data)
    journal.on_disk = journal._content()
    return journal


def allowed_roots(data: dict[str, Any]) -> list[Path]:
    """The folders a journal may change: the target (with its .cuda4amd) and
    the launchers' folder when the plan put it elsewhere."""
    roots = [Path(data["root"])]
    launcher_dir = (data.get("plan") or {}).get("launcher_dir")
    if isinstance(launcher_dir, str) and os.path.isabs(launcher_dir):
        roots.append(Path(launcher_dir))
    return roots


def _relative_ok(path: str) -> bool:
    if not path or "\0" in path or os.path.isabs(path):
        return False
    if os.name == "nt" and ("\\" in path or ":" in path):  # another separator, a drive or a stream
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def _path_problem(path: Any, data: dict[str, Any], what: str) -> str | None:
    if not isinstance(path, str):
        return f"{what} {path!r} is not a path"
    if not os.path.isabs(path):
        return None if _relative_ok(path) else f"{what} {path!r} leaves the target"
    launcher_dir = (data.get("plan") or {}).get("launcher_dir")
    norm = os.path.normpath(path)
    if (isinstance(launcher_dir, str) and os.path.isabs(launcher_dir) and norm == path
            and os.path.normcase(os.path.dirname(norm)) == os.path.normcase(os.path.normpath(launcher_dir))):
        return None
    return f"{what} {path!r} is outside the target and its launchers' folder"


def journal_problem(data: dict[str, Any]) -> str | None:
    """Why the journal's content cannot be what apply_plan wrote (None: it can)."""
    actions = data.get("actions")
    if not isinstance(actions, list) or not isinstance(data.get("plan"), dict):
        return "no list of actions"
    for a in actions:
        if not isinstance(a, dict) or a.get("kind") not in ACTION_KINDS or a.get("status") not in ACTION_STATES:
            return f"an action of an unknown kind or state ({str(a)[:80]})"
        problem = _path_problem(a.get("path"), data, "the path")
        if problem:
            return problem
        for key in ("temp", "backup"):
            if a.get(key) is not None:
                problem = _path_problem(a[key], data, f"the {key} path")
                if problem:
                    return problem
        if a.get("backup") is not None and not str(a["backup"]).startswith(BACKUP_DIR + "/"):
            return f"the backup {a['backup']!r} is not in {BACKUP_DIR}"
    return None


def only_our_leftovers(fix_dir: Path) -> bool:
    """An interrupted first run can leave an empty .cuda4amd or a journal temp file."""
    try:
        names = os.listdir(fix_dir)
    except OSError:
        return False
    return all(n == JOURNAL_NAME + TMP_SUFFIX for n in names)


def backup_path(root: Path, path: str) -> str:
    """Where the file at `path` is backed up before the fix replaces it."""
    if os.path.isabs(path):
        digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return f"{BACKUP_DIR}/_outside/{digest}/{Path(path).name}"
    return f"{BACKUP_DIR}/{path}"


def temp_path(path: str, index: int) -> str:
    """The temporary file next to `path` that action `index` writes before renaming it over `path`."""
    head, _, name = path.rpartition("/")
    tmp = f".{name}.{index}{TMP_SUFFIX}"
    if os.path.isabs(path):
        return str(Path(path).with_name(tmp))
    return f"{head}/{tmp}" if head else tmp


def new_journal(plan: Plan, store_root: Path | None, created_root: bool) -> Journal:
    """The journal of a plan about to be applied: every action pending."""
    root = Path(plan.target)
    plan_data = plan.to_dict()
    actions = plan_data.pop("actions")
    for a in actions:
        a.update(status="pending", before=None, backup=None, temp=None)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    from cuda4amd import __version__

    return Journal(journal_path(root), {
        "schema": JOURNAL_SCHEMA, "generated_by": f"cuda4amd {__version__}", "state": "applying",
        "created": now, "updated": now, "root": str(root), "created_root": created_root,
        "store": str(store_root) if store_root else None, "plan": plan_data, "actions": actions,
        "verification": None,
    })


def state_after(action: dict[str, Any]) -> dict[str, Any]:
    """The file state (fileops.file_state) an action leaves at its destination."""
    if action["kind"] == "mkdir":
        return {"kind": "dir"}
    if action["kind"] == "link":
        return {"kind": "link", "link": action["link"]}
    return {"kind": "file", "sha256": action["sha256"]}


