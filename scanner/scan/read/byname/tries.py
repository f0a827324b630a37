"""Regexes for many strings at once: tries of alternatives, and the anchor
bytes (a cover) that let sre skip to where a string can start.

sre's fast path is a regex that starts with a literal byte: it skips to the
next such byte at about 0.35 ns a byte. A regex that starts with a NUL (the
whole strings between NULs) tries a match at each of the NULs that make up
a third of a typical .rodata (10 to 20 ns each). So the whole strings are
found by a few regexes that each start with one *anchor* byte, chosen so
that every string holds one (``c``, ``n``, ``b``, ``.``:
:func:`anchored_passes`), each string checked against its NULs by a
lookbehind and a lookahead; where NULs are few (text) the NUL-led regexes
(:func:`nul_passes`) are cheaper.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda4amd.scan.read.binview import Buffer

__all__ = ["Pass", "anchored_passes", "cover_of", "holds_whole", "nul_passes", "whole_matches", "wide"]

#: One whole-string pass: its regex, and per capturing group how many bytes
#: before the group the string starts and its bytes per character (1: ASCII,
#: 2: UTF-16LE). The last group that matched says which string it is.
Pass = tuple["re.Pattern[bytes]", tuple[tuple[int, int], ...]]


def _trie_regex(words: Iterable[bytes]) -> bytes:
    """An alternation of ``words`` factored into a trie, so the regex engine
    decides each position on one byte at a time instead of trying every
    word."""
    trie: dict = {}
    for word in words:
        node = trie
        for byte in word:
            node = node.setdefault(byte, {})
        node[None] = {}

    def build(node: dict) -> bytes:
        ends = None in node
        branches = [re.escape(bytes([b])) + build(child) for b, child in sorted(
            ((b, c) for b, c in node.items() if b is not None))]
        if not branches:
            return b""
        body = branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"
        if ends:
            return b"(?:" + body + b")?"
        return body

    return build(trie)


def _trie_group(strings: list[bytes]) -> bytes:
    return b"(" + _trie_regex(strings) + b")"


def nul_passes(ascii_words: list[bytes], wide_words: list[bytes]) -> tuple[Pass, ...]:
    """The NUL-led plan: one regex per encoding, each string between NULs
    (the way the search was first written; cheap where NULs are few)."""
    passes: list[Pass] = []
    if ascii_words:
        regex = re.compile(b"\x00" + _trie_group(ascii_words) + b"(?=\x00)", re.DOTALL)
        passes.append((regex, ((0, 1),)))
    if wide_words:
        regex = re.compile(b"\x00\x00" + _trie_group([wide(w) for w in wide_words]) + b"(?=\x00\x00)",
                           re.DOTALL)
        passes.append((regex, ((0, 2),)))
    return tuple(passes)


def anchored_passes(ascii_words: list[bytes], wide_words: list[bytes],
                    anchors: tuple[int, ...], markers: Iterable[bytes] = ()) -> tuple[Pass, ...]:
    """The anchored plan: one regex per anchor byte (every string contains
    one of ``anchors``), for the strings whose first anchor byte it is.

    Each regex starts with its anchor as a literal: sre then skips to the
    next anchor byte in a tight loop instead of starting a match at every
    NUL. After the anchor, a trie of what follows it in the strings; each
    string ends in a lookbehind for the whole string with the NUL(s) before
    it, a lookahead for the NUL(s) after and an empty group that names it.
    A string is looked for only at its first anchor byte, so each occurrence
    matches once (strings between NULs never overlap). A lookbehind may look
    before the searched range: the caller checks where the string starts.

    ``markers`` (each with an anchor byte): text looked for anywhere, not
    between NULs, reported with 0 bytes per character. They hold no NUL, so
    they never overlap a string between NULs."""
    if wide_words and any(len(w) < 2 for w in ascii_words):
        # a one-byte string between NULs also sits inside UTF-16 text: its own passes, or
        # one match would hide the other
        return anchored_passes(ascii_words, [], anchors, markers) + anchored_passes([], wide_words, anchors)
    grouped: dict[int, list[tuple[bytes, bytes, int]]] = {}
    for word, width in sorted({(w, 1) for w in ascii_words} | {(w, 2) for w in wide_words}
                              | {(m, 0) for m in markers}):
        k = min(word.index(a) for a in anchors if a in word)
        grouped.setdefault(word[k], []).append((word, word[k + 1:], width))
    passes: list[Pass] = []
    for anchor in sorted(grouped):
        leaves = []
        for word, rest, width in grouped[anchor]:
            if width == 0:
                leaf = b"(?<=" + re.escape(word) + b")()"
                leaves.append((rest, leaf, (len(word), width)))
                continue
            if width == 1:
                behind, ahead = b"\x00" + word, b"\x00"
            else:  # the rest starts with the anchor's high byte
                behind, ahead = b"\x00\x00" + wide(word), b"\x00\x00"
                rest = b"\x00" + wide(rest)
            leaf = b"(?<=" + re.escape(behind) + b")(?=" + re.escape(ahead) + b")()"
            leaves.append((rest, leaf, (width * len(word), width)))
        body, branches = _leaf_trie(leaves)
        passes.append((re.compile(re.escape(bytes([anchor])) + body, re.DOTALL), branches))
    return tuple(passes)


def _leaf_trie(entries: list[tuple[bytes, bytes, tuple[int, int]]]) -> tuple[bytes, tuple[tuple[int, int], ...]]:
    """A trie of the ``(text, leaf, branch)`` entries' texts, each ending in
    its leaf pattern (one capturing group); returns it and the branches in
    the order of their groups. Alternatives start with their literal byte
    where they can (sre rejects those without entering them); leaves last."""
    trie: dict = {}
    for text, leaf, branch in entries:
        node = trie
        for byte in text:
            node = node.setdefault(byte, {})
        node.setdefault(None, []).append((leaf, branch))
    branches: list[tuple[int, int]] = []

    def build(node: dict) -> bytes:
        alternatives = [re.escape(bytes([b])) + build(child) for b, child in sorted(
            ((b, c) for b, c in node.items() if b is not None))]
        for leaf, branch in node.get(None, []):
            alternatives.append(leaf)
            branches.append(branch)
        return alternatives[0] if len(alternatives) == 1 else b"(?:" + b"|".join(alternatives) + b")"

    return build(trie), tuple(branches)


def wide(text: bytes) -> bytes:
    """``text`` (Latin-1) as UTF-16LE."""
    return text.decode("latin-1").encode("utf-16-le")


def cover_of(words: Iterable[bytes], cost: dict[int, float] | None = None) -> tuple[int, ...]:
    """Anchor bytes such that every word contains one, sorted: greedy, the
    byte with the least cost per word not yet covered first (without
    ``cost``: the byte most words contain; ties to the lower byte); then
    each byte that the others make redundant is dropped."""
    left = {w for w in words if w}  # the rules refuse empty strings
    chosen: list[int] = []
    while left:
        counts: dict[int, int] = {}
        for word in left:
            for byte in set(word):
                counts[byte] = counts.get(byte, 0) + 1
        best = min(counts, key=lambda b: ((cost[b] if cost else 1.0) / counts[b], b))
        chosen.append(best)
        left = {w for w in left if best not in w}
    everything = {w for w in words if w}
    for byte in sorted(chosen, key=lambda b: -(cost[b] if cost else 0.0)):
        rest = [a for a in chosen if a != byte]
        if all(any(a in w for a in rest) for w in everything):
            chosen = rest
    return tuple(sorted(chosen))


def whole_matches(buf: Buffer, lo: int, hi: int, passes: tuple[Pass, ...],
                  first: int) -> Iterator[tuple[int, int, int]]:
    """(start, end, bytes per character) of the passes' strings in [lo, hi)
    that start at ``first`` or later (their NULs before may lie before lo;
    the NULs after lie before hi)."""
    for regex, branches in passes:
        for m in regex.finditer(buf, lo, hi):
            group = m.lastindex or 0
            offset, width = branches[group - 1]
            start = m.start(group) - offset
            if start >= first:
                yield start, m.end(group), width


def holds_whole(buf: Buffer, ranges: Iterable[tuple[int, int]], passes: tuple[Pass, ...]) -> bool:
    """Whether some range holds one of the passes' strings whole, its NULs
    inside the range (as ``buf.find(b"\\0" + string + b"\\0", lo, hi)``)."""
    return any(next(whole_matches(buf, lo, hi, passes, lo + 1), None) for lo, hi in ranges)
