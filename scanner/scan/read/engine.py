"""Entry points for reading one binary into a :class:`~cuda4amd.model.BinaryInfo`.

    read_path(path, engine="fast")   # mmap, reads only headers and tables
    read_bytes(data, engine="fast")
    sniff(first_bytes) / sniff_file(fileobj)   # "PE" | "ELF" | None

Engines: ``"fast"`` (pure Python over mmap, the default) and ``"lief"`` (the
reference, reads whole files; imported lazily). Whatever goes wrong inside a
parser surfaces as :class:`MalformedBinary` (a ValueError) — or OSError for
I/O — so callers need to catch only those.
"""
from __future__ import annotations

import dataclasses
import errno
import mmap
import os
import stat
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

from cuda4amd.model import BinaryInfo
from cuda4amd.scan.read.binview import BinView, Buffer, MalformedBinary
from cuda4amd.scan.read.pages import Pages
from cuda4amd.scan.read.sniff import SNIFF_BYTES, misplaced_pe_header, sniff, sniff_file

__all__ = [
    "ENGINES",
    "SNIFF_BYTES",
    "MalformedBinary",
    "open_regular",
    "open_regular_fd",
    "read_bytes",
    "read_path",
    "sniff",
    "sniff_file",
]

ENGINES = ("fast", "lief")

def _check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise ValueError(f"unknown reader engine {engine!r} (choose from {', '.join(ENGINES)})")


EMPTY = "empty file (0 bytes): not a PE or ELF binary"


def _read_view(buf: Buffer, exports: bool = True) -> BinaryInfo:
    """The fast readers over ``buf``. A big mapped ELF file's headers and tables are read with
    ``MADV_RANDOM``: otherwise the kernel reads around each page they touch as it does for a program's
    code, 8 MiB at a time on the disks of this machine and the device machine, and the device's cold
    scan read 1.6 GiB for headers of a few pages each (docs/performance.md); the reader asks for the
    tables it reads instead. A PE file's headers, section table and import tables sit together in its
    first pages and its .rdata, which read-around serves: only its first page is read without."""
    if len(buf) == 0:
        raise MalformedBinary(EMPTY)
    pages = Pages(buf)
    pages.advise(0, pages.size, "MADV_RANDOM")
    try:
        return _read_format(buf, exports, pages)
    finally:
        pages.advise(0, pages.size, "MADV_NORMAL")  # the searches that follow read sections through


def _read_format(buf: Buffer, exports: bool, pages: Pages) -> BinaryInfo:
    kind = sniff(bytes(buf[:SNIFF_BYTES]))
    if kind is None and buf[:2] == b"MZ" and len(buf) >= 0x40:
        (e_lfanew,) = struct.unpack_from("<I", buf, 0x3C)
        if buf[e_lfanew : e_lfanew + 4] == b"PE\0\0":
            kind = "PE"
    if kind == "PE":
        from cuda4amd.scan.read.pe import read_pe

        pages.advise(0, pages.size, "MADV_NORMAL")
        return read_pe(BinView(buf), exports)
    if kind == "ELF":
        from cuda4amd.scan.read.elf import read_elf

        return read_elf(BinView(buf), exports)
    if buf[:2] == b"MZ":
        misplaced = misplaced_pe_header(bytes(buf[:SNIFF_BYTES]))
        if misplaced is not None and len(buf) >= 0x40:
            (e_lfanew,) = struct.unpack_from("<I", buf, 0x3C)
            raise MalformedBinary(f"damaged PE file: e_lfanew ({e_lfanew:#x}) does not point at its PE header "
                                  f"(found at {misplaced:#x}); Windows refuses to load it")
        raise MalformedBinary("MZ header without a PE signature: a DOS program or a damaged PE file")
    raise MalformedBinary("not a PE or ELF binary (unknown magic)")


def _guard(fn: Callable[..., BinaryInfo], *args: object) -> BinaryInfo:
    """Run a parser; anything but MalformedBinary/OSError becomes MalformedBinary."""
    try:
        return fn(*args)
    except (MalformedBinary, OSError):
        raise
    except MemoryError:
        raise MalformedBinary("binary structures need more memory than is available") from None
    except RecursionError:
        raise MalformedBinary("binary structures nest too deeply (cyclic?)") from None
    except Exception as exc:
        raise MalformedBinary(f"cannot parse binary ({type(exc).__name__}: {exc})") from exc


def read_bytes(data: bytes, engine: str = "fast") -> BinaryInfo:
    """Read a binary held in memory."""
    _check_engine(engine)
    if engine == "lief":
        from cuda4amd.scan.read.lief_reader import read_lief

        return _guard(read_lief, bytes(data))
    if isinstance(data, memoryview):
        data = data.tobytes()
    return _guard(_read_view, data)


def open_regular(path: str | os.PathLike, *, follow_links: bool = True) -> BinaryIO:
    """Open a file for reading only if it is a regular file.

    Opened non-blocking (a FIFO or a device put where a file was, or swapped
    in after discovery, would otherwise block the open or the read forever)
    and checked with fstat after opening, so the type is that of what was
    opened, not of what a name pointed to a moment earlier. `follow_links`
    False: a final symlink is refused (O_NOFOLLOW, where the OS has it).
    """
    fd, _ = open_regular_fd(path, follow_links=follow_links)
    try:
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def open_regular_fd(path: str | os.PathLike, *, follow_links: bool = True) -> tuple[int, os.stat_result]:
    """:func:`open_regular` as a bare descriptor (the caller closes it) and its fstat: for discovery,
    which sniffs every file of a tree with plain reads and no file object per file."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file ({_kind_of(st.st_mode)}): not read")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "a special file"


@contextmanager
def mapped(path: str | os.PathLike) -> Iterator[bytes | mmap.mmap]:
    """The file's bytes as a read-only map, so that only the pages touched are read."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            yield b""
            return
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError) as exc:
            # Some files (special files, some network shares) cannot be mapped:
            # read small ones, refuse to load big ones into memory.
            if size > 64 * 1024 * 1024:
                raise OSError(f"cannot memory-map {os.fspath(path)!r}: {exc}") from exc
            yield f.read()
            return
    try:
        yield mm
    finally:
        mm.close()


def read_buffer(buf: bytes | mmap.mmap, engine: str = "fast", path: str | os.PathLike | None = None, *,
                exports: bool = True) -> BinaryInfo:
    """Read a binary from a buffer (lief reads `path` instead when it is given).

    ``exports=False``: leave the exported names out (``BinaryInfo.exports``
    empty); the fast readers then do not read them at all.
    """
    _check_engine(engine)
    if engine == "lief":
        from cuda4amd.scan.read.lief_reader import read_lief

        info = _guard(read_lief, os.fspath(path) if path is not None else bytes(buf))
        return info if exports else dataclasses.replace(info, exports=())
    return _guard(_read_view, buf, exports)


def read_path(path: str | os.PathLike, engine: str = "fast") -> BinaryInfo:
    """Read the binary at ``path`` (mmap'd for the fast engine: only the needed pages are touched)."""
    _check_engine(engine)
    if engine == "lief":
        return read_buffer(b"", engine, path)
    with mapped(path) as buf:
        return read_buffer(buf, engine)
