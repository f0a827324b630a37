"""The per-user folders, outside every target.

The cache folder holds the ZLUDA downloads (fix/release.py) and the facts
folder: ``$CUDA4AMD_CACHE``, else platformdirs' user cache
folder for cuda4amd: ``%LOCALAPPDATA%\\cuda4amd`` on Windows,
``$XDG_CACHE_HOME/cuda4amd`` or ``~/.cache/cuda4amd`` on Linux,
``~/Library/Caches/cuda4amd`` on macOS.

The facts folder holds what was worked out from files' bytes and can be worked
out again: the facts of binaries (scan/read/cache.py): ``$CUDA4AMD_FACTS_CACHE``,
else ``facts`` in the cache folder.

The state folder holds the journal key and the target locks (fix/state.py,
fix/lock.py).

What a folder of these holds is used only when it is private, ssh's rule for
``~/.ssh``: :func:`private_folder` creates a folder 0700 and refuses (one line
on stderr) one that is a symbolic link, not owned by the user, or writable by
its group or others; :func:`read_private` reads a file only when it is a regular
file of the user's, written by no one else, of a bounded size, opened without
following a link or waiting on a FIFO; :func:`write_private` writes a file 0600
whole or not at all. Whoever else could write there could otherwise choose what
cuda4amd believes (issue 31).
"""
from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
from contextlib import suppress
from pathlib import Path

__all__ = ["CACHE_VARIABLE", "FACTS_VARIABLE", "cache_dir", "facts_dir", "private_folder", "read_private",
           "state_dir", "write_private"]

CACHE_VARIABLE = "CUDA4AMD_CACHE"
FACTS_VARIABLE = "CUDA4AMD_FACTS_CACHE"


def cache_dir() -> Path:
    """The per-user cache folder (see the module docstring)."""
    env = os.environ.get(CACHE_VARIABLE)
    if env:
        return Path(env).expanduser()
    # imported here, when a scan opens the facts cache or a fix the download cache: ~2 ms once the
    # scanner is loaded (~7 ms in a bare interpreter; docs/performance.md)
    import platformdirs

    return Path(platformdirs.user_cache_dir("cuda4amd", appauthor=False, opinion=False))


def facts_dir() -> Path:
    """The facts folder (see the module docstring)."""
    env = os.environ.get(FACTS_VARIABLE)
    if env:
        return Path(env).expanduser()
    return cache_dir() / "facts"


def state_dir() -> Path:
    """The per-user state folder (XDG Base Directory spec: $XDG_STATE_HOME,
    default ~/.local/state; Windows: %LOCALAPPDATA%). Written out rather than
    taken from platformdirs, whose Windows answer comes from the known-folder
    API instead of %LOCALAPPDATA%: the journal key must stay where the journals
    of existing fixes were signed, or they can no longer be undone."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    else:
        base = os.environ.get("XDG_STATE_HOME") or ""
        if not os.path.isabs(base):  # the spec: a relative value is invalid and ignored
            base = str(Path.home() / ".local" / "state")
    return Path(base) / "cuda4amd"


#: mode bits that let the group or others write: a folder or file with one is not private
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
#: open flags of :func:`read_private`: never follow a link in the last component, never wait on a FIFO
#: (neither flag exists on Windows, where a FIFO cannot be named in a folder and a link is looked for first)
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def private_folder(path: Path) -> Path | None:
    """``path``, created (mode 0700, parents as the umask says) if missing, when it is private: a real folder,
    not a symbolic link, owned by the user and writable by no one else; else None. A folder that exists and is
    not private is refused with one line on stderr; one that cannot be created is None without a word (no
    cache folder, a read-only file system: the caller does without)."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return None
    why = _not_private(info, "folder")
    if why is None:
        return path
    print(f"cuda4amd: not using {path}: {why}", file=sys.stderr)
    return None


def read_private(path: Path, limit: int) -> bytes | None:
    """The bytes of the file ``path`` when it is a regular file of at most ``limit`` bytes, owned by the user and
    writable by no one else; else (a link, a FIFO or device, someone else's, too big, unreadable) None."""
    try:
        # Windows follows a link whatever the flags: refused before opening (making one there takes a privilege)
        if os.name == "nt" and os.path.islink(path):
            return None
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit or _not_private(info, "file") is not None:
            return None
        data = os.read(fd, info.st_size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) == info.st_size else None  # a file that grew or shrank while read: none of it


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (in a private folder) whole or not at all: a new file, mode 0600, in the same
    folder, renamed over ``path``; a reader sees the old file or the new one, never a part. OSError if it fails."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")  # 0600, O_EXCL: a fresh file
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


#: a sealed file starts with the SHA-256 of the rest: a damaged one is noticed before its body is used
SEAL_BYTES = 32


def read_sealed(path: Path, limit: int) -> memoryview | None:
    """The body of the private file ``path`` (read_private: at most ``limit`` bytes in all) when its first
    SEAL_BYTES are the SHA-256 of the rest; else None."""
    data = read_private(path, limit)
    if data is None:
        return None
    body = memoryview(data)[SEAL_BYTES:]
    return body if hashlib.sha256(body).digest() == data[:SEAL_BYTES] else None


def write_sealed(path: Path, body: bytes) -> None:
    """Write ``body`` to ``path`` as read_sealed reads it (write_private: whole or not at all). OSError if it fails."""
    write_private(path, hashlib.sha256(body).digest() + body)


def _not_private(info: os.stat_result, kind: str) -> str | None:
    """Why a folder or file with this lstat/fstat is not private (None when it is)."""
    wanted = stat.S_ISDIR if kind == "folder" else stat.S_ISREG
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link"
    if not wanted(info.st_mode):
        return f"it is not a {kind}"
    if os.name == "nt":
        # Windows keeps who may write in ACLs, which st_uid (always 0) and st_mode (the read-only bit) do not
        # show; the per-user folders (%LOCALAPPDATA%) are the user's by their default ACL
        return None
    if info.st_uid != os.geteuid():
        return f"it is owned by user id {info.st_uid}, not by you ({os.geteuid()})"
    if info.st_mode & OTHERS_WRITE:
        return f"its group or others can write it (mode {stat.S_IMODE(info.st_mode):04o})"
    return None
