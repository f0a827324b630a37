"""Redaction: a report that leaves the machine names no home folder, user or host.

Reports are attached to public issues. Before a file report (or JSON, TOML or
Markdown on stdout) is rendered, the document passes through a `Redactor`:

* the home folder (``Path.home()``, ``$HOME``, ``%USERPROFILE%``,
  ``%HOMEDRIVE%%HOMEPATH%``) becomes ``<home>``, matched case-insensitively
  and with either path separator; so do ``C:\\Users\\<name>``,
  ``/home/<name>``, ``/Users/<name>`` and ``/mnt/c/Users/<name>`` of any user;
* the user name (``getpass.getuser()``, ``$USER``, ``$USERNAME``,
  ``$LOGNAME``) becomes ``<user>`` and the host name
  (``socket.gethostname()``, ``%COMPUTERNAME%``, ``$HOSTNAME``, and its first
  label) ``<host>``, case-insensitively, wherever they stand as a word: as a
  path component, inside ``bob-laptop`` or ``bob_build``, but not inside
  ``bobcat``;
* an absolute target path below the working folder becomes relative to it
  (elsewhere it is kept, with the rules above applied); a `resolved` library
  path inside the target becomes relative to the target, and the target's
  absolute path anywhere else in the report becomes ``<target>``.

Host reports go through the same Redactor (`Redactor.for_host_report`), with
one difference that keeps their paths usable: the home folder becomes
``%USERPROFILE%`` (Windows) or ``~``, which the launchers and `cuda4amd run`
expand back on that machine, and another user's home folder keeps its place
(``C:\\Users\\<user>``, ``/home/<user>``). A path with a ``<user>`` or
``<host>`` in it cannot be used as it stands (`is_redacted`).

Values of a fixed vocabulary (verdicts, routes, families, load kinds, …) and
imported function names are left alone, so a user called ``static`` cannot
break the report's schema. The private strings are a parameter
(`PrivateStrings`), read from this machine by `private_strings()` by
default, so tests can inject odd ones.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from cuda4amd.model import PrivateStrings

__all__ = [
    "HOME",
    "HOST",
    "HOST_REPORT_HOME",
    "TARGET",
    "USER",
    "PrivateStrings",
    "Redactor",
    "is_redacted",
    "private_strings",
    "redact_document",
]

HOME, USER, HOST, TARGET = "<home>", "<user>", "<host>", "<target>"
#: what the home folder becomes in a host report, per platform: what `cuda4amd run` expands back
HOST_REPORT_HOME = {"windows": "%USERPROFILE%", "linux": "~"}

#: shortest user or host name that is redacted (a one-letter name would eat the report)
MIN_NAME = 2
#: shortest home path that is redacted ("/", "C:\\" are not private)
MIN_HOME = 4

_SEP = r"[\\/]+"
# a path ends where no name character follows ("/root." at the end of a sentence ends, "/root.d" does not)
_PATH_END = r"(?![\w-]|\.\w)"
_PATH_START = r"(?<![\w.-])"
# a name stands as a word: no letter or digit on either side, and not inside a placeholder
_WORD_START = r"(?<!<)(?<![^\W_])"
_WORD_END = r"(?![^\W_])(?!>)"
# a path component; a final "." is the end of a sentence, not of the name
_COMPONENT = r'[^\\/:*?"<>|,;\s]*[^\\/:*?"<>|,;\s.]'
_GENERIC_HOMES = re.compile(
    "|".join((
        # C:\Users\<name> (a name may hold spaces when a separator follows), not Public/Default
        _PATH_START + r"[A-Za-z]:" + _SEP + r"(?:Users|Documents and Settings)" + _SEP
        + r"(?!(?:Public|Default|Default User|All Users)(?:[\\/]|$))"
        + rf"(?:{_COMPONENT}(?: {_COMPONENT})+(?=[\\/])|{_COMPONENT})",
        # /home/<name>, /Users/<name>, WSL's /mnt/c/Users/<name>
        _PATH_START + r"(?:/mnt/[A-Za-z])?/(?:home|Users)/" + _COMPONENT,
    )),
    re.IGNORECASE,
)

# Where a document holds values of a fixed vocabulary or function names: never redacted.
# Keys are (enclosing key, key); list items belong to the key of their list.
_KEEP = {
    ("", "schema"), ("", "verdict"), ("", "engine"), ("", "tool"), ("", "zluda"), ("", "summary"),
    ("target", "kind"),
    ("binaries", "format"), ("binaries", "machine"), ("binaries", "kind"), ("binaries", "verdict"),
    ("binaries", "kernels"), ("binaries", "size"),
    ("nvidia_library", "family"), ("nvidia_library", "route"), ("nvidia_library", "basis"),
    ("dependencies", "family"), ("dependencies", "load"), ("dependencies", "route"), ("dependencies", "basis"),
    ("dependencies", "how"), ("dependencies", "symbols"), ("dependencies", "ordinals"),
    ("packages", "verdict"), ("packages", "framework"),
    ("errors", "stage"),
}


def private_strings(environ: dict[str, str] | None = None) -> PrivateStrings:
    """This machine's home folder, user name and host name, from every usual source."""
    env = os.environ if environ is None else environ
    homes: list[str] = []
    try:
        from pathlib import Path

        homes.append(str(Path.home()))
    except (RuntimeError, KeyError, OSError):
        pass
    homes += [env.get("HOME", ""), env.get("USERPROFILE", "")]
    if env.get("HOMEDRIVE") and env.get("HOMEPATH"):
        homes.append(env["HOMEDRIVE"] + env["HOMEPATH"])
    users: list[str] = []
    try:
        import getpass

        users.append(getpass.getuser())
    except Exception:  # no user name at all (some containers): nothing to redact
        pass
    users += [env.get(name, "") for name in ("USER", "USERNAME", "LOGNAME")]
    hosts: list[str] = []
    try:
        import socket

        hosts.append(socket.gethostname())
    except OSError:
        pass
    hosts += [env.get("COMPUTERNAME", ""), env.get("HOSTNAME", "")]
    return PrivateStrings(_unique(homes), _unique(users), _unique(hosts))


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for value in values:
        value = (value or "").strip()
        if value:
            seen.setdefault(value.casefold(), value)
    return tuple(seen.values())


def _path_pattern(path: str) -> str:
    """A path as a pattern: either separator, repeated separators, any case (flag)."""
    parts = [re.escape(p) for p in re.split(r"[\\/]+", path.rstrip("\\/"))]
    return _SEP.join(parts)


class Redactor:
    """Replaces private strings in text, paths, report documents and graphs."""

    def __init__(self, private: PrivateStrings | None = None, *, target_root: str | os.PathLike[str] | None = None,
                 cwd: str | os.PathLike[str] | None = None, home: str = HOME,
                 keep_home_folders: bool = False) -> None:
        private = private_strings() if private is None else private
        self.home = home
        self.keep_home_folders = keep_home_folders
        self.target_root = os.fspath(target_root) if target_root is not None else None
        self.cwd = os.fspath(cwd) if cwd is not None else _cwd()
        self._paths: list[tuple[re.Pattern[str], str]] = []
        # what a string must hold, lower-cased, for some pattern to match in it: a path's longest component,
        # a name, a word of the generic home folders (_GENERIC_HOMES)
        needles = {"users", "documents and settings", "home"}
        if self.target_root and len(self.target_root.rstrip("\\/")) >= MIN_HOME:
            self._paths.append((re.compile(_PATH_START + _path_pattern(self.target_root) + _PATH_END, re.I), TARGET))
            needles.add(_longest_component(self.target_root))
        homes = sorted({h.rstrip("\\/") for h in private.homes if len(h.rstrip("\\/")) >= MIN_HOME}, key=len,
                       reverse=True)
        for home in homes:
            self._paths.append((re.compile(_PATH_START + _path_pattern(home) + _PATH_END, re.I), self.home))
            needles.add(_longest_component(home))
        names: dict[str, str] = {}
        for values, placeholder in ((private.hosts, HOST), (private.users, USER)):
            for value in values:
                for name in (value, value.split(".")[0]) if placeholder == HOST else (value,):
                    if len(name) >= MIN_NAME:
                        names.setdefault(name.casefold(), placeholder)
        self._names = names
        needles.update(names)
        # Only where all of them and the string are ASCII: then an IGNORECASE match is an ASCII one, which
        # the lower-cased string holds; Unicode's case rules match other letters too (the Kelvin sign for
        # "k", a long s for "s"), and str.lower is not sre's per-letter folding ("İ" lowers to two letters)
        self._needles = tuple(sorted(needles)) if all(n.isascii() for n in needles) else None
        self._done: dict[tuple[str, bool], str] = {}
        self._name_re = None
        if names:
            alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
            self._name_re = re.compile(_WORD_START + f"(?:{alternatives})" + _WORD_END, re.IGNORECASE)

    @classmethod
    def for_host_report(cls, platform: str, private: PrivateStrings | None = None) -> Redactor:
        """The redactor of a host report: the probes' private strings (none
        when not given), the home folder as HOST_REPORT_HOME[platform], other
        users' home folders kept as ``…\\Users\\<user>``."""
        return cls(private if private is not None else PrivateStrings(), home=HOST_REPORT_HOME[platform],
                   keep_home_folders=True)

    # -- strings ------------------------------------------------------------

    def text(self, value: str, *, target: bool = True) -> str:
        """Any string: paths in it, user and host names in it (and the target's path, unless `target` is false)."""
        # a report repeats its strings (library and function names in every binary): each is redacted once
        known = self._done.get((value, target))
        if known is None:
            if self._needles is not None and value.isascii():
                lowered = value.lower()
                if not any(needle in lowered for needle in self._needles):
                    # no pattern can match (most strings of a report: library and function names)
                    self._done[(value, target)] = value
                    return value
            known = self._done[(value, target)] = self._text(value, target)
        return known

    def _text(self, value: str, target: bool) -> str:
        out = value
        for pattern, placeholder in self._paths:
            if target or placeholder != TARGET:
                out = pattern.sub(placeholder, out)
        out = _GENERIC_HOMES.sub(_users_folder if self.keep_home_folders else HOME, out)
        if self._name_re is not None:
            out = self._name_re.sub(lambda m: self._names.get(m.group(0).casefold(), USER), out)
        return out

    def target_path(self, value: str) -> str:
        """The target as the user typed it: relative to the working folder when below it."""
        relative = _relative_to(value, self.cwd)
        return self.text(relative if relative is not None else value, target=False)

    def resolved(self, value: str | None) -> str | None:
        """Where a library was found: relative to the target when inside it."""
        if value is None:
            return None
        if self.target_root:
            relative = _relative_to(value, self.target_root)
            if relative is not None and relative != ".":
                return self.text(relative)
        return self.text(value)

    # -- documents ----------------------------------------------------------

    def document(self, document: dict) -> dict:
        """A redacted copy of a scan report document (the input is not changed)."""
        out = self._walk(document, "")
        target = document.get("target")
        if isinstance(target, dict) and isinstance(target.get("path"), str):
            out["target"]["path"] = self.target_path(target["path"])
        # `out` is a copy of `document`: its lists have the same lengths
        for original, binary in zip(document.get("binaries") or (), out.get("binaries") or (), strict=True):
            for dep_before, dep in zip(original.get("dependencies") or (), binary.get("dependencies") or (),
                                       strict=True):

                dep["resolved"] = self.resolved(dep_before.get("resolved"))
        evidence = document.get("evidence")
        if isinstance(evidence, dict):  # levels, routes and statuses are vocabulary; details and paths are not
            kept = _copy(evidence)
            for family in (kept.get("families") or {}).values():
                if isinstance(family, dict) and isinstance(family.get("detail"), str):
                    family["detail"] = self.text(family["detail"])
            if isinstance(kept.get("binaries"), dict):
                kept["binaries"] = {self.text(k): v for k, v in kept["binaries"].items()}
            out["evidence"] = kept
        return out

    def data(self, value: Any) -> Any:
        """A redacted copy of any JSON-like data (a trace explanation, a verify report's own fields):
        every string in it, keys of objects too."""
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.data(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.data(v) for v in value]
        return self.text(value) if isinstance(value, str) else value

    def _walk(self, value: Any, context: str) -> Any:
        if isinstance(value, dict):
            return {key: _copy(item) if (context, key) in _KEEP else self._walk(item, key)
                    for key, item in value.items()}
        if isinstance(value, list):
            text = self.text
            return [text(item) if type(item) is str else self._walk(item, context) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value


def _longest_component(path: str) -> str:
    """The longest component of ``path`` (either separator), lower-cased."""
    return max(re.split(r"[\\/]+", path), key=len).lower()


def _users_folder(match: re.Match[str]) -> str:
    """`C:\\Users\\bob` -> `C:\\Users\\<user>`: the folder stays, the name goes."""
    found = match.group(0)
    return found[:max(found.rfind("\\"), found.rfind("/")) + 1] + USER


def is_redacted(path: str) -> bool:
    """Whether a path lost a user or host name to redaction, so that it cannot
    be used as it stands (the home folder's ``~`` / ``%USERPROFILE%`` can)."""
    return USER in path or HOST in path


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


def redact_document(document: dict, private: PrivateStrings | None = None, *,
                    target_root: str | os.PathLike[str] | None = None,
                    cwd: str | os.PathLike[str] | None = None) -> dict:
    """Shortcut: `Redactor(private, target_root=…, cwd=…).document(document)`."""
    return Redactor(private, target_root=target_root, cwd=cwd).document(document)


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


_WINDOWS_ABS = re.compile(r"^[A-Za-z]:[\\/]|^\\\\")


def _is_absolute(path: str) -> bool:
    return path.startswith("/") or bool(_WINDOWS_ABS.match(path))


def _relative_to(path: str, base: str | None) -> str | None:
    """`path` relative to `base` ("/"-separated), when both are absolute and path is inside base."""
    if not base or not _is_absolute(path) or not _is_absolute(base):
        return None
    windows = bool(_WINDOWS_ABS.match(base))
    split = ((lambda p: [x for x in re.split(r"[\\/]+", p) if x]) if windows
             else (lambda p: [x for x in p.split("/") if x]))
    parts, root = split(path), split(base)
    if not root:
        return None  # everything is below "/": not a place to be relative to
    fold = str.casefold if windows else (lambda s: s)
    if len(parts) < len(root) or [fold(p) for p in parts[:len(root)]] != [fold(r) for r in root]:
        return None
    rest = [p for p in parts[len(root):] if p != "."]
    if ".." in rest:
        return None
    return "/".join(rest) or "."
