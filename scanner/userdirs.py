"""The per-user folders, outside every target.

The cache folder holds the ZLUDA downloads (fix/release.py) and the facts
folder: ``$CUDA4AMD_CACHE``, else platformdirs' user cache
folder for cuda4amd: ``%LOCALAPPDATA%\\cuda4amd`` on Windows,
``$XDG_CACHE_HOME/cuda4amd`` or ``~/.cache/cuda4amd`` on Linux,
``~/Library/Caches/cuda4amd`` on macOS.

The facts folder holds what was worked out from files' bytes and can be worked
out again: the facts of binaries (scan/read/cache.py): ``$CUDA4AMD_FACTS_CACHE``,
else ``facts`` in the cache folder.

The state folder holds the journal key and the target locks (fix/state.py,
fix/lock.py).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["CACHE_VARIABLE", "FACTS_VARIABLE", "cache_dir", "facts_dir", "state_dir"]

CACHE_VARIABLE = "CUDA4AMD_CACHE"
FACTS_VARIABLE = "CUDA4AMD_FACTS_CACHE"


def cache_dir() -> Path:
    """The per-user cache folder (see the module docstring)."""
    env = os.environ.get(CACHE_VARIABLE)
    if env:
        return Path(env).expanduser()
    # imported here, when a scan opens the facts cache or a fix the download cache: ~2 ms once the
    # scanner is loaded (~7 ms in a bare interpreter; docs/performance.md)
    import platformdirs

    return Path(platformdirs.user_cache_dir("cuda4amd", appauthor=False, opinion=False))


def facts_dir() -> Path:
    """The facts folder (see the module docstring)."""
    env = os.environ.get(FACTS_VARIABLE)
    if env:
        return Path(env).expanduser()
    return cache_dir() / "facts"


def state_dir() -> Path:
    """The per-user state folder (XDG Base Directory spec: $XDG_STATE_HOME,
    default ~/.local/state; Windows: %LOCALAPPDATA%). Written out rather than
    taken from platformdirs, whose Windows answer comes from the known-folder
    API instead of %LOCALAPPDATA%: the journal key must stay where the journals
    of existing fixes were signed, or they can no longer be undone."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    else:
        base = os.environ.get("XDG_STATE_HOME") or ""
        if not os.path.isabs(base):  # the spec: a relative value is invalid and ignored
            base = str(Path.home() / ".local" / "state")
    return Path(base) / "cuda4amd"
