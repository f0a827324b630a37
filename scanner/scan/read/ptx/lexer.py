"""The PTX text as ZLUDA's logos lexer sees it (ptx_parser/src/lib.rs, ``enum Token``).

Whole-module work is done by C-level bytes methods (the speed of the PTX
stage is that of these passes); comments and strings are read in the
distinct pieces of a text cut at `;` (:func:`read_piece`), and statements
are split into tokens only for the few distinct instruction forms a module
holds (:func:`tokens`).

* :func:`strip` blanks comments (``//…``, ``/*…*/``, the lexer's skip rule)
  and the inside of string literals, byte for byte (offsets stay those of the
  text as written), so that nothing inside them is read as code.
* :func:`lexer_error` is the first byte sequence no token rule matches:
  a byte outside the tokens' alphabet (``*``, ``/``, ``&``, ``#``, ``'``,
  any non-ASCII byte), an unterminated string, or a lone ``_``, ``$`` or
  ``%`` (the identifier rule ``[_$%][a-zA-Z0-9_$]+`` needs a second
  character: the sink operand ``_`` and ``.callprototype`` parameters named
  ``_`` do not lex). logos then yields an error and ZLUDA parses nothing.
"""
from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["ZERO_DIGITS", "PieceText", "lexer_error", "lone_lead", "read_piece", "strip", "tokens"]

# Each pattern starts with a literal or a character set, so that sre scans for it at C speed: a
# pattern that starts with an alternation or a lookbehind is tried at every byte (ten times slower).
#: strings first (a `//` inside one is not a comment), on one line (a lone `"` in a comment is no string)
_STRINGS = re.compile(rb'"[^"\n]*"')
_LINE_COMMENTS = re.compile(rb"//[^\n\r]*")
_BLOCK_COMMENTS = re.compile(rb"/\*[^*]*\*+(?:[^/*][^*]*\*+)*/")
#: the alphabet of the Token enum's rules (deleted by bytes.translate, C speed: what is left is foreign)
_ALPHABET = bytes(sorted(set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ \t\r\n\f\v"
                             b',.:;@|!()[]{}<>+-=$%"')))
_BAD_BYTE = re.compile(rb'[^\w\s,.:;@|!()\[\]{}<>+\-=$%"]')
#: identifier characters to "a", the lead characters `_ $ %` to themselves, anything else to a blank: a
#: lone lead character (neither preceded nor followed by an identifier character) is then " _ " (found
#: with bytes.find, C speed, where a regular expression stops at every `%` of every register)
_LEADS = bytes((ord("_") if c in b"_$%" else ord("a") if chr(c).isascii() and chr(c).isalnum() else ord(" "))
               for c in range(256))
#: digits to 0: operands that differ only by register numbers and immediates read the same
ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
#: every byte but a newline to a blank (a block comment keeps its lines)
_BLANK = bytes(c if c in b"\n\r" else ord(" ") for c in range(256))

_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<dot>\.[A-Za-z_$%][\w$]*(?:::[\w$]+)*)"
    r"|(?P<num>0[fF][0-9a-zA-Z]{8}|0[dD][0-9a-zA-Z]{16}|0[xX][0-9a-zA-Z]+U?|[0-9]*\.[0-9]+(?:[eE][-+]?[0-9]+)?"
    r"|[0-9]+U?)"
    r"|(?P<id>[A-Za-z][\w$]*|[_$%][\w$]+)"
    r"|(?P<p>[,;:@|!()\[\]{}<>+\-=])"
    r")")


def _blank(m: re.Match[bytes]) -> bytes:
    return m.group().translate(_BLANK)


def _blank_inside(m: re.Match[bytes]) -> bytes:
    return b'"' + m.group()[1:-1].translate(_BLANK) + b'"'


def strip(text: bytes) -> bytes:
    """Comments and the inside of strings blanked, every other byte where it was."""
    if b'"' in text:
        text = _STRINGS.sub(_blank_inside, text)
    if b"//" in text:
        text = _LINE_COMMENTS.sub(_blank, text)
    if b"/*" in text:
        text = _BLOCK_COMMENTS.sub(_blank, text)
    return text


class PieceText(NamedTuple):
    """One piece of a text cut at `;` as the lexer sees it (:func:`read_piece`)."""

    text: bytes  #: :func:`strip`'s output for the piece
    #: a comment or string may run on past the piece's `;` (or a block comment is in it): the piece cannot
    #: be read alone, the whole text must be stripped first
    open_end: bool
    #: something in it the lexer rejects (a foreign byte, a lone quote, a lone lead character)
    lexer_error: bool


def read_piece(piece: bytes) -> PieceText:
    """A piece of a text cut at `;` (digits may be 0): stripped, and what it holds that matters alone.

    Stripping piece by piece is stripping the text when no piece ends inside a comment or a string (no
    `;` is then inside one): a caller checks ``open_end`` of every piece it cut."""
    text = piece
    open_end = b"/*" in piece
    lone_quote = False
    if b'"' in text:
        text = _STRINGS.sub(_blank_inside, text)
        last = _STRINGS.sub(_nuls, piece).rfind(b'"')  # a quote no string on its line closes
        lone_quote = last >= 0
        # with no line end after it, a quote may open a string the next piece closes
        open_end = open_end or (lone_quote and _line_end(piece, last) < 0)
    if b"//" in text:
        last = text.rfind(b"//")
        open_end = open_end or _line_end(text, last) < 0  # a comment runs on past the piece's `;`
        text = _LINE_COMMENTS.sub(_blank, text)
    bad = lone_quote or bool(text.translate(None, _ALPHABET)) or lone_lead(text)
    return PieceText(text, open_end, bad)


def _nuls(m: re.Match[bytes]) -> bytes:
    return b"\0" * len(m.group())


def _line_end(text: bytes, at: int) -> int:
    ends = [i for i in (text.find(b"\n", at), text.find(b"\r", at)) if i >= 0]
    return min(ends) if ends else -1


def lone_lead(text: bytes) -> bool:
    """Whether ``text`` (a module or a piece of it cut at `;`, which is no identifier character) holds a
    lone ``_``, ``$`` or ``%``."""
    leads = text.translate(_LEADS)
    return leads == b"_" or leads.startswith(b"_ ") or leads.endswith(b" _") or b" _ " in leads


def lexer_error(stripped: bytes) -> tuple[int, bytes] | None:
    """(offset, text) of the first thing ZLUDA's lexer rejects in :func:`strip`'s output, or None."""
    found = []
    if stripped.translate(None, _ALPHABET):
        bad = _BAD_BYTE.search(stripped)
        if bad is not None:
            found.append(bad.start())
    leads = stripped.translate(_LEADS)  # one pass for `_`, `$` and `%`; the text's ends apart (no copies)
    if leads.startswith(b"_ ") or leads == b"_":
        found.append(0)
    else:
        lone = leads.find(b" _ ")
        if lone >= 0:
            found.append(lone + 1)
        elif leads.endswith(b" _"):
            found.append(len(leads) - 1)
    unquoted = _STRINGS.sub(_nuls, stripped) if b'"' in stripped else b""
    at = unquoted.find(b'"')
    if at >= 0:  # a quote no string closes on its line: an unterminated string
        found.append(at)
    if not found:
        return None
    first = min(found)
    start = stripped.rfind(b"\n", 0, first) + 1
    end = stripped.find(b"\n", first)
    return first, stripped[start:end if end >= 0 else len(stripped)].strip()[:120]


def tokens(text: str, keywords: frozenset[str]) -> list[tuple[str, str]]:
    """(kind, text) tokens of one statement: kind "dot" (a dotted token), "num", "id", "kw" (an opcode or
    another literal token: not an identifier to the parser), or the punctuation itself.

    A dotted run such as ``.shared::cta`` is one token when the lexer has it as a literal (logos takes
    the longest match); otherwise it is split where the literal ends, as logos would."""
    out: list[tuple[str, str]] = []
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip():
                out.append(("?", text[pos:].strip()[:1]))
            break
        pos = m.end()
        kind = m.lastgroup or "?"
        value = m.group(kind)
        if kind == "dot" and "::" in value and value not in keywords:
            head, _, _ = value.partition("::")
            pos -= len(value) - len(head)
            value = head
        if kind == "id" and value in keywords:
            kind = "kw"
        out.append((kind if kind != "p" else value, value))
    return out
