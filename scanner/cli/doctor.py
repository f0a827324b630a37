"""`cuda4amd doctor`: what this machine has for ZLUDA (docs/host.md).

Exit status: 0 whatever the machine has (the report is the answer), 2 for
usage or I/O errors (e.g. an unwritable -o file).
"""
from __future__ import annotations

import sys

import click


@click.command()
@click.option("--format", "fmt", type=click.Choice(["console", "json"]), default=None,
              help="Output format (default: json when -o ends in .json, else console).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@click.option("--target", type=click.Path(exists=True), metavar="PATH",
              help="Also look for ZLUDA in this app folder (or next to this file).")
@click.option("--run", "run_probes", is_flag=True,
              help="Also run the smoke probes on this machine (through the ZLUDA found, else the system's libraries).")
@click.option("--timeout", type=float, default=60.0, show_default=True, metavar="SECONDS",
              help="With --run: time limit of each probe.")
def doctor(fmt, output, target, run_probes, timeout) -> None:
    """Report what this machine has for ZLUDA: AMD GPU(s) and gfx target, HIP runtime,
    HIP SDK, the libraries and per-arch kernels ZLUDA needs, and ZLUDA itself.

    The JSON (--format json) is a host report that `cuda4amd scan --host FILE.json`
    can use to judge an app for this machine. It carries no user, host or home names.
    Exit status: 0 (whatever was found), 2 on usage or I/O errors.
    """
    import json
    import shutil
    from pathlib import Path

    from cuda4amd.host import detect_host, readiness
    from cuda4amd.host.doctor import doctor_document, render_console
    from cuda4amd.host.extra_checks import with_extra_checks
    from cuda4amd.rules.loader import RulesError, load_rules

    if fmt is None:
        fmt = "json" if output and output.lower().endswith(".json") else "console"
    try:
        rules = load_rules()
        report = detect_host(target=target, rules=rules)
        ready = with_extra_checks(report, readiness(report, rules=rules), target)
    except RulesError as exc:
        click.echo(f"cuda4amd: {exc}", err=True)
        sys.exit(2)
    probes = None
    if run_probes:
        from cuda4amd.evidence.machine import machine_probes
        from cuda4amd.evidence.record import probe_document
        from cuda4amd.report.escape import visible

        through, zluda, outcomes = machine_probes(report, limit=timeout, progress=lambda o: click.echo(
            f"probe {o.family:<10} {o.status:<11} {o.seconds:6.2f}s  {visible(o.detail)}", err=fmt == "json" and not output))
        probes = probe_document(outcomes, through=through, zluda=zluda)
    if fmt == "json":
        document = doctor_document(report, ready)
        if probes is not None:
            document["probes"] = probes
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    else:
        width = max(80, shutil.get_terminal_size((100, 24)).columns)
        text = render_console(report, ready, color=sys.stdout.isatty() and not output, width=width)
    if output:
        try:
            Path(output).write_text(text if fmt == "json" else render_console(report, ready, width=100),
                                    encoding="utf-8")
        except OSError as exc:
            click.echo(f"cuda4amd: cannot write {output}: {exc.strerror or exc}", err=True)
            sys.exit(2)
        click.echo(ready.headline)
        click.echo(f"report written to {output}")
    else:
        click.echo(text, nl=False)
