"""`cuda4amd verify DIR [--run]`: check a fixed folder again; with --run, smoke-test
the linked libraries through the fix (docs/evidence.md)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cuda4amd.cli.output import fail, write

if TYPE_CHECKING:
    from cuda4amd.evidence.runner import Outcome


EXIT_VERIFY_FAILED = 7
EXIT_PROBE_FAILED = 8


@click.command()
@click.argument("target")
@click.option("--run", "run_probes", is_flag=True,
              help="Also run the smoke probes (driver API, then each linked library) through the fix.")
@click.option("--timeout", type=float, default=60.0, show_default=True, metavar="SECONDS",
              help="Time limit of each probe (the first run compiles PTX: give it more on a slow machine).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the verify report: FILE.json (the whole report) or FILE.md (the scan with its evidence).")
@click.option("--no-redact", is_flag=True, help="Keep home, user and host names in the file report.")
@click.option("--engine", type=click.Choice(["fast", "lief"]), default=None,
              help="Binary reader of the re-scan (default: the fix's).")
@click.option("--search-path", "search_paths", multiple=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Extra folder to resolve libraries in (default: those of `scan --fix`); repeatable.")
@click.option("--rules", "rule_dirs", multiple=True, type=click.Path(file_okay=False, exists=True), metavar="DIR",
              help="Extra rules folder (default: those of `scan --fix`); repeatable.")
@click.option("--follow-links", is_flag=True, help="Also walk links to folders outside TARGET, as `scan` does.")
def verify(target: str, run_probes: bool, timeout: float, output: str | None, no_redact: bool, engine: str | None,
           search_paths: tuple[str, ...], rule_dirs: tuple[str, ...], follow_links: bool) -> None:
    """Check TARGET, fixed by `cuda4amd scan TARGET --fix`: every file as the fix
    wrote it and every redirected dependency loading ZLUDA's file (sha256).
    With --run, run one smoke probe per linked library, each in its own process,
    through the fix's environment; each ends pass, unsupported (a safe refusal),
    incorrect, timeout, hang or crash.

    The re-scan judges with the --rules, --search-path, --follow-links and
    --engine the fix was made with (recorded in its plan); passing any of them
    replaces the recorded set.

    Exit status: 0 verified (probes passed or refused safely), 7 a file or link
    check failed, 8 a probe was incorrect, timed out, hung or crashed, 2 usage error.
    """
    from cuda4amd.cli.fix import locate
    from cuda4amd.evidence.after_fix import verify_fixed
    from cuda4amd.evidence.render import console_lines
    from cuda4amd.fix.journal import FixDirError
    from cuda4amd.fix.lock import LockError
    from cuda4amd.report.escape import visible, visible_document
    from cuda4amd.rules.validate import RulesError
    from cuda4amd.scan.discover import TargetError
    from cuda4amd.scan.pipeline import ScanOptions

    path = locate(target)
    root = path.parent if path.is_file() else path

    def show(o: Outcome) -> None:
        click.echo(f"  probe {o.family:<10} {o.status:<11} {o.seconds:6.2f}s  {visible(o.detail)}")

    if output and Path(output).suffix.lower() not in (".json", ".md"):
        raise click.UsageError(f"cannot tell the format from {output!r}: use .json or .md")
    if run_probes:
        click.echo(f"smoke probes through the fix in {root} (each up to {timeout:g} s):")
    try:
        options = None  # the options the fix recorded
        if search_paths or rule_dirs or follow_links or engine:
            options = ScanOptions(target=str(root), engine=engine or "fast",
                                  search_paths=tuple(Path(p) for p in search_paths),
                                  rule_dirs=tuple(Path(p) for p in rule_dirs), follow_links=follow_links)
        report = verify_fixed(root, run=run_probes, limit=timeout, progress=show, options=options)
    except (FixDirError, LockError, TargetError, RulesError) as exc:
        fail(str(exc))
    if report.skipped:
        click.echo(f"  probes not run: {report.skipped}")
    click.echo(report.verification.summary())
    for line in console_lines(visible_document(report.scan)):
        click.echo(line)
    if output:
        data = report.to_dict()
        if not no_redact:
            from cuda4amd.report.redact import Redactor

            redactor = Redactor(target_root=root)
            # the report's own fields too: `target` is the folder as typed, checks and probes name files in it
            data = {key: value if key == "scan" else redactor.data(value) for key, value in data.items()}
            data["scan"] = redactor.document(data["scan"])
            data["target"] = redactor.target_path(str(report.to_dict()["target"]))
        if output.lower().endswith(".md"):
            from cuda4amd.report import markdown

            write(output, markdown.render(data["scan"]))
        else:
            import json

            write(output, json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n")
        click.echo(f"report written to {output}")
    if not report.verification.ok:
        sys.exit(EXIT_VERIFY_FAILED)
    if not report.ok:
        sys.exit(EXIT_PROBE_FAILED)
