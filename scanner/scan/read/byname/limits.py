"""Work limits of the by-name search of one binary.

A real binary stays far below each; going over one means a hostile file and
raises :class:`~cuda4amd.scan.read.binview.MalformedBinary`.
"""
from __future__ import annotations

from cuda4amd.scan.read.binview import MalformedBinary

__all__ = ["MAX_ATTEMPTS", "MAX_HITS", "MAX_INFLATE", "MAX_INFLATED_TOTAL", "MAX_MARKERS", "Budget"]

#: '.dll'/'.so' occurrences examined per binary at most (real binaries have
#: hundreds; a file made of ".so.so.so" would otherwise cost minutes).
MAX_HITS = 200_000
#: Decompressed output cap per Cython blob.
MAX_INFLATE = 16 * 1024 * 1024
#: Per binary: decompression attempts (candidate blob starts) and total
#: decompressed bytes (a real module has one table of some KB).
MAX_ATTEMPTS = 100_000
MAX_INFLATED_TOTAL = 64 * 1024 * 1024
#: Occurrences of Cython's markers seen by the whole-string passes, per binary
#: (a module has one of each; each costs a Python step, a find for one did not).
MAX_MARKERS = 1000


class Budget:
    """The limits left for one binary."""

    __slots__ = ("attempts", "hits", "inflated", "markers")

    def __init__(self) -> None:
        self.hits = MAX_HITS
        self.attempts = MAX_ATTEMPTS
        self.inflated = MAX_INFLATED_TOTAL
        self.markers = MAX_MARKERS

    def marker(self) -> None:
        self.markers -= 1
        if self.markers < 0:
            raise MalformedBinary(
                f"more than {MAX_MARKERS} copies of Cython's string-table markers (hostile file?)")

    def hit(self) -> None:
        self.hits -= 1
        if self.hits < 0:
            raise MalformedBinary(
                f"more than {MAX_HITS} '.dll'/'.so' strings in the data sections (hostile file?)")

    def attempt(self) -> None:
        self.attempts -= 1
        if self.attempts < 0:
            raise MalformedBinary(
                f"more than {MAX_ATTEMPTS} candidate compressed string tables (hostile file?)")

    def inflate(self, nbytes: int) -> None:
        self.inflated -= nbytes
        if self.inflated < 0:
            raise MalformedBinary(
                f"compressed string tables inflate to more than {MAX_INFLATED_TOTAL >> 20} MB (hostile file?)")
