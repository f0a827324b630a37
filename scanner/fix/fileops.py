"""The disk primitives of apply and undo: every write goes through `FileOps`, and what is at a path.

    ops = FileOps(); ops.confine([root]); ops.copy(src, dst)   # OutsideError if dst's folder resolves out
    file_state(path)                                            # {"kind": "file", "sha256": ..., "mode": ...}

`FileOps` creates files without following a final link (``O_EXCL``,
``O_NOFOLLOW``), syncs what it writes, and checks right before each change
that the real path of the destination's folder is inside the folders it was
confined to (docs/security.md). Its `step(op, path)` is called before each
operation, so a test double can make any single one fail (an exception, a
full disk, a read-only or locked file).
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from cuda4amd.fix.release import sha256_file

__all__ = ["TMP_SUFFIX", "FileOps", "OutsideError", "file_state", "is_link", "oserror_text", "read_regular",
           "readlink_text", "same_state"]

#: the suffix of every temporary file a fix writes (next to its destination, then renamed over it)
TMP_SUFFIX = ".cuda4amd-tmp"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)


class OutsideError(OSError):
    """A write would land outside the target, its .cuda4amd and the launchers' folder (a link redirects it)."""


class FileOps:
    """The only way apply/undo change the disk. `step(op, path)` is called
    before each operation: a test double overrides it to fail there."""

    #: real paths of the folders writes may land in; empty: not confined (a bare FileOps in a test)
    allowed: tuple[str, ...] = ()

    def confine(self, folders: list[Path]) -> None:
        """From now on every change must land inside `folders` (after resolving links)."""
        self.allowed = tuple(os.path.normcase(os.path.realpath(f)) for f in folders)

    def step(self, op: str, path: Path) -> None:
        pass

    def inside(self, path: Path) -> None:
        """Raise OutsideError unless the real path of `path`'s folder is inside the allowed folders;
        checked right before each change, so a link swapped in after planning is caught too."""
        if not self.allowed:
            return
        folder = os.path.normcase(os.path.realpath(Path(path).parent))
        if not any(folder == a or folder.startswith(a.rstrip(os.sep) + os.sep) for a in self.allowed):
            raise OutsideError(errno.EXDEV, f"{path} resolves to {folder}, outside the target "
                                            f"(a link points out of it); nothing is written there", str(path))

    def mkdir(self, path: Path) -> None:
        self.step("mkdir", path)
        self.inside(path)
        os.mkdir(path)

    def rmdir(self, path: Path) -> None:
        self.step("rmdir", path)
        self.inside(path)
        os.rmdir(path)

    def remove(self, path: Path) -> None:
        self.step("remove", path)
        self.inside(path)
        os.unlink(path)  # removes a link itself, never what it points to

    def replace(self, src: Path, dst: Path) -> None:
        self.step("replace", dst)
        self.inside(src)
        self.inside(dst)
        os.replace(src, dst)  # replaces a final link itself

    def symlink(self, target: str, path: Path) -> None:
        self.step("symlink", path)
        self.inside(path)
        os.symlink(target, path)

    def chmod(self, path: Path, mode: int) -> None:
        self.step("chmod", path)
        self.inside(path)
        if is_link(os.lstat(path)):  # os.chmod follows links (and cannot not, on Linux)
            raise OutsideError(errno.ELOOP, f"{path} became a link; not changed", str(path))
        os.chmod(path, mode)

    def copystat(self, src: Path, dst: Path) -> None:
        self.step("copystat", dst)
        self.inside(dst)
        shutil.copystat(src, dst, follow_symlinks=False)

    def write(self, path: Path, data: bytes) -> None:
        """Create `path` (it must not exist) with `data`, synced to disk."""
        self.step("write", path)
        self.inside(path)
        self._write(path, data)

    def copy(self, src: Path, dst: Path) -> str:
        """Create `dst` (it must not exist) with the bytes of `src`, synced; returns their sha256."""
        self.step("copy", dst)
        self.inside(dst)
        return self._copy(src, dst)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY, 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())

    @staticmethod
    def _copy(src: Path, dst: Path) -> str:
        h = hashlib.sha256()
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY, 0o644)
        with open(src, "rb") as inp, os.fdopen(fd, "wb") as out:
            for block in iter(lambda: inp.read(1 << 20), b""):
                h.update(block)
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
        return h.hexdigest()

    def sync_dir(self, path: Path) -> None:
        if os.name == "nt":
            return
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def atomic_write(self, path: Path, data: bytes) -> None:
        tmp = path.with_name(path.name + TMP_SUFFIX)
        if os.path.lexists(tmp):
            self.remove(tmp)
        self.write(tmp, data)
        self.replace(tmp, path)
        self.sync_dir(path.parent)


def is_link(st: os.stat_result) -> bool:
    """A symbolic link, or on Windows any reparse point (a junction too)."""
    return stat.S_ISLNK(st.st_mode) or bool(getattr(st, "st_file_attributes", 0)
                                             & getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0))


def readlink_text(path: Path) -> str:
    """Where a link points, for a message ("?" when it cannot be read)."""
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, opened without following a final link and
    without blocking (a FIFO put there would hang a plain open)."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _BINARY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"{st.st_size} bytes, more than a journal holds ({limit})")
        chunks = []
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                break
            chunks.append(block)
            if sum(map(len, chunks)) > limit:
                raise OSError(errno.EFBIG, "grew past the size a journal holds")
        return b"".join(chunks)
    finally:
        os.close(fd)


def file_state(path: Path) -> dict[str, Any]:
    """What is at `path`: absent, a folder, a link (target) or a file (sha256, mode)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"kind": "absent"}
    if stat.S_ISLNK(st.st_mode):
        return {"kind": "link", "link": os.readlink(path)}
    if stat.S_ISDIR(st.st_mode):
        return {"kind": "dir"}
    if stat.S_ISREG(st.st_mode):
        return {"kind": "file", "sha256": sha256_file(path), "mode": stat.S_IMODE(st.st_mode)}
    return {"kind": "other"}


def same_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two file states (file_state's) are the same content: a file's sha256, a link's target."""
    if a["kind"] != b["kind"]:
        return False
    if a["kind"] == "file":
        return bool(a["sha256"] == b["sha256"])
    if a["kind"] == "link":
        return bool(a["link"] == b["link"])
    return True


def oserror_text(exc: OSError) -> str:
    """What a failed change means to the user (a full disk, a file in use, ...)."""
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT if hasattr(errno, "EDQUOT") else -1):
        return "the disk is full"
    if code in (errno.EACCES, errno.EPERM):
        return "permission denied (read-only, or in use by a running program?)"
    if code in (errno.EBUSY, getattr(errno, "ETXTBSY", -1)):
        return "the file is in use (is the application running?)"
    if code == errno.EROFS:
        return "the file system is read-only"
    return exc.strerror or str(exc)
