"""`cuda4amd schema NAME`: print a JSON Schema shipped inside the package (report/schemas/NAME.json)."""
from __future__ import annotations

import click

from cuda4amd.cli.output import STDOUT, write

SCHEMA_PACKAGE = "cuda4amd.report"
SCHEMA_FOLDER = "schemas"


def _names() -> list[str]:
    from importlib.resources import files

    folder = files(SCHEMA_PACKAGE).joinpath(SCHEMA_FOLDER)
    return sorted(entry.name[: -len(".json")] for entry in folder.iterdir() if entry.name.endswith(".json"))


class _LazyChoice(click.Choice):
    """The schema names, read from the package folder when a command line is checked, not at start-up."""

    def __init__(self) -> None:
        super().__init__([])

    @property
    def choices(self) -> tuple[str, ...]:  # click reads .choices for checking, help and completion
        return tuple(_names())

    @choices.setter
    def choices(self, value: object) -> None:
        """click.Choice.__init__ assigns its list here; the names come from the package folder instead."""


@click.command("schema")
@click.argument("name", type=_LazyChoice())
@click.option("-o", "--output", default=STDOUT, show_default=True, type=click.Path(dir_okay=False),
              help="Write the schema to FILE.")
def schema(name: str, output: str) -> None:
    """Print the JSON Schema (draft 2020-12) of a cuda4amd document: `scan` is the report of
    `cuda4amd scan --format json`. Validate a report with any JSON Schema tool, e.g.
    `cuda4amd schema scan -o scan.schema.json`.
    """
    from importlib.resources import files

    text = files(SCHEMA_PACKAGE).joinpath(SCHEMA_FOLDER).joinpath(f"{name}.json").read_text(encoding="utf-8")
    write(output, text if text.endswith("\n") else text + "\n")
