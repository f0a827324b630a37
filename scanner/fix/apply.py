"""`scan --fix` from start to end: plan, show, ask, fetch, apply (journal), verify.

    outcome = fix_target(result, mode="launcher", assume_yes=True)
    outcome.status      # "applied" | "already-applied" | "dry-run" | "declined" | "refused" | "failed" | ...
    outcome.exit_code   # 0 done, 5 nothing changed (refused/declined), 6 apply failed, 7 verify failed

A change that fails (disk full, a locked or read-only file) is rolled back
from the journal at once; if even that fails, the journal stays for
``cuda4amd undo``. Ctrl-C (or any other interruption) leaves the journal: a
re-run completes the fix, ``cuda4amd undo`` restores the tree.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from cuda4amd.fix.archive import prepare_store
from cuda4amd.fix.journal import (
    ApplyError,
    FileOps,
    FixDirError,
    RefusedBeforeChange,
    apply_extra,
    apply_plan,
    journal_path,
    load_journal,
    save_journal,
    undo_target,
)
from cuda4amd.fix.launchers import LauncherError
from cuda4amd.fix.plan import PlanError, make_plan, sha256_text, target_root
from cuda4amd.fix.release import ReleaseError, ReleaseSource, choose_source, fetch_archive
from cuda4amd.fix.verify import REPORT_NAME, after_report, verify
from cuda4amd.host import HostReportError, detect_host, load_host_report
from cuda4amd.model import platform_of
from cuda4amd.rules.loader import RulesError, load_rules
from cuda4amd.scan.pipeline import ScanOptions, run_scan

__all__ = ["FixOutcome", "fix_target", "EXIT_CODES"]

#: exit status per outcome (docs/fix.md)
EXIT_CODES = {"applied": 0, "already-applied": 0, "dry-run": 0, "declined": 5, "refused": 5, "failed": 6,
              "verify-failed": 7}


@dataclass
class FixOutcome:
    status: str
    message: str = ""
    plan: Any = None                 # plan.Plan
    journal: Path | None = None
    verification: Any = None         # verify.Verification
    rolled_back: bool = False
    details: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


def _default_confirm(text: str) -> bool:
    import click

    try:
        return click.confirm(text, default=False, err=True)
    except click.Abort:
        return False


def _resolve_host(host, result, rules):
    if host is None:
        host = result.host if result.host is not None else "auto"
    if isinstance(host, (str, os.PathLike)):
        if str(host) == "auto":
            return detect_host(target=str(result.target.path), rules=rules)
        if str(host) == "none":
            return None
        return load_host_report(host)
    return host


def fix_target(result, *, mode: str = "launcher", zluda_release: str | None = None,
               zluda_path: str | os.PathLike[str] | None = None, sha256: str | None = None,
               dry_run: bool = False, assume_yes: bool = False, host=None,
               echo: Callable[[str], None] | None = None, confirm: Callable[[str], bool] | None = None,
               rules=None, launcher_dir: str | os.PathLike[str] | None = None,
               rescan: Callable[[], Any] | None = None, progress: Callable[[int, int | None], None] | None = None,
               ops=None, cache: Path | None = None) -> FixOutcome:
    """Link ZLUDA for the green-lit set of a scan (`result`, a ScanResult).

    rules: the RuleSet to plan with (default: the scan's own, so that its
    --rules folders count). host: a HostReport, a path to a recorded one,
    "auto" (probe this machine) or None (the scan's host, else "auto").
    rescan: returns a fresh ScanResult of the target for verification
    (default: run_scan with the scan's own options and rules, the host not
    probed). echo(text): shows one message of whole lines, without the final
    newline (e.g. click.echo; default print). confirm(question) -> bool
    (default click.confirm on stderr; no answer means no). progress(done,
    total): download progress (e.g. cuda4amd.cli.progress.DownloadBar,
    rich.progress on stderr). launcher_dir: write the launchers there instead
    of <target>/.cuda4amd (an existing folder). A dry run shows the plan
    whatever the host lacks, and what it lacks as warnings."""
    say = echo or print
    fix = _Fix(result, rules, say, confirm or _default_confirm, dry_run, assume_yes, rescan, progress, ops, cache)
    try:
        fix.rules = rules or result.rules or load_rules()
        tag = result.release.tag
        if zluda_release is not None and zluda_release != tag:
            return fix.refused(f"the scan judged against ZLUDA {tag}; scan again with --zluda-release {zluda_release}")
        fix.root = target_root(result.target)
        journal = load_journal(fix.root)
    except (PlanError, FixDirError, RulesError) as exc:
        return fix.refused(str(exc))
    if journal is not None and not journal.complete:
        return fix.complete_interrupted(journal)
    planned = fix.new_plan(host, zluda_path, sha256, mode, launcher_dir)
    if isinstance(planned, FixOutcome):
        return planned
    plan, source, store = planned
    if journal is not None:
        return fix.again(journal, plan)
    return fix.apply_new(plan, source, store)


@dataclass
class _Fix:
    """One fix_target call: the scan, how to talk to the user, where files go."""

    result: Any
    rules: Any
    say: Callable[[str], None]
    confirm: Callable[[str], bool]
    dry_run: bool
    assume_yes: bool
    rescan: Callable[[], Any] | None
    progress: Callable[[int, int | None], None] | None
    ops: Any
    cache: Path | None
    root: Path = Path()
    host_warnings: list[str] = field(default_factory=list)  # a dry run's: what the host lacks for the plan

    def echo(self, text: str) -> None:
        self.say(text.rstrip("\n"))  # every message is one or more whole lines

    def refused(self, message: str) -> FixOutcome:
        self.echo(f"cuda4amd: fix refused: {message}\n")
        return FixOutcome("refused", message)

    def store(self, source, plan_required, *, allow_download: bool, unpack: bool):
        release = self.result.release
        if source.kind == "folder":
            return prepare_store(source, None, None, release, source.platform, required=plan_required)
        got = fetch_archive(source, progress=self.progress, cache=self.cache, allow_download=allow_download)
        if got is None:
            return None
        path, digest = got
        return prepare_store(source, path, digest, release, source.platform, required=plan_required,
                             cache=self.cache, unpack=unpack)

    def verify(self, journal, write_report: bool = True) -> FixOutcome:
        return _verify(journal, self.result, self.rules, self.rescan, self.echo, self.ops, write_report)

    # -- an earlier fix ---------------------------------------------------------

    def complete_interrupted(self, journal) -> FixOutcome:
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

    def again(self, journal, plan) -> FixOutcome:
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

    def new_plan(self, host, zluda_path, sha256, mode: str, launcher_dir):
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

    def apply_new(self, plan, source, store) -> FixOutcome:
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

    def roll_back(self, plan, exc: Exception) -> FixOutcome:
        """A change failed: undo from the journal at once; keep the journal if even that fails."""
        root = self.root
        self.echo(f"cuda4amd: the fix failed: {exc}\n")
        try:
            undone = undo_target(root, ops=self.ops)
        except Exception as undo_exc:  # noqa: BLE001 - report, keep the journal
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


def _platform_guess(result) -> str:
    using = {platform_of(v.binary.info.format) for v in result.verdicts
             if v.verdict != "no-cuda"}
    if len(using) == 1:
        return using.pop()
    every = {platform_of(v.binary.info.format) for v in result.verdicts}
    if len(every) == 1:
        return every.pop()
    return "windows" if sys.platform == "win32" else "linux"


def _same_but_hashes(old, new) -> bool:
    strip = lambda p: (p.mode, p.platform, tuple(sorted((a.kind, a.path, a.link) for a in p.actions)))  # noqa: E731
    return strip(old) == strip(new) and old.release.get("sha256") == new.release.get("sha256")


def _verify(journal, result, rules, rescan, echo, ops, write_report: bool = True) -> FixOutcome:
    if rescan is None:
        rescan = _same_scan_again(result, rules)
    try:
        after = rescan()
    except Exception as exc:  # noqa: BLE001 - the fix is applied; say that verification could not run
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
        save_journal(journal, ops or _ops())
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


def _same_scan_again(result, rules) -> Callable[[], Any]:
    """A re-scan of the target with the scan's own options (release, engine,
    search paths, rules folders) and rule set; the host is not probed again:
    the verification is about the files."""

    options = result.options or ScanOptions(target=str(result.target.path), engine=result.engine)
    options = replace(options, target=str(result.target.path), zluda_release=result.release.tag, host="none")
    return lambda: run_scan(options, rules=rules)


def _ops():
    return FileOps()
