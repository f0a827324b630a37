"""Cython 3.3's LZSS: the decoder, and where a blob may start.

No standard-library or allowed codec decodes it: it is Cython's own
headerless format (Cython/Utility/StringTools.c, ``__pyx_lzss_decompress``),
neither zlib/deflate, bz2, lzma, lz4 nor zstd. A blob has no header (and no
lengths: those are immediates in the code), so candidates are positions
right after a NUL or on a 16-byte boundary whose first flag byte announces
three literals (a back-reference needs 3 bytes of history), decoded under
the format's rules (every back-reference must point into the output so far).
LZSS has no end marker: decoding stops at an invalid back-reference, 8 NUL
bytes, the section end or the cap.
"""
from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from cuda4amd.scan.read.byname.limits import MAX_INFLATE

if TYPE_CHECKING:
    from cuda4amd.scan.read.binview import Buffer

__all__ = ["FLAGS_OK", "candidates", "decode", "ends_young", "ones"]


def decode(buf: Buffer, start: int, hi: int) -> tuple[bytes, int]:
    """Decode Cython 3.3's LZSS from ``start`` until the stream stops making
    sense (see the module docstring). Returns (output, end offset).

    Format (Cython/Utility/StringTools.c, __pyx_lzss_decompress): a flag
    byte, then 8 tokens, low bit first: 1 = one literal byte; 0 = a
    back-reference ``lo, hi[, len]``: lo < 0x80: distance lo, length hi;
    hi < 0x80: distance 0x80 + (hi & 0x60) << 2 | lo & 0x7F, length hi & 0x1F;
    else distance 0x80 + (hi & 0x7F) << 7 | lo & 0x7F and a length byte.
    Length += 3; the copy ends ``distance`` bytes before the output's end.
    """
    out = bytearray()
    pos = start
    limit = hi - 3
    eight_nuls = b"\0" * 8
    while pos < limit:
        flags = buf[pos]
        if flags == 0xFF:  # eight literals
            out += buf[pos + 1:pos + 9]
            pos += 9
            if len(out) > MAX_INFLATE:
                break
            continue
        if flags == 0 and buf[pos:pos + 8] == eight_nuls:
            break
        pos += 1
        flags |= 0xFF00
        while flags & 0x100:
            if pos >= limit:
                return bytes(out), pos
            if flags & 1:
                out.append(buf[pos])
                pos += 1
            else:
                lo = buf[pos]
                hi_ = buf[pos + 1]
                if not lo & 0x80:
                    back, length = lo, hi_
                    pos += 2
                elif not hi_ & 0x80:
                    back = 0x80 + (((hi_ << 2) & 0x180) | (lo & 0x7F))
                    length = hi_ & 0x1F
                    pos += 2
                else:
                    back = 0x80 + ((hi_ & 0x7F) << 7 | (lo & 0x7F))
                    length = buf[pos + 2]
                    pos += 3
                length += 3
                ref = len(out) - back - length
                if ref < 0:
                    return bytes(out), pos
                out += out[ref:ref + length]
            flags >>= 1
        if len(out) > MAX_INFLATE:
            break
    return bytes(out), pos


#: Flag bytes whose three low bits are set (the first three tokens are literals).
FLAGS_OK = bytes(1 if b & 7 == 7 else 0 for b in range(256))
#: Such a flag byte right after a NUL (group 1: where a blob may start).
_AFTER_NUL = re.compile(b"\\x00([" + b"".join(b"\\x%02x" % b for b in range(256) if b & 7 == 7) + b"])")


def candidates(buf: Buffer, lo: int, hi: int) -> Iterator[int]:
    """Where an LZSS blob may start, in file order: right after a NUL (the
    literal before it ended there, or alignment padding), or at a 16-byte
    boundary (MSVC and GCC align large arrays), with a flag byte announcing
    three literals (the table may start with control characters: no more
    can be asked of the first bytes). A start needs 4 bytes before ``hi``;
    one right after a NUL must start before ``hi - 4``.

    Both kinds are found by C-level searches (a regex for the first, a
    strided slice for the second) and merged: a Python step per NUL byte
    was a third of the LZSS search (docs/performance.md)."""
    aligned = lo + (-lo % 16)
    flags = buf[aligned:hi:16].translate(FLAGS_OK)
    # an aligned start at hi - 4 right after a NUL is one the NUL rule leaves out
    last = hi - 4 if hi - 5 < lo or buf[hi - 5] != 0 else hi - 5
    boundaries = itertools.takewhile(lambda i: i <= last, (aligned + 16 * k for k in ones(flags)))
    after_nul = (match.start(1) for match in _AFTER_NUL.finditer(buf, lo, hi - 4))
    previous = -1
    for start in heapq.merge(boundaries, after_nul):
        if start != previous:
            yield start
            previous = start


def ones(flags: bytes | bytearray) -> Iterator[int]:
    """The positions of the 1 bytes in ``flags``, in order."""
    k = flags.find(1)
    while k >= 0:
        yield k
        k = flags.find(1, k + 1)


#: Per flag byte: how many literal tokens come before its first back-reference (8: none).
_LITERALS_FIRST = bytes(8 if b == 0xFF else ((b + 1) & ~b).bit_length() - 1 for b in range(256))


def ends_young(buf: Buffer, start: int, hi: int) -> bool:
    """Whether the LZSS decode from ``start`` surely stops before 16 bytes of
    output, told from its first back-reference: after ``t`` literals (the flag
    byte's low one bits) it copies from ``t`` bytes of output, which only a
    short-form reference (first byte below 0x80: distance lo, length hi + 3)
    of lo + hi <= t - 3 can; any other ends the decode there (:func:`decode`:
    a copy from before the output's start). Nearly every candidate ends so,
    and this is a few byte reads instead of a decode."""
    t = _LITERALS_FIRST[buf[start]]
    at = start + 1 + t
    if t == 8 or at + 1 >= hi:
        return False
    lo = buf[at]
    return lo >= 0x80 or lo + buf[at + 1] > t - 3
