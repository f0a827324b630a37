"""Cython's compressed string table: found, decompressed, and its names.

Cython 3.1 keeps plain C strings. Cython 3.2 and later concatenate every
Python string constant of a module (no separators; lengths in a separate
index) into one blob and compress it when that saves bytes; the blob is a C
string literal in ``.rdata``/``.rodata`` and is inflated at import time:

* Cython 3.2.x: zlib (level 9, header ``78 DA``) by default
  (``CYTHON_COMPRESS_STRINGS=1``); bz2 (``BZh9``) with ``=2``; zstd with ``=3``
  (Python >= 3.14 only). Helper ``__Pyx_DecompressString`` carries the message
  "... cannot initialise module strings ...".
* Cython 3.3.x: its own headerless LZSS by default (``=90``; message "LZSS
  string data decompression failed"); zlib/bz2/zstd only if they are smaller
  *and* the builder sets the macro.

Only binaries that contain one of those two messages (in ``.rdata``/
``.rodata``) are searched. zlib/bz2 blobs are found by their header, inflated
by the standard library's decompressors with a 16 MB output cap and accepted
only if the stream ends cleanly (checksum verified) right before the
literal's NUL terminator (or the section end). LZSS blobs (lzss.py) are
accepted when the first 64 output bytes are (mostly) text and the output
contains a Cython boilerplate name (``cline_in_traceback``, ``__main__`` or
``__name__``). Checked against zlib-built twins of the same modules: the
LZSS output starts with exactly the zlib table; the few bytes decoded past
the table's end are copies of the table or of the plain strings that follow,
which the plain scan sees anyway. zstd is not decoded (Python < 3.14 has no
zstd and Cython emits it only on request).

Names in the decompressed table are reported with encoding "cython-zlib",
"cython-bz2" or "cython-lzss"; as the strings are glued together
(``...driver.pyxlibcuda.so.1nvcuda.dll...`` in cupy), every start position
inside a run is tried (Linux: where "lib" starts; Windows: at a letter) and
every cut of a ``.so`` version tail (names.names_in, ``glued``). A corrupt
compressed blob is skipped silently (it is not a Cython table, or not one we
can read).
"""
from __future__ import annotations

import bz2
import zlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Union

from cuda4amd.model import NameReference
from cuda4amd.scan.read.byname import lzss
from cuda4amd.scan.read.byname.limits import MAX_INFLATE, Budget
from cuda4amd.scan.read.byname.names import HIT_ASCII, MAX_NAME, TEMPLATE, Classifier, names_in
from cuda4amd.scan.read.byname.sections import pieces
from cuda4amd.scan.read.pages import Pages

if TYPE_CHECKING:
    from cuda4amd.scan.read.binview import Buffer

__all__ = ["LZSS_MARKER", "ZLIB_MARKER", "cython_markers", "cython_tables", "scan_table"]

ZLIB_MARKER = b"cannot initialise module strings"  # Cython >= 3.2, __Pyx_DecompressString
LZSS_MARKER = b"LZSS string data decompression failed"  # Cython >= 3.3
ZLIB_HEADER = b"\x78\xda"  # deflate, 32K window, level 9 (what Cython writes)
BZ2_HEADER = b"BZh9"
BZ2_BLOCK = b"1AY&SY"
CYTHON_BOILERPLATE = (b"cline_in_traceback", b"__main__", b"__name__")

_Decompressor = Union["zlib._Decompress", bz2.BZ2Decompressor]


def _inflate(buf: Buffer, start: int, hi: int, make: Callable[[], _Decompressor]) -> tuple[bytes, int] | None:
    """Decompress the stream at ``start`` (zlib or bz2 decompressor from
    ``make()``), reading at most up to ``hi``. Returns (output, end offset)
    if it ends cleanly before a NUL (or at ``hi``), else None."""
    d = make()
    out = []
    produced = 0
    pos = start
    chunk = 512
    try:
        while pos < hi:
            piece = buf[pos:min(hi, pos + chunk)]
            pos += len(piece)
            chunk = min(chunk * 4, 1 << 20)
            data = d.decompress(piece, MAX_INFLATE + 1 - produced)
            produced += len(data)
            out.append(data)
            if produced > MAX_INFLATE:
                return None
            if d.eof:
                end = pos - len(d.unused_data)
                if end < hi and buf[end] != 0:
                    return None
                return b"".join(out), end
            if isinstance(d, bz2.BZ2Decompressor):
                if not d.needs_input:
                    return None  # output cap reached
            elif d.unconsumed_tail:
                return None  # output cap reached
    except (zlib.error, OSError, EOFError, ValueError):
        return None
    return None


def _texty(data: bytes) -> bool:
    """Mostly printable text (the table starts with str constants)."""
    if not data:
        return False
    bad = sum(1 for b in data if (b < 0x20 and b not in (9, 10, 13)) or b == 0x7F)
    return bad * 8 <= len(data)


def _lzss_tables(buf: Buffer, lo: int, hi: int, budget: Budget) -> Iterator[bytes]:
    skip_to = lo
    for start in lzss.candidates(buf, lo, hi):
        if start < skip_to:
            continue
        # The first 64 bytes of output: the format's rules and text.
        budget.attempt()
        if lzss.ends_young(buf, start, hi):
            continue
        head, _ = lzss.decode(buf, start, min(hi, start + 80))
        if len(head) < 16 or not _texty(head[:64]):
            continue
        data, end = lzss.decode(buf, start, hi)
        budget.inflate(len(data))
        if any(word in data for word in CYTHON_BOILERPLATE):
            yield data
            skip_to = end


def cython_markers(buf: Buffer, ranges: list[tuple[int, int]], pages: Pages) -> tuple[bool, bool]:
    """Whether the ranges hold Cython's zlib and LZSS markers: both looked for in
    one pass over the pieces, each piece searched for both while its pages are
    mapped, until both are found."""
    zlib_ok = lzss_ok = False
    for lo, hi in pieces(buf, ranges, pages):
        zlib_ok = zlib_ok or buf.find(ZLIB_MARKER, lo, hi) >= 0
        lzss_ok = lzss_ok or buf.find(LZSS_MARKER, lo, hi) >= 0
        if zlib_ok and lzss_ok:
            break
    return zlib_ok, lzss_ok


def cython_tables(buf: Buffer, ranges: list[tuple[int, int]],
                  budget: Budget | None = None,
                  markers: tuple[bool, bool] | None = None,
                  pages: Pages | None = None) -> Iterator[tuple[str, bytes]]:
    """(encoding, decompressed table) of every Cython string blob found.
    ``markers``: (zlib, lzss) marker seen, when the caller's pass looked; else the
    ranges are searched for them in pieces (neither holds a NUL: none crosses a cut)."""
    budget = budget or Budget()
    if markers is None:
        zlib_ok, lzss_ok = cython_markers(buf, ranges, pages or Pages(buf))
    else:
        zlib_ok, lzss_ok = markers
    if zlib_ok:
        for lo, hi in ranges:
            for header, make, encoding, check in (
                (ZLIB_HEADER, zlib.decompressobj, "cython-zlib", None),
                (BZ2_HEADER, bz2.BZ2Decompressor, "cython-bz2", BZ2_BLOCK),
            ):
                i = buf.find(header, lo, hi)
                while i >= 0:
                    nxt = i + 1
                    if check is None or buf[i + 4:i + 4 + len(check)] == check:
                        budget.attempt()
                        got = _inflate(buf, i, hi, make)
                        if got is not None:
                            budget.inflate(len(got[0]))
                            yield encoding, got[0]
                            nxt = max(nxt, got[1])
                    i = buf.find(header, nxt, hi)
    if lzss_ok:
        for lo, hi in ranges:
            for data in _lzss_tables(buf, lo, hi, budget):
                yield "cython-lzss", data


def scan_table(data: bytes, encoding: str, classify: Classifier,
               found: set[NameReference]) -> None:
    """Names in a decompressed Cython string table (strings glued together)."""
    for m in HIT_ASCII.finditer(data):
        p, q = m.start(), m.end()
        before = data[max(0, p - MAX_NAME):p].decode("latin-1")
        after = data[q:q + 48].decode("latin-1")
        hit = names_in(before, m.group().decode("latin-1"), after, classify, glued=True)
        if hit is not None:
            found.add(NameReference(hit[0], encoding, bool(TEMPLATE.search(hit[0]))))
