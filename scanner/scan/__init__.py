"""The scan pipeline, one module per stage:

    discover → read/ → graph → classify → verdict → packages

    from cuda4amd.scan import ScanOptions, run_scan
    result = run_scan(ScanOptions(target="C:/Apps/Tool"))

`pipeline` runs the stages. Importing this package is free: `run_scan` and
its data classes load on first use (PEP 562), so a stage module can be
imported without pulling in the whole pipeline.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda4amd.scan.pipeline import Progress, ScanOptions, ScanResult, run_scan
    from cuda4amd.scan.read.stage import read_all

__all__ = ["Progress", "ScanOptions", "ScanResult", "read_all", "run_scan"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = "cuda4amd.scan.read.stage" if name == "read_all" else "cuda4amd.scan.pipeline"
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
