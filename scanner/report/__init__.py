"""Report renderers: one module per output format, all fed the same document.

A renderer is `render(document: dict) -> str`; `document.build` makes the
document from a ScanResult, so every format carries the same facts.
"""
from __future__ import annotations

import importlib
from pathlib import Path

FORMATS = {"json": "json_format", "toml": "toml_format", "console": "console"}
EXTENSIONS = {".json": "json", ".toml": "toml", ".txt": "console"}


def format_for_path(path: str | Path) -> str | None:
    return EXTENSIONS.get(Path(path).suffix.lower())


def renderer(name: str):
    """The render function of a format, imported only when asked for."""
    return importlib.import_module(f"{__name__}.{FORMATS[name]}").render
