"""The journal: every change of a fix, written down before it happens, and undone from it.

    journal = apply_plan(plan, store)          # writes <root>/.cuda4amd/journal.json first
    outcome = undo_target(root)                # back to exactly what was there

``<root>/.cuda4amd/journal.json`` (schema ``cuda4amd.fix-journal/1``) holds the
plan and, per action, its state (``pending`` → ``started`` → ``done``, and
``undone``), what the destination was before (absent, a folder, a file with
its sha256 and mode, or a link and its target), where the old file was
backed up (``.cuda4amd/backup/<path>``) and the temporary file the new content
is written to. It is replaced atomically (temporary file, fsync, rename, fsync
of the folder) before each change and after it, so whatever stops a run —
an exception, Ctrl-C, power loss, a full disk, a file locked by a running
program — it describes every change that may have happened. Each change is
itself atomic: the old file is copied to its backup (and checked) before the
new content is written to a temporary file next to the destination, synced,
checked against the plan's sha256 and renamed over it.

``undo_target`` walks the actions backwards and restores each destination
from what the journal says it was, checking hashes: a file the user changed
after the fix is left alone and reported (``force=True`` restores it anyway).
Then it removes the backups, the journal and ``.cuda4amd`` itself when the fix
created it. Re-running ``apply_plan`` on an unfinished journal completes it.

All writes go through a ``FileOps`` object, so tests can make any single
operation fail (an exception, a full disk, a read-only or locked file).

Trust (docs/security.md): a journal is only loaded when its MAC verifies
under this user's key (cuda4amd.fix.state), its recorded root is the folder
it was found in and every path in it stays inside the target, its
``.cuda4amd`` or the plan's launcher folder; anything else is refused, never
resumed or undone. Each write checks, right before it, that the real path of
the destination's folder is still inside those folders, and creates files
without following a final link (``O_EXCL``, ``O_NOFOLLOW``).
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cuda4amd.fix.plan import BACKUP_DIR, FIX_DIR, JOURNAL_NAME, REPORT_PATH, Plan
from cuda4amd.fix.release import sha256_file
from cuda4amd.fix.state import StateError, journal_mac, mac_matches
from cuda4amd.userdirs import state_dir

__all__ = ["JOURNAL_SCHEMA", "FileOps", "Journal", "ApplyError", "UndoError", "UndoOutcome", "apply_plan",
           "apply_extra", "undo_target", "load_journal", "journal_path", "file_state", "FixDirError",
           "OutsideError", "allowed_roots", "RefusedBeforeChange"]

JOURNAL_SCHEMA = "cuda4amd.fix-journal/1"
TMP_SUFFIX = ".cuda4amd-tmp"
MAX_JOURNAL_BYTES = 64 << 20  # a real journal is a few hundred KiB; more is not ours
ACTION_KINDS = ("mkdir", "copy", "write", "link")
ACTION_STATES = ("pending", "started", "done", "undone")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)


class ApplyError(Exception):
    """A change could not be made; the journal says how far the run got."""

    def __init__(self, message: str, path: str | None = None, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.cause = cause


class RefusedBeforeChange(ApplyError):
    """The plan was refused before its first change (a destination outside the allowed folders,
    through a link): nothing was written, so there is nothing to roll back."""


class UndoError(Exception):
    pass


class FixDirError(Exception):
    """``.cuda4amd`` exists but is not a cuda4amd fix folder (or its journal is unreadable or not ours)."""


class OutsideError(OSError):
    """A write would land outside the target, its .cuda4amd and the launchers' folder (a link redirects it)."""


# ---------------------------------------------------------------------------
# file operations
# ---------------------------------------------------------------------------

class FileOps:
    """The only way apply/undo change the disk. `step(op, path)` is called
    before each operation: a test double overrides it to fail there."""

    #: real paths of the folders writes may land in; empty: not confined (a bare FileOps in a test)
    allowed: tuple[str, ...] = ()

    def confine(self, folders: list[Path]) -> None:
        """From now on every change must land inside `folders` (after resolving links)."""
        self.allowed = tuple(os.path.normcase(os.path.realpath(f)) for f in folders)

    def step(self, op: str, path: Path) -> None:
        pass

    def inside(self, path: Path) -> None:
        """Raise OutsideError unless the real path of `path`'s folder is inside the allowed folders;
        checked right before each change, so a link swapped in after planning is caught too."""
        if not self.allowed:
            return
        folder = os.path.normcase(os.path.realpath(Path(path).parent))
        if not any(folder == a or folder.startswith(a.rstrip(os.sep) + os.sep) for a in self.allowed):
            raise OutsideError(errno.EXDEV, f"{path} resolves to {folder}, outside the target "
                                            f"(a link points out of it); nothing is written there", str(path))

    def mkdir(self, path: Path) -> None:
        self.step("mkdir", path)
        self.inside(path)
        os.mkdir(path)

    def rmdir(self, path: Path) -> None:
        self.step("rmdir", path)
        self.inside(path)
        os.rmdir(path)

    def remove(self, path: Path) -> None:
        self.step("remove", path)
        self.inside(path)
        os.unlink(path)  # removes a link itself, never what it points to

    def replace(self, src: Path, dst: Path) -> None:
        self.step("replace", dst)
        self.inside(src)
        self.inside(dst)
        os.replace(src, dst)  # replaces a final link itself

    def symlink(self, target: str, path: Path) -> None:
        self.step("symlink", path)
        self.inside(path)
        os.symlink(target, path)

    def chmod(self, path: Path, mode: int) -> None:
        self.step("chmod", path)
        self.inside(path)
        if _is_link(os.lstat(path)):  # os.chmod follows links (and cannot not, on Linux)
            raise OutsideError(errno.ELOOP, f"{path} became a link; not changed", str(path))
        os.chmod(path, mode)

    def copystat(self, src: Path, dst: Path) -> None:
        self.step("copystat", dst)
        self.inside(dst)
        shutil.copystat(src, dst, follow_symlinks=False)

    def write(self, path: Path, data: bytes) -> None:
        """Create `path` (it must not exist) with `data`, synced to disk."""
        self.step("write", path)
        self.inside(path)
        self._write(path, data)

    def copy(self, src: Path, dst: Path) -> str:
        """Create `dst` (it must not exist) with the bytes of `src`, synced; returns their sha256."""
        self.step("copy", dst)
        self.inside(dst)
        return self._copy(src, dst)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY, 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())

    @staticmethod
    def _copy(src: Path, dst: Path) -> str:
        h = hashlib.sha256()
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY, 0o644)
        with open(src, "rb") as inp, os.fdopen(fd, "wb") as out:
            for block in iter(lambda: inp.read(1 << 20), b""):
                h.update(block)
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
        return h.hexdigest()

    def sync_dir(self, path: Path) -> None:
        if os.name == "nt":
            return
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def atomic_write(self, path: Path, data: bytes) -> None:
        tmp = path.with_name(path.name + TMP_SUFFIX)
        if os.path.lexists(tmp):
            self.remove(tmp)
        self.write(tmp, data)
        self.replace(tmp, path)
        self.sync_dir(path.parent)


def _is_link(st: os.stat_result) -> bool:
    """A symbolic link, or on Windows any reparse point (a junction too)."""
    return stat.S_ISLNK(st.st_mode) or bool(getattr(st, "st_file_attributes", 0)
                                             & getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0))


# ---------------------------------------------------------------------------
# states
# ---------------------------------------------------------------------------

def file_state(path: Path) -> dict[str, Any]:
    """What is at `path`: absent, a folder, a link (target) or a file (sha256, mode)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"kind": "absent"}
    if stat.S_ISLNK(st.st_mode):
        return {"kind": "link", "link": os.readlink(path)}
    if stat.S_ISDIR(st.st_mode):
        return {"kind": "dir"}
    if stat.S_ISREG(st.st_mode):
        return {"kind": "file", "sha256": sha256_file(path), "mode": stat.S_IMODE(st.st_mode)}
    return {"kind": "other"}


def _same(a: dict, b: dict) -> bool:
    if a["kind"] != b["kind"]:
        return False
    if a["kind"] == "file":
        return a["sha256"] == b["sha256"]
    if a["kind"] == "link":
        return a["link"] == b["link"]
    return True


def _after(action: dict) -> dict:
    if action["kind"] == "mkdir":
        return {"kind": "dir"}
    if action["kind"] == "link":
        return {"kind": "link", "link": action["link"]}
    return {"kind": "file", "sha256": action["sha256"]}


# ---------------------------------------------------------------------------
# the journal
# ---------------------------------------------------------------------------

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
    if fix_st is not None and _is_link(fix_st):
        raise FixDirError(f"{fix_dir} is a link (to {_readlink(fix_dir)}): cuda4amd writes only into a real "
                          f"folder of the target; move it away first")
    if not os.path.lexists(path):
        if fix_dir.is_dir() and not _only_our_leftovers(fix_dir):
            raise FixDirError(f"{fix_dir} exists and holds no cuda4amd journal: move it away first")
        if fix_st is not None and not stat.S_ISDIR(fix_st.st_mode):
            raise FixDirError(f"{fix_dir} exists and is not a folder: move it away first")
        return None
    try:
        data = json.loads(_read_regular(path, MAX_JOURNAL_BYTES).decode("utf-8", "surrogateescape"))
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
    problem = _journal_problem(data)
    if problem:
        raise FixDirError(f"{path}: {problem}; refused, nothing was changed")
    journal = Journal(path, data)
    journal.on_disk = journal._content()
    return journal


def _readlink(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, opened without following a final link and
    without blocking (a FIFO put there would hang a plain open)."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _BINARY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"{st.st_size} bytes, more than a journal holds ({limit})")
        chunks = []
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                break
            chunks.append(block)
            if sum(map(len, chunks)) > limit:
                raise OSError(errno.EFBIG, "grew past the size a journal holds")
        return b"".join(chunks)
    finally:
        os.close(fd)


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


def _journal_problem(data: dict[str, Any]) -> str | None:
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


def _only_our_leftovers(fix_dir: Path) -> bool:
    """An interrupted first run can leave an empty .cuda4amd or a journal temp file."""
    try:
        names = os.listdir(fix_dir)
    except OSError:
        return False
    return all(n == JOURNAL_NAME + TMP_SUFFIX for n in names)


def _backup_path(root: Path, path: str) -> str:
    if os.path.isabs(path):
        digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return f"{BACKUP_DIR}/_outside/{digest}/{Path(path).name}"
    return f"{BACKUP_DIR}/{path}"


def _temp_path(path: str, index: int) -> str:
    head, _, name = path.rpartition("/")
    tmp = f".{name}.{index}{TMP_SUFFIX}"
    if os.path.isabs(path):
        return str(Path(path).with_name(tmp))
    return f"{head}/{tmp}" if head else tmp


def _oserror_text(exc: OSError) -> str:
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT if hasattr(errno, "EDQUOT") else -1):
        return "the disk is full"
    if code in (errno.EACCES, errno.EPERM):
        return "permission denied (read-only, or in use by a running program?)"
    if code in (errno.EBUSY, getattr(errno, "ETXTBSY", -1)):
        return "the file is in use (is the application running?)"
    if code == errno.EROFS:
        return "the file system is read-only"
    return exc.strerror or str(exc)


# ---------------------------------------------------------------------------
# apply
# ---------------------------------------------------------------------------

def new_journal(plan: Plan, store_root: Path | None, created_root: bool) -> Journal:
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


def apply_plan(plan: Plan | None, store, *, ops: FileOps | None = None, journal: Journal | None = None,
               on_action: Callable[[int, int, dict], None] | None = None) -> Journal:
    """Carry out the plan (or finish an unfinished `journal`). Raises
    ApplyError on a failed change; the journal on disk then says what was
    done, for undo_target or a re-run."""
    ops = ops or FileOps()
    if journal is None:
        assert plan is not None
        root = Path(plan.target)
        fix_dir = root / FIX_DIR
        created_root = not fix_dir.exists() or _only_our_leftovers(fix_dir)
        fresh = new_journal(plan, store.root if store is not None else None, created_root)
        problem = _journal_problem(fresh.data) or _redirected(fresh)
        if problem:
            raise RefusedBeforeChange(f"refused before any change: {problem}")
        ops.confine(allowed_roots(fresh.data))
        try:
            if not fix_dir.exists():
                ops.mkdir(fix_dir)
            journal = fresh
            journal.save(ops)  # before the first change
        except OSError as exc:
            raise ApplyError(f"cannot write the journal in {fix_dir}: {_oserror_text(exc)}",
                             str(fix_dir), exc) from exc
    else:
        ops.confine(allowed_roots(journal.data))
        journal.state = "applying"
        _save(journal, ops)
    store_root = store.root if store is not None else (Path(journal.data["store"]) if journal.data["store"] else None)
    total = len(journal.actions)
    for index, action in enumerate(journal.actions):
        if on_action:
            on_action(index, total, action)
        try:
            _apply_one(journal, index, action, ops, store_root)
        except ApplyError:
            raise
        except OSError as exc:
            raise ApplyError(f"{action['path']}: {_oserror_text(exc)}", action["path"], exc) from exc
    journal.state = "applied"
    _save(journal, ops)
    return journal


def _redirected(journal: Journal) -> str | None:
    """A destination whose nearest existing folder resolves outside the allowed
    folders (a linked `.cuda4amd` or `bin/`); FileOps checks again at each write."""
    allowed = [os.path.normcase(os.path.realpath(r)) for r in allowed_roots(journal.data)]
    fix_dir = journal.root / FIX_DIR
    if os.path.lexists(fix_dir) and _is_link(os.lstat(fix_dir)):
        return f"{fix_dir} is a link (to {_readlink(fix_dir)})"
    for a in journal.actions:
        folder = journal.abs(a["path"]).parent
        while not os.path.lexists(folder) and folder != folder.parent:
            folder = folder.parent
        real = os.path.normcase(os.path.realpath(folder))
        if not any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in allowed):
            return f"{a['path']} would be written in {real}, outside the target (a link points out of it)"
    return None


def _save(journal: Journal, ops: FileOps) -> None:
    try:
        journal.save(ops)
    except OSError as exc:
        raise ApplyError(f"cannot update the journal {journal.path}: {_oserror_text(exc)}",
                         str(journal.path), exc) from exc


def apply_extra(journal: Journal, action: dict[str, Any], data: bytes, *, ops: FileOps | None = None) -> None:
    """Add one more "write" action (the after-report) to an applied journal and
    carry it out; its `data` is not kept in the journal (only its sha256)."""
    ops = ops or FileOps()
    action = dict(action, content=None, status="pending", before=None, backup=None, temp=None)
    journal.actions.append(action)
    _save(journal, ops)
    try:
        _apply_one(journal, len(journal.actions) - 1, action, ops, None, data)
    except OSError as exc:
        raise ApplyError(f"{action['path']}: {_oserror_text(exc)}", action["path"], exc) from exc


def _makedirs(ops: FileOps, path: Path, stop: Path) -> None:
    """Create the missing folders of `path` (below `stop`, which exists)."""
    missing = []
    cur = path
    while not cur.exists() and cur != stop and cur != cur.parent:
        missing.append(cur)
        cur = cur.parent
    for folder in reversed(missing):
        ops.mkdir(folder)


def _apply_one(journal: Journal, index: int, a: dict, ops: FileOps, store_root: Path | None,
               data: bytes | None = None) -> None:
    if a["status"] in ("done",):
        if _same(file_state(journal.abs(a["path"])), _after(a)):
            return
        raise ApplyError(f"{a['path']} changed after it was written (the journal says it is done): "
                         f"run `cuda4amd undo` first", a["path"])
    dest = journal.abs(a["path"])
    cur = file_state(dest)
    if a["status"] == "pending":
        if a["kind"] != "mkdir" and cur["kind"] in ("dir", "other"):
            raise ApplyError(f"{a['path']}: a folder or special file is in the way", a["path"])
        if a["kind"] == "mkdir" and cur["kind"] not in ("absent", "dir"):
            raise ApplyError(f"{a['path']}: a file is in the way of a folder", a["path"])
        if a["kind"] == "link" and cur["kind"] not in ("absent",) and not _same(cur, _after(a)):
            raise ApplyError(f"{a['path']}: something is in the way of a link", a["path"])
        a["before"] = cur
        if a["kind"] in ("copy", "write") and cur["kind"] in ("file", "link") and not _same(cur, _after(a)):
            a["backup"] = _backup_path(journal.root, a["path"])
        if a["kind"] != "mkdir":
            a["temp"] = _temp_path(a["path"], index)
        a["status"] = "started"
        _save(journal, ops)  # written down before the change
    before = a["before"]
    after = _after(a)

    if a["kind"] == "mkdir":
        if cur["kind"] == "absent":
            ops.mkdir(dest)
    elif not _same(cur, after):
        if not _same(cur, before):
            raise ApplyError(f"{a['path']} changed while the fix ran: run `cuda4amd undo` or re-run", a["path"])
        temp = journal.abs(a["temp"])
        if os.path.lexists(temp):
            ops.remove(temp)
        if a.get("backup") and before["kind"] == "file":
            _make_backup(journal, a, ops, dest)
        if a["kind"] == "link":
            ops.symlink(a["link"], temp)
        elif a["kind"] == "write":
            ops.write(temp, data if data is not None else a["content"].encode("utf-8"))
        else:
            if store_root is None:
                raise ApplyError("the unpacked release is not at hand", a["path"])
            got = ops.copy(store_root.joinpath(*a["source"].split("/")), temp)
            if got != a["sha256"]:
                ops.remove(temp)
                raise ApplyError(f"zluda/{a['source']}: its sha256 is {got}, the plan says {a['sha256']}: "
                                 f"the unpacked release changed; nothing was replaced", a["path"])
        if a["kind"] != "link":
            mode = before.get("mode") if before["kind"] == "file" else None
            ops.chmod(temp, mode if mode is not None else (0o755 if a.get("executable") else 0o644))
        ops.replace(temp, dest)
        ops.sync_dir(dest.parent)
    a["status"] = "done"
    _save(journal, ops)


def _make_backup(journal: Journal, a: dict, ops: FileOps, dest: Path) -> None:
    backup = journal.abs(a["backup"])
    if backup.is_file() and sha256_file(backup) == a["before"]["sha256"]:
        return
    _makedirs(ops, backup.parent, journal.root / FIX_DIR)
    tmp = backup.with_name(backup.name + TMP_SUFFIX)
    if os.path.lexists(tmp):
        ops.remove(tmp)
    got = ops.copy(dest, tmp)
    if got != a["before"]["sha256"]:
        raise ApplyError(f"{a['path']} changed while it was backed up", a["path"])
    ops.copystat(dest, tmp)
    ops.replace(tmp, backup)
    ops.sync_dir(backup.parent)


# ---------------------------------------------------------------------------
# undo
# ---------------------------------------------------------------------------

@dataclass
class UndoOutcome:
    root: Path
    found: bool = True
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)      # conflicts, with the reason
    errors: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.kept and not self.errors


def undo_target(root: str | os.PathLike[str], *, ops: FileOps | None = None, force: bool = False) -> UndoOutcome:
    """Put the tree back as the journal says it was, then remove the journal."""
    ops = ops or FileOps()
    root = Path(root).resolve()
    fix_dir = root / FIX_DIR
    outcome = UndoOutcome(root)
    journal = load_journal(root)
    ops.confine(allowed_roots(journal.data) if journal is not None else [root])
    if journal is None:
        outcome.found = False
        if fix_dir.is_dir() and _only_our_leftovers(fix_dir):  # a first run stopped before its journal
            for name in os.listdir(fix_dir):
                ops.remove(fix_dir / name)
            ops.rmdir(fix_dir)
            outcome.removed.append(FIX_DIR)
        return outcome
    journal.state = "undoing"
    _try_save(journal, ops)
    for index in range(len(journal.actions) - 1, -1, -1):
        a = journal.actions[index]
        if a["status"] in ("pending", "undone"):
            continue
        try:
            _undo_one(journal, a, ops, force, outcome)
        except OSError as exc:
            outcome.errors.append(f"{a['path']}: {_oserror_text(exc)}")
            continue
        except UndoError as exc:
            outcome.errors.append(str(exc))
            continue
        if not any(k.startswith(a["path"] + ":") for k in outcome.kept):
            a["status"] = "undone"
            _try_save(journal, ops)
    if not outcome.complete:
        journal.state = "undo-incomplete"
        _try_save(journal, ops)
        return outcome
    try:
        _remove_tree_of_ours(fix_dir / "backup", ops)
        ops.remove(journal.path)
        tmp = journal.path.with_name(journal.path.name + TMP_SUFFIX)
        if os.path.lexists(tmp):
            ops.remove(tmp)
        if journal.data.get("created_root") and fix_dir.is_dir() and not os.listdir(fix_dir):
            ops.rmdir(fix_dir)
    except OSError as exc:
        outcome.errors.append(f"{fix_dir}: {_oserror_text(exc)}")
    return outcome


def _try_save(journal: Journal, ops: FileOps) -> None:
    try:
        journal.save(ops)
    except OSError:
        pass  # undo goes on: every step checks the disk, so an older journal still undoes correctly


def _remove_tree_of_ours(folder: Path, ops: FileOps) -> None:
    """Remove the backup folders (their files were removed as they were restored)."""
    if not folder.is_dir() or folder.is_symlink():
        return
    for dirpath, dirnames, filenames in os.walk(folder, topdown=False):
        for name in filenames:
            if name.endswith(TMP_SUFFIX):
                ops.remove(Path(dirpath) / name)
        if not os.listdir(dirpath):
            ops.rmdir(Path(dirpath))


def _undo_one(journal: Journal, a: dict, ops: FileOps, force: bool, outcome: UndoOutcome) -> None:
    dest = journal.abs(a["path"])
    before = a["before"] or {"kind": "absent"}
    after = _after(a)
    if a.get("temp"):
        temp = journal.abs(a["temp"])
        if os.path.lexists(temp):
            ops.remove(temp)
    cur = file_state(dest)
    if a["kind"] == "mkdir":
        if before["kind"] == "absent" and cur["kind"] == "dir":
            if os.listdir(dest):
                outcome.kept.append(f"{a['path']}: the folder holds files the fix did not put there")
                return
            ops.rmdir(dest)
            outcome.removed.append(a["path"])
        return
    if _same(cur, before):
        _drop_backup(journal, a, ops)
        return
    if not (_same(cur, after) or cur["kind"] == "absent") and not force:
        outcome.kept.append(f"{a['path']}: changed after the fix (sha256 {cur.get('sha256', cur['kind'])}); "
                            f"left as it is (`cuda4amd undo --force` restores it)")
        return
    if before["kind"] == "absent":
        if cur["kind"] == "dir":
            outcome.kept.append(f"{a['path']}: a folder is there now; left as it is")
            return
        ops.remove(dest)
        ops.sync_dir(dest.parent)
        outcome.removed.append(a["path"])
        return
    temp = journal.abs(a["temp"] or _temp_path(a["path"], 0))
    if before["kind"] == "link":
        ops.symlink(before["link"], temp)
    elif before["kind"] == "file":
        backup = journal.abs(a["backup"]) if a.get("backup") else None
        if backup is None or not backup.is_file() or _is_link(os.lstat(backup)):
            raise UndoError(f"{a['path']}: its backup is missing; it cannot be restored")
        got = ops.copy(backup, temp)
        if got != before["sha256"]:
            ops.remove(temp)
            raise UndoError(f"{a['path']}: its backup {a['backup']} does not match the journal; not restored")
        ops.copystat(backup, temp)
    else:
        raise UndoError(f"{a['path']}: was a {before['kind']} before the fix; cannot restore that")
    if cur["kind"] == "dir":
        raise UndoError(f"{a['path']}: a folder is in the way; not restored")
    ops.replace(temp, dest)
    ops.sync_dir(dest.parent)
    outcome.restored.append(a["path"])
    _drop_backup(journal, a, ops)


def _drop_backup(journal: Journal, a: dict, ops: FileOps) -> None:
    if a.get("backup"):
        backup = journal.abs(a["backup"])
        if os.path.lexists(backup):
            ops.remove(backup)
        tmp = backup.with_name(backup.name + TMP_SUFFIX)
        if os.path.lexists(tmp):
            ops.remove(tmp)


# The journal's checks, under public names for fix.apply (saving after the
# verification) and fix.verify (comparing the tree with the journal).
same_state = _same
state_after = _after
save_journal = _save
