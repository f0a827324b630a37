"""Are ZLUDA's files still as `scan --fix` copied them? (An antivirus that
quarantines or 'repairs' nvcuda.dll / zluda.exe leaves them missing or changed.)

The fix's journal (.cuda4amd/journal.json) records each file it copied with
its sha256 (cuda4amd.fix.journal); each is hashed again here.
"""
from __future__ import annotations

from pathlib import Path

from cuda4amd.host.gaps import Check

__all__ = ["zluda_file_checks", "changed_files"]


def changed_files(root: Path) -> tuple[list[str], list[str], int] | None:
    """(missing, changed, checked) for the ZLUDA files the fix at `root` copied; None: no fix there."""
    from cuda4amd.fix.journal import FixDirError, load_journal
    from cuda4amd.fix.plan import STORE_DIR
    from cuda4amd.fix.release import sha256_file

    try:
        journal = load_journal(root)
    except FixDirError:
        return None
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
        path = journal.abs(rel)
        if not path.is_file():
            missing.append(rel)
            continue
        try:
            if sha256_file(path) != action["sha256"]:
                changed.append(rel)
        except OSError:
            missing.append(rel)
    return missing, changed, checked


def zluda_file_checks(root: Path) -> list[Check]:
    found = changed_files(root)
    if found is None:
        return []
    missing, changed, checked = found
    if not missing and not changed:
        return [Check("zluda", "ok", f"the {checked} ZLUDA files the fix copied to {root} are unchanged (sha256)")]
    parts = []
    if missing:
        parts.append(f"{len(missing)} missing ({', '.join(missing[:3])}{' …' if len(missing) > 3 else ''})")
    if changed:
        parts.append(f"{len(changed)} changed ({', '.join(changed[:3])}{' …' if len(changed) > 3 else ''})")
    return [Check("zluda", "missing", f"of the {checked} ZLUDA files the fix copied, " + " and ".join(parts) +
                  " since the fix: an antivirus may have quarantined or altered them",
                  f"restore them from the antivirus quarantine (and allow the folder), or run `cuda4amd undo {root}` "
                  f"and `cuda4amd scan {root} --fix` again")]
