"""Report renderers: one module per output format, all fed the same document.

A renderer is `render(document: dict, **options) -> str`; `document.build`
makes the document from a ScanResult (or a saved JSON report is read back),
so every format carries the same facts. Options a format does not take are
ignored by `render` (console: verbose, color, width; markdown: budget).
"""
from __future__ import annotations

from pathlib import Path

FORMATS = {"json": "json_format", "toml": "toml_format", "console": "console", "markdown": "markdown"}
EXTENSIONS = {".json": "json", ".toml": "toml", ".txt": "console", ".md": "markdown", ".markdown": "markdown"}


def format_for_path(path: str | Path) -> str | None:
    return EXTENSIONS.get(Path(path).suffix.lower())


def renderer(name: str):
    """The render function of a format, imported only when asked for."""
    import importlib

    return importlib.import_module(f"{__name__}.{FORMATS[name]}").render


def render(name: str, document: dict, **options) -> str:
    """Render `document` as format `name`, passing only the options that format takes."""
    import inspect  # here, not at start-up: ~4 ms of every command's start (the CLI imports this package)

    function = renderer(name)
    accepted = inspect.signature(function).parameters
    return function(document, **{k: v for k, v in options.items() if k in accepted})
