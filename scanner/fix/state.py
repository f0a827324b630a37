"""The journal key in the user state folder (cuda4amd.userdirs.state_dir).

    mac = journal_mac(data)              # HMAC-SHA256 of a journal under this user's key

A journal inside a target folder is only trusted when its MAC verifies under
the key kept here (``journal-key``, 32 random bytes, created on first use,
mode 0600): a folder downloaded from elsewhere can carry a journal, but not
one this tool wrote (docs/security.md). The locks of fix/undo/run live here
too (cuda4amd.fix.lock), so taking one writes nothing into the target.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from cuda4amd.userdirs import state_dir

__all__ = ["KEY_NAME", "StateError", "journal_mac", "mac_matches"]

KEY_NAME = "journal-key"
KEY_BYTES = 32


class StateError(Exception):
    """The user state folder or its key cannot be read or created."""


def _key() -> bytes:
    folder = state_dir()
    path = folder / KEY_NAME
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            return _read_key(path)
        except FileNotFoundError:
            pass
        tmp = folder / f".{KEY_NAME}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(KEY_BYTES))
            out.flush()
            os.fsync(out.fileno())
        try:  # two first runs at once: the first key stays, the other is dropped
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # no hard links (FAT, some Windows shares): rename, which may replace, still one key
            if not path.exists():
                os.replace(tmp, path)
        if tmp.exists():
            os.unlink(tmp)
        return _read_key(path)
    except OSError as exc:
        raise StateError(f"cannot use the cuda4amd state folder {folder}: {exc.strerror or exc}") from None


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as inp:
        key = inp.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise StateError(f"{path} is damaged (not {KEY_BYTES} bytes): remove it; journals written with it "
                         f"are then refused")
    return key


def _canonical(data: dict[str, Any]) -> bytes:
    body = {k: v for k, v in data.items() if k != "mac"}
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8",
                                                                                              "surrogateescape")


def journal_mac(data: dict[str, Any]) -> str:
    """The MAC of a journal's content (every field but "mac" itself)."""
    return "hmac-sha256:" + hmac.new(_key(), _canonical(data), hashlib.sha256).hexdigest()


def mac_matches(data: dict[str, Any]) -> bool:
    given = data.get("mac")
    return isinstance(given, str) and hmac.compare_digest(given, journal_mac(data))
