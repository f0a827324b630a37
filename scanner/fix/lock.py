"""One fix, undo or run at a time per target: an exclusive lock that says who holds it.

    with target_lock(root, "scan --fix"):      # raises LockError naming the holder
        ...

The lock file is in the user state folder (``locks/<sha256 of the real path
of the target>.lock``), not in the target: taking it writes nothing there, and
``undo`` can remove ``.cuda4amd`` while holding it. POSIX: ``fcntl.flock``
(released by the kernel when the process dies, so a ``kill -9`` leaves no
stale lock); Windows: ``msvcrt.locking`` of one byte far past the holder
text, which stays readable. Once held, the file says who holds it: pid, host,
command and time.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cuda4amd.userdirs import state_dir

__all__ = ["LockError", "holder", "lock_path", "target_lock"]

_WINDOWS_LOCK_OFFSET = 1 << 20  # the locked byte: past the holder text, which others read


class LockError(Exception):
    """Another cuda4amd process works on the target."""


def lock_path(root: Path) -> Path:
    real = os.path.realpath(root)
    digest = hashlib.sha256(os.fsencode(os.path.normcase(real))).hexdigest()[:32]
    return state_dir() / "locks" / f"{digest}.lock"


def holder(path: Path) -> dict[str, Any] | None:
    """What the lock file says about its holder (None when empty or unreadable)."""
    try:
        with open(path, "rb") as inp:
            text = inp.read(4096)
        data = json.loads(text.split(b"\n", 1)[0] or b"null")
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _describe(info: dict[str, Any] | None) -> str:
    if not info:
        return "another cuda4amd process (it has not written who it is yet)"
    return (f"pid {info.get('pid')} on {info.get('host')} ({info.get('command')}, since {info.get('since')})")


@contextlib.contextmanager
def target_lock(root: str | os.PathLike[str], command: str) -> Iterator[Path]:
    """Hold the exclusive lock of `root` for the block; LockError at once when another holds it."""
    path = lock_path(Path(root))
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0),
                     0o600)
    except OSError as exc:
        raise LockError(f"cannot create the lock {path}: {exc.strerror or exc}") from None
    try:
        if not _try_lock(fd):
            raise LockError(f"{os.path.realpath(root)} is in use by {_describe(holder(path))}: wait for it to "
                            f"finish (the lock is {path})")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "target": os.path.realpath(root)}
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(info) + "\n").encode("utf-8", "surrogateescape").ljust(1024, b" "))
        try:
            yield path
        finally:
            with contextlib.suppress(OSError):
                os.lseek(fd, 0, os.SEEK_SET)
                os.write(fd, b"\n".ljust(1024, b" "))  # "nobody": the file stays, a lock file is never removed
            _unlock(fd)
    finally:
        os.close(fd)


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int) -> None:
    with contextlib.suppress(OSError):
        if sys.platform == "win32":
            import msvcrt

            os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_UN)
