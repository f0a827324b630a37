"""Report renderers: one module per output format, all fed the same document.

A renderer is `render(document: dict, **options) -> str`; `document.build`
makes the document from a ScanResult (or a saved JSON report is read back),
so every format carries the same facts. Options a format does not take are
ignored by `render` (console: verbose, color, width; markdown: budget).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: output format -> the module that renders it; the CLI's --format choices, in this order
FORMATS = {"console": "console", "json": "json_format", "toml": "toml_format", "markdown": "markdown"}
EXTENSIONS = {".json": "json", ".toml": "toml", ".txt": "console", ".md": "markdown", ".markdown": "markdown"}
#: graph file extension -> graph format (report.graph_export writes them)
GRAPH_FORMATS = {".graphml": "graphml", ".dot": "dot", ".gv": "dot", ".json": "json"}


def format_for_path(path: str | Path) -> str | None:
    return EXTENSIONS.get(Path(path).suffix.lower())


def renderer(name: str) -> Callable[..., str]:
    """The render function of a format, imported only when asked for."""
    return importlib.import_module(f"{__name__}.{FORMATS[name]}").render


def render(name: str, document: dict, **options: Any) -> str:
    """Render `document` as format `name`, passing only the options that format takes."""
    import inspect  # only when rendering: `cuda4amd --help` imports this package for FORMATS

    function = renderer(name)
    accepted = inspect.signature(function).parameters
    return function(document, **{k: v for k, v in options.items() if k in accepted})
