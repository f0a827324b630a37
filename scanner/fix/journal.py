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

__all__ = ["JOURNAL_SCHEMA", "FileOps", "Journal", "ApplyError", "UndoError", "UndoOutcome", "apply_plan",
           "apply_extra", "undo_target", "load_journal", "journal_path", "file_state", "FixDirError"]

JOURNAL_SCHEMA = "cuda4amd.fix-journal/1"
TMP_SUFFIX = ".cuda4amd-tmp"


class ApplyError(Exception):
    """A change could not be made; the journal says how far the run got."""

    def __init__(self, message: str, path: str | None = None, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.cause = cause


class UndoError(Exception):
    pass


class FixDirError(Exception):
    """``.cuda4amd`` exists but is not a cuda4amd fix folder (or its journal is unreadable)."""


# ---------------------------------------------------------------------------
# file operations
# ---------------------------------------------------------------------------

class FileOps:
    """The only way apply/undo change the disk. `step(op, path)` is called
    before each operation: a test double overrides it to fail there."""

    def step(self, op: str, path: Path) -> None:
        pass

    def mkdir(self, path: Path) -> None:
        self.step("mkdir", path)
        os.mkdir(path)

    def rmdir(self, path: Path) -> None:
        self.step("rmdir", path)
        os.rmdir(path)

    def remove(self, path: Path) -> None:
        self.step("remove", path)
        os.unlink(path)

    def replace(self, src: Path, dst: Path) -> None:
        self.step("replace", dst)
        os.replace(src, dst)

    def symlink(self, target: str, path: Path) -> None:
        self.step("symlink", path)
        os.symlink(target, path)

    def chmod(self, path: Path, mode: int) -> None:
        self.step("chmod", path)
        os.chmod(path, mode)

    def copystat(self, src: Path, dst: Path) -> None:
        self.step("copystat", dst)
        shutil.copystat(src, dst, follow_symlinks=False)

    def write(self, path: Path, data: bytes) -> None:
        """Create `path` (it must not exist) with `data`, synced to disk."""
        self.step("write", path)
        self._write(path, data)

    def copy(self, src: Path, dst: Path) -> str:
        """Create `dst` (it must not exist) with the bytes of `src`, synced; returns their sha256."""
        self.step("copy", dst)
        return self._copy(src, dst)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())

    @staticmethod
    def _copy(src: Path, dst: Path) -> str:
        h = hashlib.sha256()
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o644)
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
        # compact: the C encoder, and the journal is rewritten around every change
        text = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        ops.atomic_write(self.path, (text.replace(',{"kind":', ',\n{"kind":') + "\n").encode("utf-8"))
        self.on_disk = content

    def _content(self) -> str:
        return json.dumps({k: v for k, v in self.data.items() if k != "updated"}, sort_keys=True)

    def abs(self, path: str) -> Path:
        return Path(path) if os.path.isabs(path) else self.root.joinpath(*path.split("/"))


def load_journal(root: Path) -> Journal | None:
    """The journal of a fix of `root`, or None. Raises FixDirError when
    ``.cuda4amd`` holds something else, or the journal cannot be read."""
    fix_dir = Path(root) / FIX_DIR
    path = fix_dir / JOURNAL_NAME
    if not path.is_file():
        if fix_dir.is_dir() and not _only_our_leftovers(fix_dir):
            raise FixDirError(f"{fix_dir} exists and holds no cuda4amd journal: move it away first")
        if os.path.lexists(fix_dir) and not fix_dir.is_dir():
            raise FixDirError(f"{fix_dir} exists and is not a folder: move it away first")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FixDirError(f"{path}: cannot read the journal ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != JOURNAL_SCHEMA:
        raise FixDirError(f"{path}: not a cuda4amd journal ({JOURNAL_SCHEMA})")
    journal = Journal(path, data)
    journal.on_disk = journal._content()
    data["root"] = str(Path(root).resolve())  # the tree may have moved since: then the next save writes it
    return journal


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
        try:
            if not fix_dir.exists():
                ops.mkdir(fix_dir)
            journal = new_journal(plan, store.root if store is not None else None, created_root)
            journal.save(ops)  # before the first change
        except OSError as exc:
            raise ApplyError(f"cannot write the journal in {fix_dir}: {_oserror_text(exc)}",
                             str(fix_dir), exc) from exc
    else:
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
        if backup is None or not backup.is_file():
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
