"""One binary read: a file on disk (in the tree or found through --search-path) or a member of an archive.

Every way the scan reads a binary goes through :func:`read_item`, in this
process or in a worker (scan/read/parallel.py), so each gives the same
facts and the same errors.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from cuda4amd.model import FileError, ReadOutcome, ScannedBinary
from cuda4amd.scan.discover import ARCHIVE_ERRORS, FoundBinary
from cuda4amd.scan.read.engine import MalformedBinary, mapped, read_buffer

if TYPE_CHECKING:
    import mmap
    import zipfile

    from cuda4amd.scan.read.payload import PayloadInspector

__all__ = ["IN_MEMORY_MEMBER_LIMIT", "read_item"]

# Archive members up to this size are read from memory; larger ones are
# spooled to a temporary file so memory stays flat whatever the member's size.
IN_MEMORY_MEMBER_LIMIT = 64 * 1024 * 1024


def read_item(
    item: FoundBinary,
    engine: str,
    inspector: PayloadInspector | None,
    archive: zipfile.ZipFile | None,
) -> ReadOutcome:
    """Read one binary (``item.member`` of ``archive``, else ``item.disk_path``) and, with an
    inspector, its kernels and by-name loads."""
    errors: list[FileError] = []
    try:
        with _buffer(archive, item) as (buf, path):
            # export names: no later stage uses them (see model.BinaryInfo)
            info = read_buffer(buf, engine, path if engine == "lief" else None, exports=False)
            binary = ScannedBinary(item.path, info, item.size)
            if inspector is not None:
                payload = inspector.inspect(item.path, buf, info)
                binary.kernels, binary.by_name = payload.kernels, payload.by_name
                binary.driver_names, binary.calls_cuda = payload.driver_names, payload.calls_cuda
                errors.extend(payload.errors)
    except MalformedBinary as exc:
        return ReadOutcome(None, (FileError(item.path, "read", str(exc)),))
    except FileNotFoundError:
        return ReadOutcome(None, (FileError(item.path, "read", "vanished during the scan"),))
    except OSError as exc:
        return ReadOutcome(None, (FileError(item.path, "read", exc.strerror or str(exc)),))
    except ARCHIVE_ERRORS as exc:  # after OSError above: a corrupt member
        return ReadOutcome(None, (FileError(item.path, "read", f"cannot read archive member: {exc}"),))
    return ReadOutcome(binary, tuple(errors))


@contextmanager
def _buffer(archive: zipfile.ZipFile | None, item: FoundBinary) -> Iterator[tuple[bytes | mmap.mmap, str | None]]:
    """(buffer, path on disk) of a binary: a file's map, or an archive member's bytes.

    Members up to IN_MEMORY_MEMBER_LIMIT are read into memory; larger ones are
    spooled to a temporary file and mapped, so memory stays flat.
    """
    if item.member is None or archive is None:
        assert item.disk_path is not None  # discovery gives every file outside an archive its path
        with mapped(item.disk_path) as buf:
            yield buf, item.disk_path
        return
    if item.size <= IN_MEMORY_MEMBER_LIMIT:
        yield archive.read(item.member), None
        return
    handle, spool = tempfile.mkstemp(prefix="cuda4amd-", suffix=".bin")
    try:
        with os.fdopen(handle, "wb") as out, archive.open(item.member) as member:
            shutil.copyfileobj(member, out, 1024 * 1024)
        with mapped(spool) as buf:
            yield buf, spool
    finally:
        os.unlink(spool)
