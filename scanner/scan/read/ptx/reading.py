"""One PTX text read once for every release's check: its pieces, lexer error, functions and statement keys.

    pieces = Pieces(checkers)           # kept across the texts of a stage: a library's texts share most pieces
    reading = Reading(text, pieces)     # text: a PTX entry as decompressed
    reading.special                     # the keys (pieces) some release must look at in this text
    reading.module, reading.lexer_error

The text is cut at `;` once, every digit made 0 (``translate``, C speed):
its distinct pieces are its statement keys, and a key's head is expanded
by a checker into the exact heads the lexer's tokens allow for it
(``ld.global.u00``: ``.u16``, ``.u32``, ``.u64``). What a piece reads as
(:class:`Piece`) is read once per stage, from the piece alone: comments and
strings are stripped in the distinct pieces, not in the text, which is
exact when none of them runs on past a `;` (else the text is stripped first
and cut again). A piece that reads ok at every release and holds no function
header and no lexer error is *plain*; the others are this text's
``special`` keys, found by one set difference. Only the keys some release
must look at are found where they occur (:meth:`Reading.locate`, one pass
over the pieces for all of them); a key whose exact heads decide apart is
keyed occurrence by occurrence by its head as written (:meth:`Reading.by_shape`,
from the text as written cut at `;`). Statements are placed in functions by
piece (:meth:`Reading.place`), and a body's end is read
(module.body_end) only for the bodies a refused statement may be in.
"""
from __future__ import annotations

import itertools
import operator
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol, TypeVar

from cuda4amd.scan.read.ptx.lexer import ZERO_DIGITS, lexer_error, read_piece, strip
from cuda4amd.scan.read.ptx.module import HEADER_WORDS, Function, Module, body_end, calls, read_module

__all__ = ["MAX_PIECES", "Piece", "Pieces", "Reading", "Shape", "parse_statement"]

#: (head, operand shape) of an instruction; b"" for no instruction; other bytes: a statement that is neither
Shape = tuple[bytes, bytes] | bytes
#: what may stand before a statement: blanks, block braces, labels (not `::`), `.loc` lines (no `;`);
#: one blank at a time: `\s+` inside `*` splits a run of blanks in exponentially many ways when the
#: rest fails (a module's header after comments blanked: seconds for 75 bytes)
_LEAD_IN = re.compile(rb"(?:\s|[{}]|[$%\w]+[ \t]*:(?!:)|\.loc\b[^\n]*)*")
#: then an instruction: a guard, the head, the operands
_STATEMENT = re.compile(_LEAD_IN.pattern + rb"(?:@!?[%$\w]+\s+)?([a-z][a-z0-9_]*(?:\.[\w:]+)*)([^:]*)\Z")
#: operand identifiers (registers, names, labels), not a `.x` member or a suffix of a number
_IDENTIFIERS = re.compile(rb"%[\w$]+|(?<![\w.$%])[A-Za-z_$][\w$]*")
#: distinct pieces kept per stage (a worker's memory bound: some hundred thousand per library)
MAX_PIECES = 1 << 20


class KeyJudge(Protocol):
    """What a release's checker says of a key shape: its decision when the text need not be looked at
    (every exact head it stands for decides so), else None."""

    def decide_key(self, shape: Shape) -> _Decided | None: ...


class _Decided(Protocol):
    @property
    def status(self) -> str: ...


_D = TypeVar("_D", bound=_Decided)


class Piece(NamedTuple):
    """What one distinct piece (a text cut at `;`, digits 0) reads as, the same in every text."""

    shape: Shape
    #: where its statement starts: after the `{` of a function header it holds, else 0
    at: int = 0
    #: where the head is in the piece ((0, 0): no instruction): the same in every occurrence
    head: tuple[int, int] = (0, 0)
    #: the words `.entry`/`.func` it holds (the functions are looked for only in texts with such pieces)
    words: tuple[bytes, ...] = ()
    open_end: bool = False  # a comment or string runs on past its `;`: the whole text must be stripped
    lexer_error: bool = False


class Pieces:
    """The pieces read so far and which of them are plain at every release of ``checkers``."""

    def __init__(self, checkers: Sequence[KeyJudge]) -> None:
        self.checkers = tuple(checkers)
        self.facts: dict[bytes, Piece] = {}
        #: the pieces that read ok at every release without a look at the text, with no header or lexer error
        self.plain: set[bytes] = set()

    def special(self, distinct: set[bytes]) -> dict[bytes, Piece]:
        """The pieces of ``distinct`` that are not plain, read (once) where new."""
        special = distinct - self.plain
        new = special.difference(self.facts)
        if len(self.facts) + len(new) > MAX_PIECES:
            self.facts.clear()
            self.plain.clear()
            special = new = set(distinct)
        facts = self.facts
        for key in new:
            fact = facts[key] = _read(key)
            if not (fact.words or fact.open_end or fact.lexer_error) and all(
                    _ok(checker.decide_key(fact.shape)) for checker in self.checkers):
                self.plain.add(key)
        return {key: facts[key] for key in special if key not in self.plain}


def _ok(decision: _Decided | None) -> bool:
    return decision is not None and decision.status == "ok"


def _read(key: bytes) -> Piece:
    piece = read_piece(key)
    text = piece.text
    words = tuple(word for word in HEADER_WORDS if word in text)
    at = _statement_start(text) if words and b"{" in text else 0
    statement = text[at:] if at else text
    m = _STATEMENT.match(statement)
    shape: Shape
    if m is None:
        shape = _not_an_instruction(statement)
        head = (0, 0)
    else:
        shape = _shape(m)
        head = (at + m.start(1), at + m.end(1))
    return Piece(shape, at, head, words, piece.open_end, piece.lexer_error)


def _statement_start(piece: bytes) -> int:
    """Where the first statement of a body starts in a piece that holds a function's header (after the
    `{` that follows the last `.entry`/`.func`), or 0."""
    last = max(piece.rfind(w) for w in HEADER_WORDS)
    brace = piece.find(b"{", last)
    return brace + 1 if brace >= 0 else 0


def parse_statement(statement: bytes) -> Shape:
    """(head, operand shape) of an instruction statement (lexer.strip's output); else b"" (a declaration
    or nothing) or the text that is neither."""
    m = _STATEMENT.match(statement)
    return _not_an_instruction(statement) if m is None else _shape(m)


def _shape(m: re.Match[bytes]) -> tuple[bytes, bytes]:
    return m.group(1), _IDENTIFIERS.sub(b"x", m.group(2).translate(ZERO_DIGITS))


def _not_an_instruction(statement: bytes) -> bytes:
    rest = _LEAD_IN.sub(b"", statement, count=1).strip()
    return b"" if not rest or rest.startswith(b".") else rest


class Reading:
    """What every release's check of one PTX text shares (the lexer's rules are the same at every tag in
    rules/kernels/)."""

    def __init__(self, text: bytes, pieces: Pieces) -> None:
        self._checkers = pieces.checkers  # the releases the pieces were read for: look_up serves them all
        stripped = False
        marked = text.translate(ZERO_DIGITS)
        #: the text cut at `;`, digits 0, in text order
        self.pieces = marked.split(b";")
        #: the keys (distinct pieces) that are not plain, and what they read as
        self.special = pieces.special(set(self.pieces))
        if not stripped and any(fact.open_end for fact in self.special.values()):
            text = strip(text)
            stripped = True
            self.pieces = text.translate(ZERO_DIGITS).split(b";")
            self.special = pieces.special(set(self.pieces))
        #: the text the pieces were cut from (as written, or stripped): offsets are the same in both
        self.text = text
        self._stripped = text if stripped else None
        self.lexer_error = (lexer_error(self.stripped) if any(f.lexer_error for f in self.special.values())
                            else None)
        words = sorted({word for fact in self.special.values() for word in fact.words})
        self.module: Module = read_module(text, words, len(self.pieces[0]))
        self._found: dict[bytes, list[int]] = {}
        self._exact: dict[bytes, dict[Shape, list[int]]] = {}
        self._written: list[bytes] | None = None
        self._body_pieces: tuple[list[int], list[int]] | None = None
        self._last_pieces: dict[int, int] = {}
        self._ends: dict[int, int] = {}
        self._occurrences: dict[Shape, list[int]] | None = None

    @property
    def stripped(self) -> bytes:
        """lexer.strip's output of the text (made when a statement must be placed or the lexer's error shown)."""
        if self._stripped is None:
            text = self.text
            self._stripped = strip(text) if b"/" in text or b'"' in text else text
        return self._stripped

    def look_up(self) -> dict[Shape, list[int]]:
        """Where the statements occur that one of the releases must decide as written: each shape (the exact
        shape of a key whose exact heads decide apart, else the key's) -> the pieces, ascending. The keys are
        found in one pass for all releases; made once per reading."""
        if self._occurrences is not None:
            return self._occurrences
        wanted: dict[bytes, bool] = {}  # key -> read occurrence by occurrence
        for key, fact in self.special.items():
            decisions = [checker.decide_key(fact.shape) for checker in self._checkers]
            if not all(map(_ok, decisions)):
                wanted[key] = None in decisions
        self.locate(wanted)
        occurrences: dict[Shape, list[int]] = {}
        merged = []  # the shapes several keys occur as: their pieces sorted once
        for key, exact in wanted.items():
            groups = self.by_shape(key) if exact else {self.special[key].shape: self._found[key]}
            for shape, indices in groups.items():
                known = occurrences.get(shape)
                if known is None:
                    occurrences[shape] = indices  # one key's pieces, ascending: kept, not copied
                else:
                    occurrences[shape] = known + indices
                    merged.append(shape)
        for shape in merged:
            occurrences[shape].sort()
        self._occurrences = occurrences
        return occurrences

    def place(self, bad: Iterable[tuple[Sequence[int], _D]], order: Sequence[str]) -> dict[int, list[_D]]:
        """Refused statements ((the pieces, ascending; what was decided), each kind of decision in
        ``order``) -> for each function whose body holds one of a kind (index in module.functions), the
        first of each kind in it, in body order. Statements outside every body count for none."""
        if self._body_pieces is None:
            self._body_pieces = self._first_pieces()
        firsts, numbers = self._body_pieces
        kinds = set(order)
        firsts_of: dict[tuple[int, str], tuple[int, _D]] = {}  # (body, kind) -> its first refused piece
        for indices, decision in bad:
            if decision.status not in kinds:
                continue
            at = bisect_left(indices, firsts[0]) if firsts else len(indices)
            while at < len(indices):  # the shape's first piece in each body, the bodies found by bisection
                piece = indices[at]
                body = bisect_right(firsts, piece) - 1
                if piece <= self._last_piece(body):
                    known = firsts_of.get((body, decision.status))
                    if known is None or piece < known[0]:
                        firsts_of[(body, decision.status)] = (piece, decision)
                at = bisect_left(indices, firsts[body + 1], at) if body + 1 < len(firsts) else len(indices)
        found: dict[int, list[tuple[int, _D]]] = {}
        for (body, _), first in firsts_of.items():
            found.setdefault(numbers[body], []).append(first)
        return {number: [d for _, d in sorted(first, key=operator.itemgetter(0))] for number, first in found.items()}

    def _last_piece(self, body: int) -> int:
        """The piece the body (in ``_first_pieces`` order) ends in: the `;` between its end and the next
        body's start counted (a few, C-level)."""
        last = self._last_pieces.get(body)
        if last is None:
            assert self._body_pieces is not None  # place reads them first
            firsts, numbers = self._body_pieces
            functions = self.module.functions
            end = self.body_end(functions[numbers[body]])
            if body + 1 < len(firsts):
                last = firsts[body + 1] - self.text.count(b";", end, functions[numbers[body + 1]].body_start)
            else:
                last = len(self.pieces) - 1 - self.text.count(b";", end)
            self._last_pieces[body] = last
        return last

    def _first_pieces(self) -> tuple[list[int], list[int]]:
        """(the piece each body starts in, ascending; the function's index): the `;` before each counted
        once (C-level)."""
        firsts: list[int] = []
        numbers: list[int] = []
        at = piece = 0
        for start, number in sorted((f.body_start, i) for i, f in enumerate(self.module.functions) if f.has_body):
            piece += self.text.count(b";", at, start)
            at = start
            firsts.append(piece)
            numbers.append(number)
        return firsts, numbers

    def body_end(self, function: Function) -> int:
        """Where the body of ``function`` ends (its `}`): read in the text as written when its last brace
        closes it there (a brace in a comment then only makes a body longer, never shorter), else in the
        body's lines stripped (a comment or string never spans a line start)."""
        end = self._ends.get(function.body_start)
        if end is None:
            brace, stop = function.body_start - 1, function.limit
            end = body_end(self.text, brace, stop, quick=True)
            if end < 0:
                text, base = self._body_text(function)
                end = body_end(text, brace - base, stop - base) + base
            self._ends[function.body_start] = end
        return end

    def calls(self, function: Function) -> set[str]:
        """The names the body of ``function`` calls."""
        start, end = function.body_start, self.body_end(function)
        if self.text.find(b"call", start, end) < 0:
            return set()
        text, base = self._body_text(function)
        return calls(text, start - base, end - base)

    def _body_text(self, function: Function) -> tuple[bytes, int]:
        """(the body's lines stripped, where they start in the text)."""
        if self._stripped is not None:
            return self._stripped, 0
        brace = function.body_start - 1
        return strip(self.text[brace:function.limit]), brace

    def locate(self, keys: Iterable[bytes]) -> None:
        """Find where ``keys`` occur (one pass over the pieces for all keys not located yet)."""
        wanted = {key for key in keys if key not in self._found}
        if not wanted:
            return
        found = self._found
        for key in wanted:
            found[key] = []
        pieces = self.pieces
        # C-level: membership of every piece by map, the hits picked by compress (a Python loop over the
        # pieces costs 3 times as much); only the hits are seen in Python
        for index in itertools.compress(itertools.count(), map(wanted.__contains__, pieces)):
            found[pieces[index]].append(index)

    def indices(self, key: bytes) -> list[int]:
        """Which pieces are ``key``, in text order."""
        found = self._found.get(key)
        if found is None:
            self.locate((key,))
            found = self._found[key]
        return found

    def by_shape(self, key: bytes) -> dict[Shape, list[int]]:
        """The occurrences of ``key`` by their exact shape (the head as written), each in text order."""
        groups = self._exact.get(key)
        if groups is not None:
            return groups
        groups = {}
        fact = self.special[key]
        indices = self.indices(key)
        if self._written is None:  # the text cut at `;` as written (a pass, made for texts with such keys)
            self._written = self.text.split(b";")
        written = list(map(self._written.__getitem__, indices))
        if isinstance(fact.shape, tuple):
            head, end = fact.head  # the same place in every occurrence: digits keep their length
            heads = [piece[head:end] for piece in written]
            if len(set(heads)) == 1:  # most often: one head as written
                return self._exact.setdefault(key, {(heads[0], fact.shape[1]): indices})
            for exact, index in zip(heads, indices, strict=True):
                groups.setdefault((exact, fact.shape[1]), []).append(index)
        else:
            for piece, index in zip(written, indices, strict=True):
                groups.setdefault(parse_statement(strip(piece)[fact.at:]), []).append(index)
        self._exact[key] = groups
        return groups
