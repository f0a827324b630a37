"""Saved reports from anyone: read within bounds and checked against the shipped JSON Schema before use.

`cuda4amd report`, `diff` and `matrix` read files other people wrote (a report attached to an issue,
a folder of reports to fold). Every consumer downstream indexes fields as the schema promises, so a
report is used only once it matches scanner/report/schemas/scan.json (issue 31, item 5: type and shape
mutants raised KeyError, TypeError, AttributeError at 81 places). Before the parser runs, the text is
bounded in size, in nesting depth and, for TOML, in the length of dotted keys: Python's TOML reader
builds a key tuple per level of a dotted key (40 KB of ``a.a.a…`` took 1.6 GB), and both parsers
recurse per level (100,000 levels: RecursionError).

Reports of earlier versions (``cuda4amd.scan/1``, ``/2``; the schema's shape did not change with the
ids) are read as before: checked against the current schema, with only the top-level fields every
version wrote required (`REQUIRED`); `matrix` folds any readable report whose fields have their types.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from cuda4amd.report.document import SCHEMA as SCAN_SCHEMA

__all__ = ["CHECKS", "MAX_DEPTH", "MAX_REPORT_BYTES", "READABLE_SCAN_SCHEMAS", "REQUIRED", "ReportFileError",
           "check_shape", "read_bounded", "schema_problem"]

#: scan schemas read back: /1 and /2 reports (saved by earlier versions) compare and fold too
READABLE_SCAN_SCHEMAS = ("cuda4amd.scan/1", "cuda4amd.scan/2", SCAN_SCHEMA)

#: the largest saved report read (a full-venv JSON report is a few MB)
MAX_REPORT_BYTES = 64 << 20
#: the deepest nesting of arrays and objects (or tables and dotted keys) read; reports nest about 8 deep
MAX_DEPTH = 64
#: TOML strings (multi-line first), blanked before brackets and dots are counted
_TOML_STRINGS = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'')
_JSON_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")
#: a dotted key of more than MAX_DEPTH parts (strings were blanked to `s`)
_LONG_DOTTED = re.compile(r"(?:[\w-]+[ \t]*\.[ \t]*){" + str(MAX_DEPTH) + ",}")


class ReportFileError(ValueError):
    """A file that is not a cuda4amd scan report this version can read."""


def read_bounded(path: str | Path, limit: int = MAX_REPORT_BYTES) -> str:
    """The text of `path`: a regular file only (opened non-blocking: a FIFO would hang a plain read),
    at most `limit` bytes, UTF-8. Raises ReportFileError."""
    from cuda4amd.scan.read.engine import open_regular

    try:
        with open_regular(Path(path)) as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ReportFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ReportFileError(f"{path}: more than {limit} bytes: not a report this version reads")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReportFileError(f"{path}: not a JSON or TOML report ({exc})") from None


def check_shape(text: str, where: str, *, as_toml: bool) -> None:
    """Refuse text nested deeper than MAX_DEPTH (or, TOML, with a dotted key that long) before a parser
    sees it. Strings are blanked first, so brackets and dots inside them do not count."""
    if len(text) > MAX_REPORT_BYTES:
        raise ReportFileError(f"{where}: more than {MAX_REPORT_BYTES} bytes: not a report this version reads")
    bare = _TOML_STRINGS.sub("s", text) if as_toml else _JSON_STRINGS.sub("s", text)
    depth = deepest = 0
    for match in _BRACKETS.finditer(bare):
        depth += 1 if match.group() in "[{" else -1
        deepest = max(deepest, depth)
    if deepest > MAX_DEPTH or (as_toml and _LONG_DOTTED.search(bare)):
        raise ReportFileError(f"{where}: nested more than {MAX_DEPTH} levels deep: not a cuda4amd report")


#: the fields every scan report has had since /1 (what an earlier version's report must hold)
REQUIRED = ("schema", "target", "verdict", "zluda", "summary", "binaries", "errors")
#: how strictly: a current report; an earlier version's for report and diff (the current schema but only
#: REQUIRED at the top, whose later fields diff.LATER fills in); any readable one for matrix, which reads
#: each field only where it is there and of its type
CHECKS = ("current", "earlier", "fold")


@lru_cache(maxsize=len(CHECKS))
def _validator(check: str) -> Any:
    """The shipped schema's validator, as strict as `check` says."""
    import jsonschema

    schema = json.loads(files("cuda4amd.report").joinpath("schemas").joinpath("scan.json").read_text(encoding="utf-8"))
    if check == "fold":
        schema = _without_required(schema)
    if check != "current":
        schema["properties"]["schema"] = {"enum": list(READABLE_SCAN_SCHEMAS)}
    if check == "earlier":
        schema["required"] = list(REQUIRED)
    return jsonschema.Draft202012Validator(schema)


def _without_required(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_required(v) for k, v in node.items() if k != "required"}
    if isinstance(node, list):
        return [_without_required(v) for v in node]
    return node


def schema_problem(data: Any, check: str) -> str | None:
    """None when `data` matches the shipped schema as strictly as `check` (one of CHECKS) says, else the
    first problem, in one short line."""
    if _depth(data) > MAX_DEPTH:
        return f"nested more than {MAX_DEPTH} levels deep"
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator(check).iter_errors(data))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the document"
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    return f"{where}: {message}".encode("ascii", "backslashreplace").decode("ascii")


def _depth(value: Any) -> int:
    """The nesting depth of parsed data, without recursion (parsed data may be deeper than the text
    check allows only when it came from elsewhere, such as a verify report's scan)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest
