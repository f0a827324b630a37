"""The validation kit every rule file uses: read TOML, check tables, provenance.

    doc = read_toml(path)
    prov = read_provenance(path, doc)            # the mandatory [provenance] table
    top_level(path, doc, ("provenance", "gpu"))  # no unknown top-level keys
    for i, row in enumerate(rows(path, doc, "gpu")):
        check(path, f"gpu #{i + 1}", row, {"gfx": is_nonempty_str}, {"notes": is_str})

Each check raises RulesError(path, message) naming the file and the problem,
so a new rule kind (see docs/design.md "Adding a rule kind") reads like the
shipped ones. Pure functions; nothing here knows a rule kind.
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "ID_RE",
    "PLATFORMS",
    "Provenance",
    "RulesError",
    "Schema",
    "basename",
    "check",
    "check_anchored",
    "check_platform",
    "choice",
    "compile_pattern",
    "is_bool",
    "is_int",
    "is_nonempty_str",
    "is_str",
    "is_str_list",
    "is_table",
    "read_provenance",
    "read_toml",
    "rows",
    "shipped_rules_dir",
    "top_level",
]

PLATFORMS: tuple[str, ...] = ("windows", "linux")
#: ids of families, function tables and frameworks
ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class RulesError(Exception):
    """Invalid rule data: `path` is the offending file, `message` the problem."""

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        self.path = Path(path)
        self.message = message
        super().__init__(f"{self.path}: {message}")

    def __reduce__(self) -> tuple[type[RulesError], tuple[Path, str]]:
        # keep picklable (multiprocessing) despite two args
        return (type(self), (self.path, self.message))


@dataclass(frozen=True)
class Provenance:
    """Where a rule file's facts come from (its mandatory [provenance] table)."""

    path: Path
    generated_by: str
    sources: tuple[str, ...]
    upstream: tuple[str, ...] = ()
    date: str | None = None
    notes: tuple[str, ...] = ()


def shipped_rules_dir() -> Path:
    """The folder of the rules shipped with cuda4amd (the data package `cuda4amd.ruledata`)."""
    import importlib

    data = importlib.import_module("cuda4amd.ruledata")  # a data package (rules/), not code
    return Path(data.__file__ or "").resolve().parent


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML document in `path`, parsed; a shipped file's once per install (rules/toml_cache.py)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise RulesError(path, f"cannot read: {e.strerror or e}") from None
    try:
        if path.resolve().is_relative_to(shipped_rules_dir()):
            from cuda4amd.rules.toml_cache import cached_document  # here: it imports userdirs and pickle

            return cached_document(path, data, lambda raw: tomllib.loads(raw.decode()))
        return tomllib.loads(data.decode())
    except UnicodeDecodeError as e:
        raise RulesError(path, f"not valid TOML: not UTF-8 at byte {e.start}") from None
    except tomllib.TOMLDecodeError as e:
        raise RulesError(path, f"not valid TOML: {e}") from None


# type checkers for the schema tables
def is_str(v: Any) -> bool:
    return isinstance(v, str)


def is_nonempty_str(v: Any) -> bool:
    return isinstance(v, str) and v.strip() != ""


def is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def is_table(v: Any) -> bool:
    return isinstance(v, dict)


_TYPE_NAMES: dict[Callable[[Any], bool], str] = {
    is_str: "a string", is_nonempty_str: "a non-empty string",
    is_str_list: "a list of strings", is_int: "an integer", is_bool: "true or false",
    is_table: "a table",
}

Schema = Mapping[str, Callable[[Any], bool]]
_NO_KEYS: Schema = {}


def check(path: Path, where: str, obj: Any, required: Schema, optional: Schema = _NO_KEYS) -> dict[str, Any]:
    """`obj` is a table with every `required` key, no key outside `required`
    and `optional`, and each value of the type its checker accepts."""
    if not isinstance(obj, dict):
        raise RulesError(path, f"{where}: expected a table, got {type(obj).__name__}")
    unknown = [k for k in obj if k not in required and k not in optional]
    if unknown:
        allowed = ", ".join([*required, *optional])
        raise RulesError(path, f"{where}: unknown key {unknown[0]!r} (allowed: {allowed})")
    missing = [k for k in required if k not in obj]
    if missing:
        raise RulesError(path, f"{where}: missing key {missing[0]!r}")
    for k, v in obj.items():
        ok = required.get(k) or optional[k]
        if not ok(v):
            raise RulesError(path, f"{where}: {k!r} must be {_TYPE_NAMES.get(ok, 'valid')}, got {v!r}")
    return obj


def choice(path: Path, where: str, key: str, value: Any, allowed: Sequence[str]) -> str | None:
    """`value` (None when the key was left out) is one of `allowed`."""
    if value is None:
        return None
    if value not in allowed:
        raise RulesError(path, f"{where}: {key} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def check_anchored(path: Path, where: str, pattern: str) -> None:
    if not pattern.startswith("^"):
        raise RulesError(path, f"{where}: pattern {pattern!r} must be anchored with '^'")


def compile_pattern(path: Path, where: str, pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`pattern` compiled on its own; anchored with '^', since lookups use `match`."""
    check_anchored(path, where, pattern)
    try:
        return re.compile(pattern, flags)
    except (re.error, RecursionError, OverflowError) as e:  # the last two: nesting or a repeat count too large
        raise RulesError(path, f"{where}: bad regex {pattern!r}: {e}") from None


def basename(file_name: str, platform: str) -> str:
    """The last part of a name or path: after '/', and on Windows after '\\' too.
    A platform other than PLATFORMS is a caller's mistake (ValueError), not bad rule data."""
    if platform not in PLATFORMS:
        raise ValueError(f"platform must be one of {PLATFORMS}, not {platform!r}")
    if platform == "windows":
        file_name = file_name.replace("\\", "/")
    return file_name.rsplit("/", 1)[-1]


def check_platform(path: Path, where: str, value: str) -> str:
    if value not in PLATFORMS:
        raise RulesError(path, f"{where}: platform must be one of {', '.join(PLATFORMS)}, got {value!r}")
    return value


_PROVENANCE_REQUIRED: Schema = {"generated_by": is_nonempty_str, "sources": is_str_list}
_PROVENANCE_OPTIONAL: Schema = {"upstream": is_str_list, "date": is_str, "notes": is_str_list}


def read_provenance(path: Path, doc: dict[str, Any]) -> Provenance:
    """The file's [provenance] table (mandatory in every rule file)."""
    if "provenance" not in doc:
        raise RulesError(path, "missing the mandatory [provenance] table (generated_by, sources, ...)")
    p = check(path, "[provenance]", doc["provenance"], _PROVENANCE_REQUIRED, _PROVENANCE_OPTIONAL)
    if not p["sources"] or not all(s.strip() for s in p["sources"]):
        raise RulesError(path, "[provenance]: 'sources' must list at least one non-empty source")
    return Provenance(
        path=path,
        generated_by=p["generated_by"],
        sources=tuple(p["sources"]),
        upstream=tuple(p.get("upstream", ())),
        date=p.get("date"),
        notes=tuple(p.get("notes", ())),
    )


def top_level(path: Path, doc: dict[str, Any], allowed: Sequence[str]) -> None:
    for k in doc:
        if k not in allowed:
            raise RulesError(path, f"unknown top-level key {k!r} (allowed: {', '.join(allowed)})")


def rows(path: Path, doc: dict[str, Any], key: str) -> list[Any]:
    """The [[key]] array of tables (empty when absent)."""
    found = doc.get(key, [])
    if not isinstance(found, list):
        raise RulesError(path, f"{key!r} must be an array of tables ([[{key}]])")
    return found
