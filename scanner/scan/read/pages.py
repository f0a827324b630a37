"""Handing back the pages of a file mapping that a search has read.

A search over a mapped section leaves every page it read resident in this
process until the mapping is closed: a by-name search of libllvmlite.so's
59 MiB .rodata held 63 MB, and at the peak of a 16-worker scan of a real venv
seven workers held 25 to 63 MB each (docs/performance.md). The mappings are
read-only views of files (``ACCESS_READ``, never privately modified), so
``MADV_DONTNEED`` only drops them from the process: a page touched again is
mapped again from the page cache, with the file's bytes. Where there is no
``madvise`` (Windows) or the buffer is not a mapping, nothing is done.

A walk from header to header of a file that is not in the page cache reads
the disk one page fault at a time; :meth:`Pages.ask` asks for many such
pages at once (``MADV_WILLNEED``), and :func:`disk_faults` tells a walk
whether it is reading the disk at all.
"""
from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda4amd.scan.read.binview import Buffer

try:
    import resource
except ImportError:  # Windows: no page faults counted, and no madvise either
    resource = None  # type: ignore[assignment]

__all__ = ["CHUNK", "Pages", "disk_faults"]

#: Bytes a search reads before it hands back what lies behind it.
CHUNK = 8 << 20
_CAN_ADVISE = all(hasattr(mmap, n) for n in ("MADV_DONTNEED", "MADV_RANDOM", "MADV_NORMAL")) and hasattr(
    mmap.mmap, "madvise"
)


class Pages:
    """The pages of one buffer, handed back (or advised) by file range."""

    __slots__ = ("buf", "enabled", "size")

    def __init__(self, buf: Buffer) -> None:
        self.buf: Any = buf  # madvise is called only when it is an mmap (enabled)
        self.size = len(buf)
        self.enabled = _CAN_ADVISE and isinstance(buf, mmap.mmap)

    def release(self, start: int, end: int) -> None:
        """Drop the resident pages in [start, end), from the page holding ``start``
        (a page touched again is simply read again)."""
        if not self.enabled:
            return
        page = mmap.PAGESIZE
        a = start - start % page
        b = min(end, self.size)
        b -= b % page
        if b > a:
            try:
                self.buf.madvise(mmap.MADV_DONTNEED, a, b - a)
            except (OSError, ValueError):
                self.enabled = False

    def advisable(self, start: int, end: int) -> bool:
        """Whether :meth:`advise` advises [start, end): a range of more than CHUNK bytes of a mapping."""
        return self.enabled and end - start > CHUNK

    def advise(self, start: int, end: int, advice: str) -> None:
        """``madvise`` [start, end) with the named advice (``MADV_RANDOM``,
        ``MADV_NORMAL``), for ranges of more than CHUNK bytes."""
        if self.advisable(start, end):
            a = start - start % mmap.PAGESIZE
            with contextlib.suppress(OSError, ValueError):
                self.buf.madvise(getattr(mmap, advice), a, end - a)

    def ask(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Ask for the pages that hold each [start, end) (``MADV_WILLNEED``, one call per run of adjacent
        pages): the kernel starts reading all of them from the disk at once, where touching them one
        after another would wait for each in turn."""
        if not self.enabled or not hasattr(mmap, "MADV_WILLNEED"):
            return
        page = mmap.PAGESIZE
        runs: list[list[int]] = []  # [first page, last page + 1], merged where they touch
        for first, last in sorted((max(0, a) // page, (min(b, self.size) - 1) // page + 1) for a, b in ranges
                                  if b > a and a < self.size):
            if runs and first <= runs[-1][1]:
                runs[-1][1] = max(runs[-1][1], last)
            else:
                runs.append([first, last])
        for first, last in runs:
            try:
                self.buf.madvise(mmap.MADV_WILLNEED, first * page, min(last * page, self.size) - first * page)
            except (OSError, ValueError):
                return


def disk_faults() -> int:
    """This process's page faults so far that had to read the disk (major faults); 0 where the OS
    does not count them (Windows)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt if resource is not None else 0
