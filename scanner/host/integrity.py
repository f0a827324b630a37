"""Are ZLUDA's files still as `scan --fix` copied them? (An antivirus that
quarantines or 'repairs' nvcuda.dll / zluda.exe leaves them missing or changed.)

The fix's journal (.cuda4amd/journal.json) records each file it copied with
its sha256. It is read only through cuda4amd.fix.journal.load_journal, which
trusts a journal only when its MAC verifies under this user's key, it was
written for this folder and every path it names stays inside the target
(docs/security.md); a journal it refuses is reported, and nothing it names is
read. The journal is read under the target's lock (cuda4amd.fix.lock), as
`cuda4amd run` reads it, so a fix or undo running now is not mistaken for
damage. Each file is compared as the fix's own verification compares it
(fix.fileops.file_state / same_state): a link or a FIFO put in a file's place
is a change, never followed or opened.
"""
from __future__ import annotations

import os
from pathlib import Path

from cuda4amd.host.gaps import Check

__all__ = ["changed_files", "zluda_file_checks"]


def changed_files(root: Path) -> tuple[list[str], list[str], int] | None:
    """(missing, changed, checked) for the ZLUDA files the fix at `root` copied;
    None: no fix there. Raises FixDirError for a journal that is not trusted
    and LockError while a fix, undo or run holds the target."""
    from cuda4amd.fix.fileops import file_state, same_state
    from cuda4amd.fix.journal import load_journal, state_after
    from cuda4amd.fix.lock import target_lock
    from cuda4amd.fix.plan.model import FIX_DIR, STORE_DIR

    if not os.path.lexists(Path(root) / FIX_DIR):
        return None  # never fixed: no lock taken, nothing written to the user state folder
    with target_lock(root, "doctor --target"):
        journal = load_journal(root)
        if journal is None:
            return None
        missing, changed, checked = [], [], 0
        for action in journal.actions:
            if action.get("kind") != "copy" or action.get("status") != "done" or not action.get("sha256"):
                continue
            rel = str(action["path"])
            if not (rel.startswith(STORE_DIR + "/") or action.get("source")):
                continue
            checked += 1
            try:
                now = file_state(journal.abs(rel))
            except OSError:
                missing.append(rel)
                continue
            if now["kind"] == "absent":
                missing.append(rel)
            elif not same_state(now, state_after(action)):
                changed.append(rel)
    return missing, changed, checked


def _some(paths: list[str]) -> str:
    return ", ".join(paths[:3]) + (" …" if len(paths) > 3 else "")


def zluda_file_checks(root: Path) -> list[Check]:
    from cuda4amd.fix.journal import FixDirError
    from cuda4amd.fix.lock import LockError

    try:
        found = changed_files(root)
    except FixDirError as exc:
        return [Check("zluda", "warning", f"the fix's files were not checked: {exc}",
                      "if you did not put that journal there, remove it (docs/security.md); "
                      f"`cuda4amd scan {root} --fix` fixes the folder anew")]
    except LockError as exc:
        return [Check("zluda", "info", f"the fix's files were not checked: {exc}",
                      "run `cuda4amd doctor --target` again when it has finished")]
    if found is None:
        return []
    missing, changed, checked = found
    if not missing and not changed:
        return [Check("zluda", "ok", f"the {checked} ZLUDA files the fix copied to {root} are unchanged (sha256)")]
    parts = []
    if missing:
        parts.append(f"{len(missing)} missing ({_some(missing)})")
    if changed:
        parts.append(f"{len(changed)} changed ({_some(changed)})")
    return [Check("zluda", "missing", f"of the {checked} ZLUDA files the fix copied, " + " and ".join(parts) +
                  " since the fix: an antivirus may have quarantined or altered them",
                  f"restore them from the antivirus quarantine (and allow the folder), or run `cuda4amd undo {root}` "
                  f"and `cuda4amd scan {root} --fix` again")]
