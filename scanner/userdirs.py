"""The per-user cache folder: the ZLUDA downloads (fix/release.py) and the facts cache (scan/read/cache.py).

``$CUDA4AMD_CACHE``, else platformdirs' user cache folder for cuda4amd:
``%LOCALAPPDATA%\\cuda4amd`` on Windows, ``$XDG_CACHE_HOME/cuda4amd`` or
``~/.cache/cuda4amd`` on Linux, ``~/Library/Caches/cuda4amd`` on macOS.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_VARIABLE", "cache_dir"]

CACHE_VARIABLE = "CUDA4AMD_CACHE"


def cache_dir() -> Path:
    """The per-user cache folder (see the module docstring)."""
    env = os.environ.get(CACHE_VARIABLE)
    if env:
        return Path(env).expanduser()
    # imported here, when a scan opens the facts cache or a fix the download cache: ~2 ms once the
    # scanner is loaded (~7 ms in a bare interpreter; docs/performance.md)
    import platformdirs

    return Path(platformdirs.user_cache_dir("cuda4amd", appauthor=False, opinion=False))
