"""The `cuda4amd` command. Thin: options in, library call, rendered report out.

One module per command family: `scan` (with --fix), `report` (report, diff),
`fix` (run, undo), `doctor`, `verify`, `trace`, `matrix`; `output` is where reports go.

Heavy modules (rich, networkx, the readers) are imported inside the commands
so `cuda4amd --help` starts fast.
"""
from __future__ import annotations

import click

from cuda4amd import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cuda4amd")
def main() -> None:
    """Will this CUDA software run on an AMD GPU through ZLUDA? Answers before you install anything."""


def _register_commands() -> None:
    from cuda4amd.cli.doctor import doctor
    from cuda4amd.cli.fix import run, undo
    from cuda4amd.cli.matrix import matrix
    from cuda4amd.cli.report import diff, report
    from cuda4amd.cli.scan import scan
    from cuda4amd.cli.trace import trace
    from cuda4amd.cli.verify import verify

    for command in (scan, doctor, report, diff, run, undo, verify, trace, matrix):
        main.add_command(command)


_register_commands()
