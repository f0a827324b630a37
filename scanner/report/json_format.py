"""JSON: the machine-readable report (schema in docs/report-schema.md)."""
from __future__ import annotations

import json
from json.encoder import encode_basestring  # the C encoder where there is one
from typing import Any

__all__ = ["indented", "render"]


def render(document: dict) -> str:
    return indented(document) + "\n"


def indented(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, the same text about twice as fast.

    With an indent, the standard library encodes in Python, one generator
    step per value (the C encoder takes no indent before Python 3.14): for
    the device venv's 46,000-line report that was most of the 50-90 ms
    the report took to write. This writes the same text with a plain
    recursion over the exact types a report holds (dict with str keys,
    list, tuple, str, int, float, bool, None), strings escaped by the
    standard library's own encoder. Anything else (a subclass, another key type, a cycle or a
    structure too deep to recurse) goes to ``json.dumps`` whole, so the
    result, or the error, is always what it gives.
    """
    text = _scalar(value)
    if text is not None:
        return text
    out: list[str] = []
    try:
        _write(value, out, ["\n"])
    except (_NotPlain, RecursionError):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return "".join(out)


_INFINITY = float("inf")


class _NotPlain(Exception):
    """A value this writer leaves to json.dumps."""


def _scalar(value: Any) -> str | None:
    kind = type(value)
    if kind is str:
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        if value != value:  # the texts json.dumps gives (allow_nan)
            return "NaN"
        if value == _INFINITY:
            return "Infinity"
        if value == -_INFINITY:
            return "-Infinity"
        return float.__repr__(value)
    return None


def _write(value: Any, out: list[str], breaks: list[str], depth: int = 0) -> None:
    """``value``, not a scalar (its caller asked :func:`_scalar` first), at nesting ``depth`` onto ``out``;
    ``breaks[d]``: a line break and the indent of depth d."""
    kind = type(value)
    if kind is not dict and kind is not list and kind is not tuple:
        raise _NotPlain
    if not value:
        out.append("{}" if kind is dict else "[]")
        return
    if len(breaks) <= depth + 1:
        breaks.append(breaks[-1] + "  ")
    inner = breaks[depth + 1]
    separator = "," + inner
    put = out.append
    lead = ("{" if kind is dict else "[") + inner
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain  # json.dumps turns int, float, bool and None keys into text
            text = _scalar(item)
            if text is not None:
                put(lead + encode_basestring(key) + ": " + text)
            else:
                put(lead + encode_basestring(key) + ": ")
                _write(item, out, breaks, depth + 1)
            lead = separator
        put(breaks[depth] + "}")
        return
    for item in value:
        text = _scalar(item)
        if text is not None:
            put(lead + text)
        else:
            put(lead)
            _write(item, out, breaks, depth + 1)
        lead = separator
    put(breaks[depth] + "]")
