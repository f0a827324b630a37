"""The shipped rule files, parsed once per install rather than on every scan.

tomllib is pure Python: the four ZLUDA release tables (480 KB of function names) take 90 ms to parse, a third
of a re-scan whose file facts all come from the facts cache (docs/performance.md). What tomllib returns for a
shipped file is kept as a pickle in a private folder, as the facts are (scan/read/cache.py, docs/security.md):
one entry per file, named by the SHA-256 of cuda4amd's version, FORMAT and the file's path, size, mtime_ns,
ctime_ns, device and inode, so a reinstalled or edited file is another entry. An entry is the SHA-256 of its
body, then the body; the unpickler builds only plain values and the date and time types TOML has. Anything
amiss (no private folder, a damaged or foreign entry) is parsed again, never an error. Files of a user's
`--rules` folder are parsed every time: they change while a user works on them.
"""
from __future__ import annotations

import datetime
import hashlib
import io
import json
import os
import pickle
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from cuda4amd import __version__
from cuda4amd.userdirs import cache_dir, private_folder, read_sealed, write_sealed

__all__ = ["FORMAT", "cached_document"]

FORMAT = 1  # raised when what is kept for a file changes
ENTRY_LIMIT = 16 << 20  # the biggest shipped table parses to a 1 MB pickle
#: what a TOML document holds besides str, int, float, bool, list and dict (tomllib: the TOML types)
TOML_CLASSES = {("datetime", name): getattr(datetime, name) for name in ("date", "time", "datetime", "timezone",
                                                                          "timedelta")}


class _TomlUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in TOML_CLASSES:
            return TOML_CLASSES[(module, name)]
        raise pickle.UnpicklingError(f"{module}.{name} is no TOML value")


def cached_document(path: Path, data: bytes, parse: Callable[[bytes], dict[str, Any]]) -> dict[str, Any]:
    """`parse(data)` for the file at `path` (whose bytes are `data`), from the cache when it holds it."""
    entry = _entry(path)
    if entry is not None:
        kept = read_sealed(entry, ENTRY_LIMIT)
        if kept is not None:
            try:
                document = _TomlUnpickler(io.BytesIO(kept)).load()
            except Exception:  # a damaged entry of any kind is parsed again
                document = None
            if isinstance(document, dict):
                return document
    document = parse(data)
    if entry is not None:
        with suppress(OSError):  # a full disk, a folder gone: next time it is parsed again
            write_sealed(entry, pickle.dumps(document, protocol=5))
    return document


def _entry(path: Path) -> Path | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    folder = private_folder(cache_dir() / "rules")
    if folder is None:
        return None
    key = json.dumps([__version__, FORMAT, str(path.resolve()), info.st_size, info.st_mtime_ns, info.st_ctime_ns,
                      info.st_dev, info.st_ino])
    return folder / (hashlib.sha256(key.encode()).hexdigest() + ".toml.pickle")
