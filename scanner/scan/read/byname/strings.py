"""Plain strings in the data: names ending in ``.dll``/``.so`` (ASCII and
UTF-16LE), and the whole strings (between NULs) of names assembled at run
time: heads, fragments and version templates, recorded in :class:`Seen`.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cuda4amd.model import NameReference
from cuda4amd.scan.read.byname.names import HIT, MAX_NAME, TEMPLATE, Classifier, names_in
from cuda4amd.scan.read.byname.tries import whole_matches

if TYPE_CHECKING:
    from cuda4amd.scan.read.binview import Buffer
    from cuda4amd.scan.read.byname.limits import Budget
    from cuda4amd.scan.read.byname.patterns import PlatformPatterns
    from cuda4amd.scan.read.byname.tries import Pass

__all__ = ["Seen", "marker_in", "scan_data", "scan_whole"]


@dataclass
class Seen:
    """What one pass over a binary's data found besides whole names."""

    heads: set[str]
    fragments: int = 0
    versioners: int = 0
    #: Cython's markers the whole-string passes saw
    markers: set[bytes] = field(default_factory=set)


def _utf16_text(raw: bytes | bytearray) -> str:
    """UTF-16LE bytes as text, every non-ASCII unit as a separator."""
    chars = raw[0::2]
    highs = raw[1::2]
    if highs.count(0) != len(highs):
        chars = bytes(c if h == 0 else 0 for c, h in zip(chars, highs, strict=False))
    return chars.decode("latin-1")


def _suffix_hit(buf: Buffer, lo: int, hi: int, p: int, q: int, classify: Classifier, skip: set[int],
                found: set[NameReference], heads: dict, seen: Seen) -> None:
    """A '.dll'/'.so' occurrence (ASCII or UTF-16LE) at [p, q): the name that
    ends there. A whole string that is one of ``heads``, the head of an
    assembled name ("libnvrtc.so." + version), is recorded in ``seen``."""
    if q - p <= 4:  # ".dll" / ".so"
        before = buf[max(lo, p - MAX_NAME):p].decode("latin-1")
        after = buf[q:min(hi, q + 48)].decode("latin-1")
        suffix = buf[p:q].decode("latin-1")
        if heads and after[:2] == ".\0" and _head_at(before, suffix, after, heads, seen):
            return  # "libnvrtc.so." is the start of a name, not the unversioned name
        hit = names_in(before, suffix, after, classify, glued=False)
        if hit is None:
            if heads:
                _head_at(before, suffix, after, heads, seen)
            return
        name, used = hit
        if p - used in skip:
            return
        found.add(NameReference(name, "ascii", bool(TEMPLATE.search(name))))
    else:
        k = min(MAX_NAME, (p - lo) // 2)
        before = _utf16_text(buf[p - 2 * k:p])
        end = min(hi, q + 96)
        after = _utf16_text(buf[q:end - (end - q) % 2])
        suffix = _utf16_text(buf[p:q])
        hit = names_in(before, suffix, after, classify, glued=False)
        if hit is not None:
            name = hit[0]
            found.add(NameReference(name, "utf-16le", bool(TEMPLATE.search(name))))


def _head_at(before: str, suffix: str, after: str, heads: dict, seen: Seen) -> bool:
    """``before + suffix`` (+ ".") as a whole NUL-bounded string that is a
    head: recorded in ``seen``; returns whether it was one."""
    start = before.rfind("\0") + 1
    if start == 0 and len(before) >= MAX_NAME:
        return False
    text = before[start:] + suffix
    if after[:1] == "." and after[1:2] == "\0":
        text += "."
    elif after[:1] != "\0":
        return False
    if text in heads:
        seen.heads.add(text)
        return True
    return False


def scan_data(buf: Buffer, segments: Iterable[tuple[int, int]], patterns: PlatformPatterns, classify: Classifier,
              skip: set[int], found: set[NameReference], seen: Seen, budget: Budget,
              merged: Pass | None = None) -> None:
    """The data between fat binary containers: one regex (ASCII and
    UTF-16LE at once) for names ending in .dll/.so, as before; heads that end
    in ".so"/".so." ("libnvrtc.so." + version) are recognised on the way.

    The other whole strings (bare stems, "cublas64_", fragments) are
    :func:`scan_whole`'s: it runs only over read-only data and only in
    binaries that load libraries themselves. Where these segments are also
    read-only data, ``merged`` (:meth:`WholeStrings.merged`) finds the
    suffixes and the whole strings whose anchor is "." in one pass."""
    if merged is None:
        for a, b in segments:
            for m in HIT.finditer(buf, a, b):
                budget.hit()
                _suffix_hit(buf, a, b, m.start(), m.end(), classify, skip, found, patterns.heads, seen)
        return
    regex, branches = merged
    for a, b in segments:
        for m in regex.finditer(buf, a, b):
            if m.start(1) >= 0:
                budget.hit()
                _suffix_hit(buf, a, b, m.start(), m.end(1), classify, skip, found, patterns.heads, seen)
            group = m.lastindex or 0
            if group > 1:
                offset, width = branches[(group - 2) % len(branches)]
                start = m.start(group) - offset
                if start >= a:
                    _record(buf, start, m.end(group), width, patterns.words, seen, budget)


def scan_whole(buf: Buffer, segments: Iterable[tuple[int, int]], patterns: PlatformPatterns,
               passes: tuple[Pass, ...], seen: Seen, budget: Budget) -> None:
    """Stems, heads, fragments and version templates as whole strings in the
    segments (read-only data, fat binary containers skipped). A string may
    start right at a segment's start: its NUL (two for UTF-16) is the byte
    before (a string at the very start of a section follows the previous
    section's padding); it must end before the segment's end."""
    for a, b in segments:
        for start, end, width in whole_matches(buf, max(0, a - 2), b, passes, a):
            _record(buf, start, end, width, patterns.words, seen, budget)


def _record(buf: Buffer, start: int, end: int, width: int, words: dict[str, tuple[bool, str]], seen: Seen,
            budget: Budget) -> None:
    """What the whole string (or marker: ``width`` 0) at [start, end) means."""
    if width == 0:
        budget.marker()
        seen.markers.add(bytes(buf[start:end]))  # hashable where buf is a bytearray
        return
    if width == 2:
        budget.hit()
        seen.heads.add(buf[start:end].decode("utf-16-le"))
        return
    word = buf[start:end].decode("latin-1")
    head, glue = words[word]
    if head:  # as many hits as the three separate regexes once counted
        budget.hit()
        seen.heads.add(word)
    if glue:
        budget.hit()
        if glue == "versioner":
            seen.versioners += 1
        else:
            seen.fragments += 1


def marker_in(buf: Buffer, marker: bytes, ranges: list[tuple[int, int]],
              segments: dict[tuple[int, int], list[tuple[int, int]]], seen: Seen) -> bool:
    """Whether ``marker`` occurs in the ranges (as ``buf.find(marker, lo, hi)``),
    the passes having looked inside the segments: the rest is what an
    occurrence off the segments (in or across a container or the padding
    between two) can touch."""
    if marker in seen.markers:
        return True
    reach = len(marker) - 1
    for lo, hi in ranges:
        edge = lo
        for a, b in [*segments[(lo, hi)], (hi, hi)]:
            if a > edge and buf.find(marker, max(lo, edge - reach), min(hi, a + reach)) >= 0:
                return True
            edge = b
    return False
