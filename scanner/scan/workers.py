"""Worker processes: how many this process may use, and how to start them.

Shared by the stages that spread work over cores (discovery's walk and the
read stage), so both start workers the same way.
"""
from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

__all__ = ["forks", "process_context", "usable_cores"]


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def forks() -> bool:
    """Whether workers start by fork: safe (no other thread could hold a lock in the child) and cheap."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def process_context(preload: tuple[str, ...] = ()) -> BaseContext:
    """fork where it is safe and cheap; else a fork server that imports ``preload`` once; else a fresh interpreter."""
    import multiprocessing

    if forks():
        return multiprocessing.get_context("fork")
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        if preload:
            context.set_forkserver_preload(list(preload))
        return context
    return multiprocessing.get_context("spawn")
