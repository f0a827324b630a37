"""Undo: put the tree back, byte for byte, as the journal says it was, then remove what the fix added.

    outcome = undo_target(root)                # under the target's lock (fix.lock)
    outcome.complete, outcome.restored, outcome.removed, outcome.kept

The actions are walked backwards and each destination is restored from what
the journal says it was, checking hashes: a file the user changed after the
fix is left alone and reported (``force=True`` restores it anyway). Then the
backups, the journal and ``.cuda4amd`` itself (when the fix created it) are
removed. Every change goes through a `FileOps` (fix.fileops), confined to the
folders the journal may change; an undo that does not finish keeps the
journal, for another run.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda4amd.fix.fileops import TMP_SUFFIX, FileOps, file_state, is_link, oserror_text, same_state
from cuda4amd.fix.journal import Journal, allowed_roots, load_journal, only_our_leftovers, state_after, temp_path
from cuda4amd.fix.lock import target_lock
from cuda4amd.fix.plan.model import FIX_DIR

__all__ = ["UndoError", "UndoOutcome", "restore_tree", "undo_target"]


class UndoError(Exception):
    """One destination cannot be restored (its backup is missing or changed, a folder is in the way)."""


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
    """Put the tree back as the journal says it was, then remove the journal, holding the target's lock
    (LockError when another fix, undo or run holds it; FixDirError for a journal that is not ours)."""
    with target_lock(Path(root), "undo"):
        return restore_tree(root, ops=ops, force=force)


def restore_tree(root: str | os.PathLike[str], *, ops: FileOps | None = None, force: bool = False) -> UndoOutcome:
    """undo_target for a caller that holds the target's lock already (a fix rolling back)."""
    ops = ops or FileOps()
    root = Path(root).resolve()
    fix_dir = root / FIX_DIR
    outcome = UndoOutcome(root)
    journal = load_journal(root)
    ops.confine(allowed_roots(journal.data) if journal is not None else [root])
    if journal is None:
        outcome.found = False
        if fix_dir.is_dir() and only_our_leftovers(fix_dir):  # a first run stopped before its journal
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
            outcome.errors.append(f"{a['path']}: {oserror_text(exc)}")
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
        outcome.errors.append(f"{fix_dir}: {oserror_text(exc)}")
    return outcome


def _try_save(journal: Journal, ops: FileOps) -> None:
    # undo goes on if this fails: every step checks the disk, so an older journal still undoes correctly
    with contextlib.suppress(OSError):
        journal.save(ops)


def _remove_tree_of_ours(folder: Path, ops: FileOps) -> None:
    """Remove the backup folders (their files were removed as they were restored)."""
    if not folder.is_dir() or folder.is_symlink():
        return
    for dirpath, _dirnames, filenames in os.walk(folder, topdown=False):
        for name in filenames:
            if name.endswith(TMP_SUFFIX):
                ops.remove(Path(dirpath) / name)
        if not os.listdir(dirpath):
            ops.rmdir(Path(dirpath))


def _undo_one(journal: Journal, a: dict[str, Any], ops: FileOps, force: bool, outcome: UndoOutcome) -> None:
    dest = journal.abs(a["path"])
    before = a["before"] or {"kind": "absent"}
    after = state_after(a)
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
    if same_state(cur, before):
        _drop_backup(journal, a, ops)
        return
    if not (same_state(cur, after) or cur["kind"] == "absent") and not force:
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
    temp = journal.abs(a["temp"] or temp_path(a["path"], 0))
    if before["kind"] == "link":
        ops.symlink(before["link"], temp)
    elif before["kind"] == "file":
        backup = journal.abs(a["backup"]) if a.get("backup") else None
        if backup is None or not backup.is_file() or is_link(os.lstat(backup)):
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


def _drop_backup(journal: Journal, a: dict[str, Any], ops: FileOps) -> None:
    if a.get("backup"):
        backup = journal.abs(a["backup"])
        if os.path.lexists(backup):
            ops.remove(backup)
        tmp = backup.with_name(backup.name + TMP_SUFFIX)
        if os.path.lexists(tmp):
            ops.remove(tmp)


