"""`scan --fix` from start to end (plan, show, ask, fetch, apply, verify), and carrying a plan out.

    outcome = fix_target(result, mode="launcher", assume_yes=True)
    outcome.status      # "applied" | "already-applied" | "dry-run" | "declined" | "refused" | "failed" | ...
    outcome.exit_code   # 0 done, 5 nothing changed (refused/declined), 6 apply failed, 7 verify failed

    journal = apply_plan(plan, store)          # writes <root>/.cuda4amd/journal.json first

`fix_target` holds the target's lock (fix.lock) throughout. A change that
fails (disk full, a locked or read-only file) is rolled back from the journal
at once (fix.undo); if even that fails, the journal stays for ``cuda4amd
undo``. Ctrl-C (or any other interruption) leaves the journal: a re-run
completes the fix, ``cuda4amd undo`` restores the tree.

`apply_plan` writes the journal (fix.journal) before the first change and
around each one. Each change is itself atomic: the old file is copied to its
backup (and checked) before the new content is written to a temporary file
next to the destination, synced, checked against the plan's sha256 and
renamed over it. Every write goes through a `FileOps` (fix.fileops), confined
to the folders the journal may change; re-running `apply_plan` on an
unfinished journal completes it.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda4amd.fix.archive import Store, prepare_store
from cuda4amd.fix.fileops import TMP_SUFFIX, FileOps, file_state, is_link, oserror_text, readlink_text, same_state
from cuda4amd.fix.journal import (
    FixDirError,
    Journal,
    allowed_roots,
    backup_path,
    journal_path,
    journal_problem,
    load_journal,
    new_journal,
    only_our_leftovers,
    state_after,
    temp_path,
)
from cuda4amd.fix.launchers import LauncherError
from cuda4amd.fix.lock import LockError, target_lock
from cuda4amd.fix.plan.make import make_plan
from cuda4amd.fix.plan.model import FIX_DIR, Plan, PlanError, sha256_text, target_root
from cuda4amd.fix.release import ReleaseError, ReleaseSource, choose_source, fetch_archive, sha256_file
from cuda4amd.fix.undo import restore_tree
from cuda4amd.fix.verify import REPORT_NAME, Verification, after_report, verify
from cuda4amd.host import HostReportError, detect_host, load_host_report
from cuda4amd.model import platform_of
from cuda4amd.report.escape import visible_lines
from cuda4amd.rules.ruleset import load_rules
from cuda4amd.rules.validate import RulesError
from cuda4amd.scan.pipeline import ScanOptions, run_scan

if TYPE_CHECKING:
    from cuda4amd.host.report import HostReport
    from cuda4amd.rules.ruleset import RuleSet
    from cuda4amd.scan.pipeline import ScanResult

__all__ = ["EXIT_CODES", "ApplyError", "FixOutcome", "RefusedBeforeChange", "apply_extra", "apply_plan",
           "fix_target", "save_journal"]

#: exit status per outcome (docs/fix.md)
EXIT_CODES = {"applied": 0, "already-applied": 0, "dry-run": 0, "declined": 5, "refused": 5, "failed": 6,
              "verify-failed": 7}


class ApplyError(Exception):
    """A change could not be made; the journal says how far the run got."""

    def __init__(self, message: str, path: str | None = None, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.cause = cause


class RefusedBeforeChange(ApplyError):
    """The plan was refused before its first change (a destination outside the allowed folders,
    through a link): nothing was written, so there is nothing to roll back."""


@dataclass
class FixOutcome:
    status: str
    message: str = ""
    plan: Plan | None = None
    journal: Path | None = None
    verification: Verification | None = None
    rolled_back: bool = False
    details: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


# ---------------------------------------------------------------------------
# scan --fix
# ---------------------------------------------------------------------------

def fix_target(result: ScanResult, *, mode: str = "launcher", zluda_release: str | None = None,
               zluda_path: str | os.PathLike[str] | None = None, sha256: str | None = None,
               dry_run: bool = False, assume_yes: bool = False, host: HostReport | str | os.PathLike[str] | None = None,
               echo: Callable[[str], None] | None = None, confirm: Callable[[str], bool] | None = None,
               rules: RuleSet | None = None, launcher_dir: str | os.PathLike[str] | None = None,
               rescan: Callable[[], ScanResult] | None = None,
               progress: Callable[[int, int | None], None] | None = None,
               ops: FileOps | None = None, cache: Path | None = None) -> FixOutcome:
    """Link ZLUDA for the green-lit set of a scan (`result`, a ScanResult),
    holding the target's lock (fix.lock) throughout.

    rules: the RuleSet to plan with (default: the scan's own, so that its
    --rules folders count). host: a HostReport, a path to a recorded one,
    "auto" (probe this machine) or None (the scan's host, else "auto").
    rescan: returns a fresh ScanResult of the target for verification
    (default: run_scan with the scan's own options and rules, the host not
    probed). echo(text): shows one message of whole lines, without the final
    newline (e.g. click.echo; default print); the plan names files of the
    tree, so each message comes with its control characters escaped
    (report.escape.visible_lines). confirm(question) -> bool (default
    click.confirm on stderr; no answer means no). progress(done, total):
    download progress (e.g. cuda4amd.cli.progress.DownloadBar, rich.progress
    on stderr). launcher_dir: write the launchers there instead of
    <target>/.cuda4amd (an existing folder). A dry run shows the plan
    whatever the host lacks, and what it lacks as warnings."""
    say = echo or print

    def shown(text: str) -> None:
        say(visible_lines(text))

    fix = _Fix(result, rules, shown, confirm or _default_confirm, dry_run, assume_yes, rescan, progress, ops, cache)
    try:
        root = target_root(result.target)
    except PlanError:
        return fix.run(host, zluda_release, zluda_path, sha256, mode, launcher_dir)  # refused there, with its message
    try:
        with target_lock(root, "scan --fix"):
            return fix.run(host, zluda_release, zluda_path, sha256, mode, launcher_dir)
    except LockError as exc:
        return fix.refused(str(exc))


def _default_confirm(text: str) -> bool:
    import click

    try:
        return click.confirm(text, default=False, err=True)
    except click.Abort:
        return False


def _resolve_host(host: HostReport | str | os.PathLike[str] | None, result: ScanResult,
                  rules: RuleSet) -> HostReport | None:
    if host is None:
        host = result.host if result.host is not None else "auto"
    if isinstance(host, (str, os.PathLike)):
        if str(host) == "auto":
            return detect_host(target=str(result.target.path), rules=rules)
        if str(host) == "none":
            return None
        return load_host_report(host)
    return host


@dataclass
class _Fix:
    """One fix_target call: the scan, how to talk to the user, where files go."""

    result: ScanResult
    given_rules: RuleSet | None
    say: Callable[[str], None]
    confirm: Callable[[str], bool]
    dry_run: bool
    assume_yes: bool
    rescan: Callable[[], ScanResult] | None
    progress: Callable[[int, int | None], None] | None
    ops: FileOps | None
    cache: Path | None
    root: Path = Path()
    host_warnings: list[str] = field(default_factory=list)  # a dry run's: what the host lacks for the plan
    rules: RuleSet = field(init=False)  # planned with: given_rules, else the scan's, else the shipped

    def run(self, host: HostReport | str | os.PathLike[str] | None, zluda_release: str | None,
            zluda_path: str | os.PathLike[str] | None, sha256: str | None, mode: str,
            launcher_dir: str | os.PathLike[str] | None) -> FixOutcome:
        """The fix: an interrupted one completed, the same one again verified, or a new plan applied."""
        result = self.result
        try:
            self.rules = self.given_rules or result.rules or load_rules()
            tag = result.release.tag
            if zluda_release is not None and zluda_release != tag:
                return self.refused(f"the scan judged against ZLUDA {tag}; scan again with --zluda-release "
                                    f"{zluda_release}")
            self.root = target_root(result.target)
            journal = load_journal(self.root)
        except (PlanError, FixDirError, RulesError) as exc:
            return self.refused(str(exc))
        if journal is not None and not journal.complete:
            return self.complete_interrupted(journal)
        planned = self.new_plan(host, zluda_path, sha256, mode, launcher_dir)
        if isinstance(planned, FixOutcome):
            return planned
        plan, source, store = planned
        if journal is not None:
            return self.again(journal, plan)
        return self.apply_new(plan, source, store)

    def echo(self, text: str) -> None:
        self.say(text.rstrip("\n"))  # every message is one or more whole lines

    def refused(self, message: str) -> FixOutcome:
        self.echo(f"cuda4amd: fix refused: {message}\n")
        return FixOutcome("refused", message)

    def store(self, source: ReleaseSource, plan_required: list[str], *, allow_download: bool,
              unpack: bool) -> Store | None:
        release = self.result.release
        if source.kind == "folder":
            return prepare_store(source, None, None, release, source.platform, required=plan_required)
        got = fetch_archive(source, progress=self.progress, cache=self.cache, allow_download=allow_download)
        if got is None:
            return None
        path, digest = got
        return prepare_store(source, path, digest, release, source.platform, required=plan_required,
                             cache=self.cache, unpack=unpack)

    def verify(self, journal: Journal, write_report: bool = True) -> FixOutcome:
        return _verify(journal, self.result, self.rules, self.rescan, self.echo, self.ops, write_report)

    # -- an earlier fix ---------------------------------------------------------

    def complete_interrupted(self, journal: Journal) -> FixOutcome:
        root = self.root
        if journal.state in ("undoing", "undo-incomplete"):
            return self.refused(f"an undo of {root} did not finish: run `cuda4amd undo {root}` again")
        plan = journal.plan
        self.echo(f"an interrupted fix of {root} was found ({journal.path}); completing it:\n")
        self.echo(plan.render())
        if self.dry_run:
            return FixOutcome("dry-run", "an interrupted fix would be completed", plan, journal.path)
        if not self.assume_yes and not self.confirm("Complete it?"):
            return FixOutcome("declined", "not completed", plan, journal.path)
        try:
            store = self.store(ReleaseSource.from_dict(plan.release), plan.required, allow_download=True, unpack=True)
            journal = apply_plan(None, store, journal=journal, ops=self.ops)
        except (ReleaseError, ApplyError) as exc:
            self.echo(f"cuda4amd: the fix could not be completed: {exc}\n"
                      f"the journal is kept: `cuda4amd undo {root}` restores the tree, a re-run tries again\n")
            return FixOutcome("failed", str(exc), plan, journal.path)
        return self.verify(journal)

    def again(self, journal: Journal, plan: Plan) -> FixOutcome:
        """A complete earlier fix: the same plan again is a no-op (verified), another is refused."""
        old = journal.plan
        if old.key() == plan.key() or (plan.release_sha256 is None and _same_but_hashes(old, plan)):
            self.echo(f"{self.root} is already fixed as planned ({journal.path}); verifying:\n")
            if self.dry_run:
                return FixOutcome("dry-run", "already applied", old, journal.path)
            outcome = self.verify(journal, write_report=False)
            if outcome.status == "applied":
                outcome.status = "already-applied"
            return outcome
        return self.refused(f"{self.root} was fixed with another plan ({old.mode} mode, ZLUDA {old.release['tag']} "
                            f"{(old.release_sha256 or '')[:12]}): run `cuda4amd undo {self.root}` first")

    # -- a new plan ---------------------------------------------------------------

    def new_plan(self, host: HostReport | str | os.PathLike[str] | None, zluda_path: str | os.PathLike[str] | None,
                 sha256: str | None, mode: str, launcher_dir: str | os.PathLike[str] | None,
                 ) -> tuple[Plan, ReleaseSource, Store | None] | FixOutcome:
        """(plan, release source, store or None), or the refusal."""
        result = self.result
        try:
            host_report = _resolve_host(host, result, self.rules)
            source = choose_source(self.rules, result.release.tag, _platform_guess(result), zluda_path, sha256)
            plan = make_plan(result, rules=self.rules, host=host_report, source=source, store=None, mode=mode,
                             launcher_dir=launcher_dir, host_warnings=self.host_warnings if self.dry_run else None)
            # hashes for the plan from what is at hand, without unpacking (or downloading) before the answer
            store = self.store(source, plan.required, allow_download=False, unpack=False)
            if store is not None:
                plan.bind(store)
        except (PlanError, ReleaseError, HostReportError, LauncherError) as exc:
            return self.refused(str(exc))
        return plan, source, store

    def apply_new(self, plan: Plan, source: ReleaseSource, store: Store | None) -> FixOutcome:
        self.echo(plan.render())
        self.show_host_warnings()
        if self.dry_run:
            return FixOutcome("dry-run", "the plan only (--dry-run): nothing was changed", plan)
        if not self.assume_yes and not self.confirm("Apply this plan?"):
            self.echo("nothing was changed\n")
            return FixOutcome("declined", "nothing was changed", plan)
        try:
            if store is None and source.kind == "pin":
                self.echo(f"downloading {source.location} ({source.size or '?'} bytes) into the cache…\n")
            if store is None or source.kind != "folder":
                store = self.store(source, plan.required, allow_download=True, unpack=True)
                assert store is not None  # allowed to download: the release is at hand, or a ReleaseError
                plan.bind(store)
        except (PlanError, ReleaseError) as exc:
            return self.refused(str(exc))
        try:
            journal = apply_plan(plan, store, ops=self.ops)
        except RefusedBeforeChange as exc:  # nothing was written: a refusal (exit 5), not a failure
            return self.refused(str(exc))
        except ApplyError as exc:
            return self.roll_back(plan, exc)
        except KeyboardInterrupt:
            self.echo(f"\ninterrupted: the journal {journal_path(self.root)} says what was done; "
                      f"`cuda4amd undo {self.root}` restores the tree, a re-run completes the fix\n")
            raise
        return self.verify(journal)

    def roll_back(self, plan: Plan, exc: Exception) -> FixOutcome:
        """A change failed: undo from the journal at once (the lock is held); keep the journal if even that fails."""
        root = self.root
        self.echo(f"cuda4amd: the fix failed: {exc}\n")
        try:
            undone = restore_tree(root, ops=self.ops)
        except Exception as undo_exc:  # report, keep the journal
            undone = None
            self.echo(f"cuda4amd: rolling back failed too ({undo_exc}); the journal is kept: "
                      f"run `cuda4amd undo {root}`\n")
        if undone is not None and undone.complete:
            self.echo("rolled back: the tree is as it was\n")
            return FixOutcome("failed", str(exc), plan, None, rolled_back=True)
        if undone is not None:
            self.echo("rolling back did not finish: " + "; ".join(undone.kept + undone.errors)
                      + f"\nthe journal is kept: run `cuda4amd undo {root}` again\n")
        return FixOutcome("failed", str(exc), plan, journal_path(root))

    def show_host_warnings(self) -> None:
        """What a dry run's plan could not have on this host (make_plan's host_warnings)."""
        if not self.host_warnings:
            return
        for warning in self.host_warnings:
            self.echo(f"warning: {warning}\n")
        self.echo("this plan cannot be applied for this host as it is; --dry-run: nothing was written\n")


def _platform_guess(result: ScanResult) -> str:
    using = {platform_of(v.binary.info.format) for v in result.verdicts
             if v.verdict != "no-cuda"}
    if len(using) == 1:
        return using.pop()
    every = {platform_of(v.binary.info.format) for v in result.verdicts}
    if len(every) == 1:
        return every.pop()
    return "windows" if sys.platform == "win32" else "linux"


def _same_but_hashes(old: Plan, new: Plan) -> bool:
    def strip(p: Plan) -> tuple[str, str, tuple[tuple[str, str, str | None], ...]]:
        return p.mode, p.platform, tuple(sorted((a.kind, a.path, a.link) for a in p.actions))

    return strip(old) == strip(new) and old.release.get("sha256") == new.release.get("sha256")


def _verify(journal: Journal, result: ScanResult, rules: RuleSet, rescan: Callable[[], ScanResult] | None,
            echo: Callable[[str], None], ops: FileOps | None, write_report: bool = True) -> FixOutcome:
    if rescan is None:
        rescan = _same_scan_again(result, rules)
    try:
        after = rescan()
    except Exception as exc:  # the fix is applied; say that verification could not run
        echo(f"cuda4amd: the fix is applied, but the re-scan failed: {exc}\n")
        return FixOutcome("verify-failed", f"re-scan failed: {exc}", journal.plan, journal.path)
    verification = verify(journal, after)
    echo(verification.summary() + "\n")
    has_report = any(a["path"] == REPORT_NAME for a in journal.actions)
    try:
        if write_report and not has_report:
            text = after_report(journal, verification, after)
            apply_extra(journal, {"kind": "write", "path": REPORT_NAME, "source": None, "sha256": sha256_text(text),
                                  "link": None, "executable": False, "why": "after-report", "replaces": False},
                        text.encode("utf-8"), ops=ops)
            echo(f"after-report: {journal.root / REPORT_NAME}\n")
        journal.data["verification"] = verification.to_dict()
        journal.state = "verified" if verification.ok else "verify-failed"
        save_journal(journal, ops or FileOps())
    except (ApplyError, PlanError) as exc:
        echo(f"cuda4amd: could not write the after-report: {exc}\n")
    plan = journal.plan
    if plan.mode == "launcher" and plan.programs:
        names = ", ".join(p["name"] for p in plan.programs)
        echo(f"run it with a launcher in {plan.launcher_dir} ({names}), or `cuda4amd run PROGRAM -- ARGS`\n")
    elif plan.mode == "launcher":
        echo(f"run programs with {plan.launcher_dir}/zluda-run, or `cuda4amd run PROGRAM -- ARGS`\n")
    echo(f"undo with `cuda4amd undo {journal.root}`\n")
    status = "applied" if verification.ok else "verify-failed"
    return FixOutcome(status, verification.summary(), plan, journal.path, verification)


def _same_scan_again(result: ScanResult, rules: RuleSet) -> Callable[[], ScanResult]:
    """A re-scan of the target with the scan's own options (release, engine,
    search paths, rules folders) and rule set; the host is not probed again:
    the verification is about the files."""

    options = result.options or ScanOptions(target=str(result.target.path), engine=result.engine)
    options = replace(options, target=str(result.target.path), zluda_release=result.release.tag, host="none")
    return lambda: run_scan(options, rules=rules)


# ---------------------------------------------------------------------------
# carrying a plan out
# ---------------------------------------------------------------------------

def apply_plan(plan: Plan | None, store: Store | None, *, ops: FileOps | None = None, journal: Journal | None = None,
               on_action: Callable[[int, int, dict[str, Any]], None] | None = None) -> Journal:
    """Carry out the plan (or finish an unfinished `journal`). Raises
    ApplyError on a failed change; the journal on disk then says what was
    done, for fix.undo or a re-run."""
    ops = ops or FileOps()
    if journal is None:
        assert plan is not None
        root = Path(plan.target)
        fix_dir = root / FIX_DIR
        created_root = not fix_dir.exists() or only_our_leftovers(fix_dir)
        fresh = new_journal(plan, store.root if store is not None else None, created_root)
        problem = journal_problem(fresh.data) or _redirected(fresh)
        if problem:
            raise RefusedBeforeChange(f"refused before any change: {problem}")
        ops.confine(allowed_roots(fresh.data))
        try:
            if not fix_dir.exists():
                ops.mkdir(fix_dir)
            journal = fresh
            journal.save(ops)  # before the first change
        except OSError as exc:
            raise ApplyError(f"cannot write the journal in {fix_dir}: {oserror_text(exc)}",
                             str(fix_dir), exc) from exc
    else:
        ops.confine(allowed_roots(journal.data))
        journal.state = "applying"
        save_journal(journal, ops)
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
            raise ApplyError(f"{action['path']}: {oserror_text(exc)}", action["path"], exc) from exc
    journal.state = "applied"
    save_journal(journal, ops)
    return journal


def _redirected(journal: Journal) -> str | None:
    """A destination whose nearest existing folder resolves outside the allowed
    folders (a linked `.cuda4amd` or `bin/`); FileOps checks again at each write."""
    allowed = [os.path.normcase(os.path.realpath(r)) for r in allowed_roots(journal.data)]
    fix_dir = journal.root / FIX_DIR
    if os.path.lexists(fix_dir) and is_link(os.lstat(fix_dir)):
        return f"{fix_dir} is a link (to {readlink_text(fix_dir)})"
    for a in journal.actions:
        folder = journal.abs(a["path"]).parent
        while not os.path.lexists(folder) and folder != folder.parent:
            folder = folder.parent
        real = os.path.normcase(os.path.realpath(folder))
        if not any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in allowed):
            return f"{a['path']} would be written in {real}, outside the target (a link points out of it)"
    return None


def save_journal(journal: Journal, ops: FileOps) -> None:
    """Journal.save, its failure an ApplyError."""
    try:
        journal.save(ops)
    except OSError as exc:
        raise ApplyError(f"cannot update the journal {journal.path}: {oserror_text(exc)}",
                         str(journal.path), exc) from exc


def apply_extra(journal: Journal, action: dict[str, Any], data: bytes, *, ops: FileOps | None = None) -> None:
    """Add one more "write" action (the after-report) to an applied journal and
    carry it out; its `data` is not kept in the journal (only its sha256)."""
    ops = ops or FileOps()
    action = dict(action, content=None, status="pending", before=None, backup=None, temp=None)
    journal.actions.append(action)
    save_journal(journal, ops)
    try:
        _apply_one(journal, len(journal.actions) - 1, action, ops, None, data)
    except OSError as exc:
        raise ApplyError(f"{action['path']}: {oserror_text(exc)}", action["path"], exc) from exc


def _makedirs(ops: FileOps, path: Path, stop: Path) -> None:
    """Create the missing folders of `path` (below `stop`, which exists)."""
    missing = []
    cur = path
    while not cur.exists() and cur != stop and cur != cur.parent:
        missing.append(cur)
        cur = cur.parent
    for folder in reversed(missing):
        ops.mkdir(folder)


def _apply_one(journal: Journal, index: int, a: dict[str, Any], ops: FileOps, store_root: Path | None,
               data: bytes | None = None) -> None:
    if a["status"] in ("done",):
        if same_state(file_state(journal.abs(a["path"])), state_after(a)):
            return
        raise ApplyError(f"{a['path']} changed after it was written (the journal says it is done): "
                         f"run `cuda4amd undo` first", a["path"])
    dest = journal.abs(a["path"])
    cur = file_state(dest)
    if a["status"] == "pending":
        _start(journal, index, a, cur, ops)
    if a["kind"] == "mkdir":
        if cur["kind"] == "absent":
            ops.mkdir(dest)
    elif not same_state(cur, state_after(a)):
        _change(journal, a, cur, dest, ops, store_root, data)
    a["status"] = "done"
    save_journal(journal, ops)


def _start(journal: Journal, index: int, a: dict[str, Any], cur: dict[str, Any], ops: FileOps) -> None:
    """Write down what the destination is now, its backup and temporary file, before the change."""
    if a["kind"] != "mkdir" and cur["kind"] in ("dir", "other"):
        raise ApplyError(f"{a['path']}: a folder or special file is in the way", a["path"])
    if a["kind"] == "mkdir" and cur["kind"] not in ("absent", "dir"):
        raise ApplyError(f"{a['path']}: a file is in the way of a folder", a["path"])
    if a["kind"] == "link" and cur["kind"] not in ("absent",) and not same_state(cur, state_after(a)):
        raise ApplyError(f"{a['path']}: something is in the way of a link", a["path"])
    a["before"] = cur
    if a["kind"] in ("copy", "write") and cur["kind"] in ("file", "link") and not same_state(cur, state_after(a)):
        a["backup"] = backup_path(journal.root, a["path"])
    if a["kind"] != "mkdir":
        a["temp"] = temp_path(a["path"], index)
    a["status"] = "started"
    save_journal(journal, ops)  # written down before the change


def _change(journal: Journal, a: dict[str, Any], cur: dict[str, Any], dest: Path, ops: FileOps,
            store_root: Path | None, data: bytes | None) -> None:
    """The change of a file or link action: back the old file up, write the temporary file, rename it over."""
    before = a["before"]
    if not same_state(cur, before):
        raise ApplyError(f"{a['path']} changed while the fix ran: run `cuda4amd undo` or re-run", a["path"])
    temp = journal.abs(a["temp"])
    if os.path.lexists(temp):
        ops.remove(temp)
    if a.get("backup") and before["kind"] == "file":
        _make_backup(journal, a, ops, dest)
    _write_temp(a, temp, ops, store_root, data)
    if a["kind"] != "link":
        mode = before.get("mode") if before["kind"] == "file" else None
        ops.chmod(temp, mode if mode is not None else (0o755 if a.get("executable") else 0o644))
    ops.replace(temp, dest)
    ops.sync_dir(dest.parent)


def _write_temp(a: dict[str, Any], temp: Path, ops: FileOps, store_root: Path | None, data: bytes | None) -> None:
    """The new content at `temp`: the link, the text written, or the release's file (checked against the plan)."""
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


def _make_backup(journal: Journal, a: dict[str, Any], ops: FileOps, dest: Path) -> None:
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


