"""Redaction of private strings in everything a host report carries.

A host report names paths (the HIP SDK, ZLUDA, the HIP runtime). Before a
path goes into a report it passes through ``Redactor.path``: the home folder
becomes ``~`` (``%USERPROFILE%`` on Windows), the user name ``<user>`` and the
host name ``<host>`` wherever they appear as a path component, and
``C:\\Users\\<name>`` / ``/home/<name>`` are caught even when the home folder
is not known. Serial numbers, UUIDs and PCI instance paths are never read
into a report in the first place (see gpus.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from cuda4amd.host.probes import PrivateStrings

__all__ = ["Redactor", "USER", "HOST", "is_redacted"]

#: what a redacted user or host name becomes
USER, HOST = "<user>", "<host>"

_WIN_USERS = re.compile(r"(?i)^([a-z]:\\users\\)([^\\]+)")
_POSIX_HOME = re.compile(r"^(/home/|/Users/)([^/]+)")
_ROOT_HOME = re.compile(r"^/root(?=/|$)")


@dataclass(frozen=True)
class Redactor:
    platform: str
    private: PrivateStrings = PrivateStrings()

    def path(self, value: str | None) -> str | None:
        if value is None:
            return None
        return self.text(value)

    def text(self, value: str) -> str:
        out = value
        home = self.private.home.rstrip("\\/")
        if home and len(home) > 3:
            if self.platform == "windows":
                idx = out.casefold().find(home.casefold())
                while idx >= 0:
                    out = out[:idx] + "%USERPROFILE%" + out[idx + len(home):]
                    idx = out.casefold().find(home.casefold(), idx + len("%USERPROFILE%"))
            else:
                out = re.sub(re.escape(home) + r"(?=/|$|:)", "~", out)
        if self.platform == "windows":
            out = _WIN_USERS.sub(lambda m: m.group(1) + USER, out)
        else:
            out = _POSIX_HOME.sub(lambda m: m.group(1) + USER, out)
            out = _ROOT_HOME.sub("~", out)
        for secret, placeholder in ((self.private.user, USER), (self.private.host, HOST)):
            if secret and len(secret) >= 2:
                flags = re.IGNORECASE if self.platform == "windows" else 0
                out = re.sub(r"(?<![A-Za-z0-9_])" + re.escape(secret) + r"(?![A-Za-z0-9_])",
                             placeholder, out, flags=flags)
        return out


def is_redacted(path: str) -> bool:
    """Whether a path of a host report lost a part to redaction (a user or host
    name), so that it cannot be used as it stands. The home folder's ``~`` /
    ``%USERPROFILE%`` can: `cuda4amd run` and the launchers expand it."""
    return USER in path or HOST in path
