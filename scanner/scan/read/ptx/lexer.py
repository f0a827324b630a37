"""The PTX text as ZLUDA's logos lexer sees it (ptx_parser/src/lib.rs, ``enum Token``).

Whole-module work is done by C-level regular expressions over bytes (the
speed of the PTX stage is that of these passes); statements are split into
tokens only for the few distinct instruction forms a module holds
(:func:`tokens`).

* :func:`strip` blanks comments (``//…``, ``/*…*/``, the lexer's skip rule)
  and empties string literals, so that nothing inside them is read as code.
* :func:`lexer_error` is the first byte sequence no token rule matches:
  a byte outside the tokens' alphabet (``*``, ``/``, ``&``, ``#``, ``'``,
  any non-ASCII byte), an unterminated string, or a lone ``_``, ``$`` or
  ``%`` (the identifier rule ``[_$%][a-zA-Z0-9_$]+`` needs a second
  character: the sink operand ``_`` and ``.callprototype`` parameters named
  ``_`` do not lex). logos then yields an error and ZLUDA parses nothing.
"""
from __future__ import annotations

import re

__all__ = ["ZERO_DIGITS", "ZERO_MARK", "lexer_error", "lone_lead", "strip", "tokens"]

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
#: the same, and every byte outside the alphabet to `#` (itself outside it): the pass that makes the
#: statement keys also finds the first foreign byte (bytes.find, memchr) with no pass of its own
ZERO_MARK = bytes(ord("0") if chr(c).isdigit() and c < 128 else c if c in _ALPHABET else ord("#")
                  for c in range(256))

_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<dot>\.[A-Za-z_$%][\w$]*(?:::[\w$]+)*)"
    r"|(?P<num>0[fF][0-9a-zA-Z]{8}|0[dD][0-9a-zA-Z]{16}|0[xX][0-9a-zA-Z]+U?|[0-9]*\.[0-9]+(?:[eE][-+]?[0-9]+)?"
    r"|[0-9]+U?)"
    r"|(?P<id>[A-Za-z][\w$]*|[_$%][\w$]+)"
    r"|(?P<p>[,;:@|!()\[\]{}<>+\-=])"
    r")")


def strip(text: bytes) -> bytes:
    """Comments blanked, strings emptied (``""``)."""
    if b'"' in text:
        text = _empty_strings(text)
    if b"//" in text:
        text = _LINE_COMMENTS.sub(b" ", text)
    if b"/*" in text:
        text = _BLOCK_COMMENTS.sub(b" ", text)
    return text


def _empty_strings(text: bytes) -> bytes:
    """``_STRINGS.sub(b'""', text)`` by bytes.find (memchr; sre scans byte by byte): real PTX holds few
    strings (``.pragma "nounroll";``) in texts of tens of MB."""
    out: list[bytes] = []
    pos = 0
    at = text.find(b'"')
    while at >= 0:
        close = text.find(b'"', at + 1)
        if close < 0:
            break
        if text.find(b"\n", at + 1, close) >= 0:  # no string opens here: the regex retries at the next quote
            at = close
            continue
        out += (text[pos:at], b'""')
        pos = close + 1
        at = text.find(b'"', pos)
    if not out:
        return text
    out.append(text[pos:])
    return b"".join(out)


def lone_lead(text: bytes) -> bool:
    """Whether ``text`` (a module or a piece of it cut at `;`, which is no identifier character) holds a
    lone ``_``, ``$`` or ``%``."""
    leads = text.translate(_LEADS)
    return leads == b"_" or leads.startswith(b"_ ") or leads.endswith(b" _") or b" _ " in leads


def lexer_error(stripped: bytes, marked: bytes | None = None,
                pieces: frozenset[bytes] | None = None) -> tuple[int, bytes] | None:
    """(offset, text) of the first thing ZLUDA's lexer rejects in :func:`strip`'s output, or None.

    ``marked`` (``stripped.translate(ZERO_MARK)``) and ``pieces`` (the distinct pieces of ``marked``
    cut at `;`, or none when the caller knows none holds a lone lead), when a caller has them, spare a
    pass each: a foreign byte is a `#` of ``marked``, and a lone lead character is in one of the pieces
    (the leads pass runs only then)."""
    found = []
    if marked is not None:
        bad_at = marked.find(b"#")
        if bad_at >= 0:
            found.append(bad_at)
    elif stripped.translate(None, _ALPHABET):
        bad = _BAD_BYTE.search(stripped)
        if bad is not None:
            found.append(bad.start())
    if pieces is None or (pieces and any(map(lone_lead, pieces))):
        leads = stripped.translate(_LEADS)  # one pass for `_`, `$` and `%`; the text's ends apart (no copies)
        if leads.startswith(b"_ ") or leads == b"_":
            found.append(0)
        else:
            lone = leads.find(b" _ ")
            if lone >= 0:
                found.append(lone + 1)
            elif leads.endswith(b" _"):
                found.append(len(leads) - 1)
    at = stripped.find(b'"')
    while 0 <= at < (min(found) if found else len(stripped)):
        if stripped[at + 1:at + 2] != b'"':  # strip left only `""`: a lone quote opens a string never closed
            found.append(at)
            break
        at = stripped.find(b'"', at + 2)
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
