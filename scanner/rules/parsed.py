"""Parsed rule files, kept between runs in the facts folder.

tomllib is pure Python: loading and validating the shipped rules took 45 ms
of every scan, run after run, most of it parsing the ZLUDA release tables
(about 480 KB of function names); from these entries it takes 9 ms
(docs/performance.md). So the document
tomllib returns is kept as JSON under the SHA-256 of the TOML bytes it came
from: an entry can never be stale, because an edited file has another digest,
and every load validates the document as if it had just been parsed (the
loaders do not know where it came from).

JSON, not marshal or pickle, because json.loads is C and builds nothing but
dicts, lists, strings, numbers and booleans whatever its input, and those are
all tomllib returns but for dates and times: a document holding one is simply
not kept. An entry is the SHA-256 of its JSON text, a newline, and the text,
so a damaged entry is noticed and the file parsed again. An entry is read only
when it is a regular file of a plausible size; one that is missing, damaged or
unreadable, and a folder that cannot be written, only cost the parse. As with
the facts cache, whoever can write the user's cache folder is trusted like the
user's own files.

Location: ``rules-<FORMAT>`` in :func:`cuda4amd.userdirs.facts_dir`.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, Callable

from cuda4amd.userdirs import facts_dir

__all__ = ["FORMAT", "cached_document"]

#: the layout of an entry; a new one leaves the old entries unread
FORMAT = 1
#: an entry larger than this many times its TOML file (plus SLACK) is not read: JSON of a TOML
#: document is about as long as the TOML (measured: 0.6 to 1.1 times the shipped files)
GROWTH = 4
SLACK = 1 << 16


def cached_document(data: bytes, parse: Callable[[bytes], dict[str, Any]]) -> dict[str, Any]:
    """The document of the TOML bytes `data`: a kept one, else `parse(data)`, which is then kept."""
    digest = hashlib.sha256(data).hexdigest()
    try:
        entry = facts_dir() / f"rules-{FORMAT}" / f"{digest}.json"
    except (OSError, RuntimeError):  # no cache folder can be named (no home folder): parse every time
        return parse(data)
    document = _read(entry, len(data) * GROWTH + SLACK)
    if document is None:
        document = parse(data)
        _write(entry, document)
    return document


def _read(entry: Path, limit: int) -> dict[str, Any] | None:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(entry, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    seal, _, text = raw.partition(b"\n")
    if seal != hashlib.sha256(text).hexdigest().encode():
        return None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


def _write(entry: Path, document: dict[str, Any]) -> None:
    try:
        text = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
    except (TypeError, ValueError):  # a date or time: JSON has none (module docstring)
        return
    import tempfile  # only on a miss: 5 ms of every start-up otherwise

    try:
        entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=entry.parent, prefix=".new-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.sha256(text).hexdigest().encode() + b"\n" + text)
            os.replace(temporary, entry)  # whole or not at all, for a scan running beside this one
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        pass  # a folder that cannot be written only costs the parse next time
