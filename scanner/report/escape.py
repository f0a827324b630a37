"""Names from a scanned tree, made safe to show: control characters become visible escapes.

    visible("a\nb\x1b]52;c;...\x07")   # 'a\\nb\\x1b]52;c;...\\x07'
    visible_document(document)          # the same for every string of a report document

A file name may hold newlines (ending a Markdown ``<summary>`` or a Mermaid
label early, or starting a live link on a line of its own), terminal escape
sequences (OSC 52 sets the clipboard, OSC 0 the window title, CSI moves the
cursor) or bidirectional overrides that make text read in another order. The
console and Markdown reports show each such character as an escape (``\\n``,
``\\x1b``, ``\\u202e``); JSON and TOML keep the exact name (their encoders
escape control characters themselves), so a machine reading them gets the
name as it is. Undecodable bytes of a name are already ``\\xNN`` text
(cuda4amd.scan.discover.printable), so two names that differ only there stay
two names. A backslash is not escaped: ``\\x1b`` in a shown name may be
either the escape or those four characters; the JSON report tells them apart.
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["visible", "visible_document", "visible_lines"]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0 controls, DEL, C1 controls (0x9b is CSI and 0x9d OSC on many terminals), line and paragraph
# separators, bidirectional embeddings / overrides / isolates (Unicode UAX #9), lone surrogates
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                                 "\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named:
        return named
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control, separator and direction character as a visible escape."""
    return _UNSAFE.sub(_escape, text)


def visible_lines(text: str) -> str:
    """Like visible, but line breaks stay: for messages of several lines."""
    return _UNSAFE_BUT_NEWLINE.sub(_escape, text)


def visible_document(value: Any) -> Any:
    """A copy of a report document (dicts, lists, strings) with every string (keys too) made visible."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible_document(k): visible_document(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(visible_document(v) for v in value)
    return value
