"""The first-run note: how much PTX ZLUDA will compile and where it keeps the result.

ZLUDA compiles one PTX per module a program loads — the last PTX of the
module's fat binary that parses (vosen/ZLUDA v6, zluda/src/impl/module.rs:80-133,
``get_best_ptx_and_compile``) — and keeps the machine code in a cache keyed by
the PTX, the GPU and ZLUDA's version (module.rs:157-176), so only the first
run pays. The cache is ``dirs::cache_dir()/zluda/ComputeCache/zluda2.db``
(zluda_cache/src/lib.rs:24-32 at v6; ``zluda.db`` at v5): on Windows
%LOCALAPPDATA%, on Linux $XDG_CACHE_HOME or ~/.cache (the ``dirs`` crate's
cache_dir). A program with much PTX can look hung on its first run while it
compiles.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cuda4amd.model import platform_of

__all__ = ["CACHE_PATHS", "first_run"]

CACHE_PATHS = {
    "windows": r"%LOCALAPPDATA%\zluda\ComputeCache\zluda2.db",
    "linux": "${XDG_CACHE_HOME:-~/.cache}/zluda/ComputeCache/zluda2.db",
}
#: above this much PTX, say that the first run may take minutes (a round number, not a measurement)
LONG_FIRST_RUN_BYTES = 50 << 20


def first_run(verdicts: Iterable[Any]) -> dict[str, Any] | None:
    """The note for a scan's binaries (None when no binary carries PTX ZLUDA can use)."""
    binaries = containers = entries = 0
    size = 0
    platforms = set()
    for v in verdicts:
        kernels = getattr(v.binary, "kernels", None)
        if not getattr(v, "loaded", True):  # it never loads under ZLUDA: its PTX is never compiled
            continue
        if kernels is None or kernels.state != "ptx-available":
            continue
        ptx = [e for e in kernels.entries if e.kind == "ptx" and not e.relocatable]
        if not ptx:
            continue
        binaries += 1
        containers += min(max(1, kernels.containers), len(ptx))  # a container holds at least one of the PTX
        entries += len(ptx)
        size += sum(e.uncompressed_size or e.size for e in ptx)
        platforms.add(platform_of(v.binary.info.format))
    if not binaries:
        return None
    platform = "windows" if platforms == {"windows"} else "linux" if platforms == {"linux"} else None
    return {
        "binaries": binaries,
        "modules": containers,  # fat-binary containers: ZLUDA compiles one PTX for each the program loads
        "ptx_entries": entries,
        "ptx_bytes": size,
        "long": size >= LONG_FIRST_RUN_BYTES,
        "cache": CACHE_PATHS.get(platform or "") if platform else dict(CACHE_PATHS),
    }
