"""Handing back the pages of a file mapping that a search has read.

A search over a mapped section leaves every page it read resident in this
process until the mapping is closed: a by-name search of libllvmlite.so's
59 MiB .rodata held 63 MB, and at the peak of a 16-worker scan of a real venv
seven workers held 25 to 63 MB each (docs/performance.md). The mappings are
read-only views of files (``ACCESS_READ``, never privately modified), so
``MADV_DONTNEED`` only drops them from the process: a page touched again is
mapped again from the page cache, with the file's bytes. Where there is no
``madvise`` (Windows) or the buffer is not a mapping, nothing is done.
"""
from __future__ import annotations

import mmap

__all__ = ["CHUNK", "Pages"]

#: Bytes a search reads before it hands back what lies behind it.
CHUNK = 8 << 20
_CAN_ADVISE = all(hasattr(mmap, n) for n in ("MADV_DONTNEED", "MADV_RANDOM", "MADV_NORMAL")) and hasattr(
    mmap.mmap, "madvise"
)


class Pages:
    """The pages of one buffer, handed back (or advised) by file range."""

    __slots__ = ("buf", "size", "enabled")

    def __init__(self, buf) -> None:
        self.buf = buf
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

    def advise(self, start: int, end: int, advice: str) -> None:
        """``madvise`` [start, end) with the named advice (``MADV_RANDOM``,
        ``MADV_NORMAL``), for ranges of more than CHUNK bytes."""
        if self.enabled and end - start > CHUNK:
            a = start - start % mmap.PAGESIZE
            try:
                self.buf.madvise(getattr(mmap, advice), a, end - a)
            except (OSError, ValueError):
                pass
