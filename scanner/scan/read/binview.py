"""A bounds-checked, read-only view over a binary's bytes.

The buffer is an ``mmap`` (for files) or ``bytes``; nothing here copies more
than the few bytes a read asks for, so memory does not grow with file size.
Every read checks its bounds and raises :class:`MalformedBinary` with a
message a user can read, never IndexError or struct.error.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    import mmap

#: what a view reads (a memoryview is copied to bytes before: it has no find())
Buffer = Union[bytes, bytearray, "mmap.mmap"]

#: Longest C string a reader accepts (symbol names, DLL names, section names).
MAX_STRING = 4096
#: Total bytes of names one binary may yield (hostile tables can point a
#: million entries at overlapping 4 KB strings).
MAX_STRING_BYTES = 64 * 1024 * 1024

_STRUCTS: dict[str, struct.Struct] = {}


class MalformedBinary(ValueError):
    """The file is not a well-formed PE/ELF binary; the message says why."""


def _struct(fmt: str) -> struct.Struct:
    s = _STRUCTS.get(fmt)
    if s is None:
        s = _STRUCTS[fmt] = struct.Struct(fmt)
    return s


class BinView:
    """Bounds-checked reads from ``buf``. ``endian`` is "<" or ">"."""

    __slots__ = ("buf", "endian", "size", "string_budget")

    def __init__(self, buf: Buffer, endian: str = "<") -> None:
        self.buf = buf
        self.size = len(buf)
        self.endian = endian
        self.string_budget = MAX_STRING_BYTES

    def charge(self, nbytes: int) -> None:
        """Count ``nbytes`` of names against this binary's string budget."""
        self.string_budget -= nbytes
        if self.string_budget < 0:
            raise MalformedBinary(
                f"names in this binary add up to more than {MAX_STRING_BYTES >> 20} MB (hostile tables?)"
            )

    def check(self, offset: int, length: int, what: str = "data") -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise MalformedBinary(
                f"{what} at file offset {offset:#x} (+{length:#x} bytes) "
                f"lies beyond the end of the file ({self.size:#x} bytes): truncated or corrupt"
            )

    def unpack(self, fmt: str, offset: int, what: str = "data") -> tuple:
        """``struct.unpack_from`` with this view's byte order and a bounds check."""
        s = _struct(self.endian + fmt)
        if offset < 0 or offset + s.size > self.size:
            self.check(offset, s.size, what)
        return s.unpack_from(self.buf, offset)

    def u8(self, offset: int, what: str = "byte") -> int:
        return self.unpack("B", offset, what)[0]

    def u16(self, offset: int, what: str = "u16") -> int:
        return self.unpack("H", offset, what)[0]

    def u32(self, offset: int, what: str = "u32") -> int:
        return self.unpack("I", offset, what)[0]

    def u64(self, offset: int, what: str = "u64") -> int:
        return self.unpack("Q", offset, what)[0]

    def read(self, offset: int, length: int, what: str = "data") -> bytes:
        self.check(offset, length, what)
        return bytes(self.buf[offset : offset + length])

    def iter_unpack(self, fmt: str, offset: int, count: int, what: str = "table") -> Iterator[tuple[Any, ...]]:
        """Yield ``count`` records of ``fmt`` starting at ``offset`` (bounds checked once)."""
        s = _struct(self.endian + fmt)
        self.check(offset, s.size * count, what)
        buf, unpack_from, size = self.buf, s.unpack_from, s.size
        for i in range(count):
            yield unpack_from(buf, offset + i * size)

    def raw_cstr(self, offset: int, what: str = "string", limit: int | None = None,
                 max_len: int = MAX_STRING) -> bytes:
        """The NUL-terminated bytes at ``offset``, without the NUL.

        ``limit`` is an exclusive end offset the string must finish before
        (e.g. the end of its string table); the file end is always a limit.
        """
        if offset < 0 or offset >= self.size:
            raise MalformedBinary(
                f"{what} at file offset {offset:#x} lies outside the file ({self.size:#x} bytes)"
            )
        end = self.size if limit is None else min(limit, self.size)
        if offset >= end:
            raise MalformedBinary(f"{what} at file offset {offset:#x} lies outside its table")
        stop = min(end, offset + max_len + 1)
        nul = self.buf.find(b"\0", offset, stop)
        if nul < 0:
            if stop == offset + max_len + 1:
                raise MalformedBinary(
                    f"{what} at file offset {offset:#x} is longer than {max_len} bytes (no terminator)"
                )
            raise MalformedBinary(f"{what} at file offset {offset:#x} is not NUL-terminated")
        self.charge(nul - offset)
        return bytes(self.buf[offset:nul])

    def cstr(self, offset: int, what: str = "string", limit: int | None = None,
             max_len: int = MAX_STRING) -> str:
        return decode(self.raw_cstr(offset, what, limit, max_len))


def decode(raw: bytes | bytearray) -> str:
    """Names are bytes in the file; decode UTF-8, keep undecodable bytes visible."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "backslashreplace")
