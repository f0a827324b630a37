"""Python project names compared the way pip compares them.

PEP 503 ("Normalized Names", https://peps.python.org/pep-0503/#normalized-names):
a name is normalised by ``re.sub(r"[-_.]+", "-", name).lower()``, so
"Cupy_CUDA12x", "cupy-cuda12x" and "cupy.cuda12x" are one project. Both the
rules (framework and generator files name distributions) and the scan (the
installed distributions' METADATA) compare names this way, so it sits below
both.
"""
from __future__ import annotations

import functools
import re

__all__ = ["canonical_name"]

_SEPARATORS = re.compile(r"[-_.]+")


@functools.lru_cache(maxsize=8192)  # asked for each (distribution, framework rule) pair: 16,000 times on a real venv
def canonical_name(name: str) -> str:
    """PEP 503 normalised project name: "Cupy_CUDA12x" -> "cupy-cuda12x".

    A '-' left at either end is dropped as well, which PEP 503's expression
    does not do; this is how the scan has always compared names."""
    return _SEPARATORS.sub("-", name).lower().strip("-")
