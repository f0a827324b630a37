"""`cuda4amd doctor`: what this machine has for ZLUDA (docs/host.md).

Exit status: 0 whatever the machine has (the report is the answer), 2 for
usage or I/O errors (e.g. an unwritable -o file), 130 on Ctrl-C.
"""
from __future__ import annotations

import sys

import click

from cuda4amd.cli.output import STDOUT, color_option, output_format, quiet_option, verbosity, write

DOCTOR_EXTENSIONS = {".json": "json", ".md": "markdown", ".markdown": "markdown", ".txt": "console"}


@click.command()
@click.option("--format", "fmt", type=click.Choice(["console", "json", "markdown"]), default=None,
              help="Output format (default: from -o's extension, else console).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write the report to FILE (.json, .md or .txt; - for stdout).")
@click.option("--target", type=click.Path(exists=True), metavar="PATH",
              help="Also look for ZLUDA in this app folder (or next to this file).")
@click.option("-v", "--verbose", is_flag=True, help="Console: also what each probe found or why it failed.")
@quiet_option
@color_option
@click.option("--run", "run_probes", is_flag=True,
              help="Also run the smoke probes on this machine (through the ZLUDA found, else the system's libraries).")
@click.option("--timeout", type=float, default=60.0, show_default=True, metavar="SECONDS",
              help="With --run: time limit of each probe.")
def doctor(fmt: str | None, output: str | None, target: str | None, verbose: bool, quiet: bool, color: str,
           run_probes: bool, timeout: float) -> None:
    """Report what this machine has for ZLUDA: AMD GPU(s) and gfx target, HIP runtime,
    HIP SDK, the libraries and per-arch kernels ZLUDA needs, and ZLUDA itself.

    The JSON (--format json) is a host report that `cuda4amd scan --host FILE.json`
    can use to judge an app for this machine. It carries no user, host or home names.
    --format markdown is the same report to paste into an issue.
    Exit status: 0 (whatever was found), 2 on usage or I/O errors.
    """
    import json

    from cuda4amd.host import detect_host, readiness
    from cuda4amd.host.doctor import doctor_document, render_console, render_markdown, show
    from cuda4amd.host.extra_checks import with_extra_checks
    from cuda4amd.report.console import terminal
    from cuda4amd.rules.ruleset import load_rules
    from cuda4amd.rules.validate import RulesError

    verbosity(quiet, verbose)
    fmt = output_format(fmt, output, DOCTOR_EXTENSIONS)
    try:
        rules = load_rules()
        report = detect_host(target=target, rules=rules)
        ready = with_extra_checks(report, readiness(report, rules=rules), target)
    except RulesError as exc:
        click.echo(f"cuda4amd: {exc.message}", err=True)
        sys.exit(2)
    probes = None
    probe_lines: list[str] = []  # said after the verdict
    if run_probes:
        from cuda4amd.evidence.machine import machine_probes
        from cuda4amd.evidence.record import probe_document
        from cuda4amd.report.escape import visible

        through, zluda, outcomes = machine_probes(report, limit=timeout)
        probes = probe_document(outcomes, through=through, zluda=zluda)
        details = {(o.status, o.detail) for o in outcomes}
        if len(outcomes) > 1 and len(details) == 1 and outcomes[0].status == "unsupported":
            # every probe stopped where the first did (no AMD GPU, no driver to load): that, once
            probe_lines = [f"probes skipped: {visible(outcomes[0].detail)}"]
        else:
            probe_lines = [f"probe {o.family:<10} {o.status:<11} {o.seconds:6.2f}s  {visible(o.detail)}"
                           for o in outcomes]
    if fmt == "json":
        document = doctor_document(report, ready)
        if probes is not None:
            document["probes"] = probes
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    elif fmt == "markdown":
        text = render_markdown(report, ready)
    else:
        text = render_console(report, ready, width=100, verbose=verbose)
    if output and output != STDOUT:
        write(output, text)
        click.echo(ready.headline)
        if not quiet:
            click.echo(f"report written to {output}")
    elif fmt == "console":
        show(terminal(color=color), report, ready, quiet=quiet, verbose=verbose)
    else:
        click.echo(text, nl=False)
    for line in probe_lines:
        click.echo(line, err=fmt == "json" and not output)
