"""Counted nouns in what people read: "1 binary", "2 binaries", never "1 binaries" or "file(s)"."""
from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, word: str, plural: str | None = None) -> str:
    """`n` and `word`, in the plural unless `n` is 1 (`plural`, else `word` + "s")."""
    return f"{n} {word if n == 1 else (plural or word + 's')}"
