"""Words people read: counted nouns ("1 binary", "2 binaries", never "1 binaries" or "file(s)"), and advice
said once (docs/exit-status.md, the verdict contract: no switch twice in one cell or section)."""
from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["counted", "said_once", "settings"]

#: an environment setting as advice lines write it: `TORCHDYNAMO_DISABLE=1`, `XLA_FLAGS="…"`
_SETTING = re.compile(r"\b([A-Z][A-Z0-9_]{2,})=(\"[^\"]*\"|'[^']*'|[^\s,;:()`]+)")


def counted(n: int, word: str, plural: str | None = None) -> str:
    """`n` and `word`, in the plural unless `n` is 1 (`plural`, else `word` + "s")."""
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def settings(line: str) -> frozenset[str]:
    """The environment settings (`NAME=VALUE`) a line of advice names."""
    return frozenset(f"{name}={value}" for name, value in _SETTING.findall(line))


def said_once(lines: Iterable[str]) -> list[str]:
    """`lines` in order, without repeats: a line said before, or one whose settings were all said by the
    lines before it (the same switch from a framework rule and from a code generator's)."""
    kept: list[str] = []
    said: set[str] = set()
    for line in lines:
        named = settings(line)
        if line in kept or (named and named <= said):
            continue
        kept.append(line)
        said |= named
    return kept
