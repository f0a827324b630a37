"""A PTX module's structure, read as ZLUDA's parser reads it (ptx_parser/src/lib.rs: fn module,
fn directive, fn function), precisely enough to apply its rules, no more.

    module = read_module(text)     # text: lexer.strip's output (or the text as written: see read_module)
    module.header_problem          # what in `.version`/`.target` the parser may refuse (or None)
    for f in module.functions:     # every .entry/.func, declarations included
        f.name, f.kernel, f.tuning, f.body_start
    body_end(text, brace, limit)   # where a body ends (read only when a statement must be placed)
    calls(text, start, end)        # the names a body calls (read only when a function was dropped)

This reads functions, not statements: the statements of the whole text are
split and keyed once by cuda4amd.scan.read.ptx.reading, and where a body
starts and ends says which function a statement belongs to. Declarations (``.reg``,
``.local``, ``.shared``, ``.param``), labels, ``.loc``, ``.pragma`` and
blocks are not instructions: the grammar's variable and debug rules accept
what nvcc writes.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from cuda4amd.scan.read.ptx.lexer import strip

__all__ = ["HEADER_WORDS", "Function", "Module", "body_end", "calls", "read_module"]

_HEADER = re.compile(rb"\A\s*\.version\s+([0-9.]+)\s+\.target\s+([\w]+)((?:\s*,\s*[\w]+)*)\s*"
                     rb"(?:\.address_size\s+([0-9]+))?")
#: the linking directives a function's line may start with (fn linking_directives)
_LINKING = frozenset({b".extern", b".visible", b".weak"})
_IDENT_BYTE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")
_ENTRY_NAME = re.compile(rb"\s+([A-Za-z_$%][\w$]*)")
_FUNC_NAME = re.compile(rb"\s*(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)")
_PARAMS = re.compile(rb"\s*\([^)]*\)")
_CALL = re.compile(rb"\bcall(?:\.uni)?\s*(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)")
_BRACES = re.compile(rb"[{}]")
_DIRECTIVE = re.compile(rb"\.[A-Za-z_]\w*")
#: the words a function's header starts with (after its linking directives)
HEADER_WORDS = (b".entry", b".func")


@dataclass
class Function:
    name: str
    kernel: bool
    linking: str
    tuning: bytes  # the text between the parameters and the body (tuning directives)
    has_body: bool
    offset: int
    #: where its body starts, after its `{` (0: none); body_end says where it ends
    body_start: int = 0
    #: where the next function starts (or the text ends): its body ends before
    limit: int = 0
    #: the directives of ``tuning`` in order (read once here, not by each release's check)
    directives: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.tuning and not self.directives:
            self.directives = tuple(d.decode() for d in _DIRECTIVE.findall(self.tuning))


@dataclass
class Module:
    version: str
    target: str
    target_options: tuple[str, ...]
    address_size: int
    header_problem: str | None
    functions: list[Function]

    @property
    def kernels(self) -> list[str]:
        return [f.name for f in self.functions if f.kernel and f.has_body]


def read_module(text: bytes, words: Iterable[bytes] = HEADER_WORDS, first_piece: int = -1) -> Module:
    """The module's header and functions. ``text``: lexer.strip's output, or the text as written when no
    comment or string in it runs across a `;` (each function's lines up to its first `;` are stripped here
    when they hold one); ``words``: which of `.entry`/`.func` to look for (a caller that knows the text
    holds no `.func` spares a pass); ``first_piece``: where its first `;` is, when the caller knows."""
    head = text if first_piece < 0 else text[:first_piece]
    header = _HEADER.match(strip(head) if b"//" in head or b'"' in head else head)
    if header is None:
        problem = "no `.version` and `.target` at the start of the module"
        version, target, address = "", "", 32
        options: tuple[str, ...] = ()
    else:
        problem = None
        version = header.group(1).decode()
        target = header.group(2).decode()
        options = tuple(o.strip().decode() for o in header.group(3).split(b",") if o.strip())
        address = int(header.group(4) or 32)
        if not re.fullmatch(r"sm_[0-9]+[a-z]?", target):
            problem = f".target {target}"
    starts = _function_starts(text, words)
    functions = []
    for i, (at, linking, kernel, after) in enumerate(starts):
        stop = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        function = _function(text, at, linking, kernel, after, stop)
        if function is not None:
            functions.append(function)
    return Module(version, target, options, address, problem, functions)


def calls(text: bytes, start: int, end: int) -> set[str]:
    """The names a body, [start, end) of ``text`` (lexer.strip's output), calls."""
    if text.find(b"call", start, end) < 0:
        return set()
    return {c.decode("utf-8", "replace") for c in _CALL.findall(text, start, end)}


def _function_starts(text: bytes, words: Iterable[bytes]) -> list[tuple[int, str, bool, int]]:
    """(line start, linking directives, kernel?, offset after `.entry`/`.func`) of each function, in order:
    `.entry`/`.func` found with bytes.find (C speed), kept where only linking directives precede it on its
    line (not in a comment, then: a comment runs to its line's end)."""
    found = []
    for word in words:
        kernel = word == b".entry"
        at = text.find(word)
        while at >= 0:
            after = at + len(word)
            line = text.rfind(b"\n", 0, at) + 1
            before = text[line:at].split()
            if (after >= len(text) or text[after] not in _IDENT_BYTE) and all(w in _LINKING for w in before):
                found.append((line, " ".join(w.decode() for w in before), kernel, after))
            at = text.find(word, after)
    return sorted(found)


def _function(text: bytes, at: int, linking: str, kernel: bool, after: int, stop: int) -> Function | None:
    # the header is read up to the first `;` (a declaration's end, or the body's first statement's)
    end = text.find(b";", after, stop)
    end = stop if end < 0 else end
    region = text[at:end]
    if b"//" in region or b'"' in region:
        region = strip(region)
    named = (_ENTRY_NAME if kernel else _FUNC_NAME).match(region, after - at)
    if named is None:
        return None
    pos = named.end()
    params = _PARAMS.match(region, pos)
    if params is not None:
        pos = params.end()
    brace = region.find(b"{", pos)
    name = named.group(1).decode("utf-8", "replace")
    if brace < 0:  # a declaration: `.func (...) name (...);`
        return Function(name, kernel, linking, region[pos:], False, at, limit=stop)
    return Function(name, kernel, linking, region[pos:brace], True, at, at + brace + 1, stop)


def body_end(text: bytes, brace: int, stop: int, quick: bool = False) -> int:
    """The offset of the `}` closing the body that opens at ``brace`` (``stop``, where the next function
    starts, if it is never closed); ``text``: lexer.strip's output. ``quick``: only when its last brace
    closes it, else -1."""
    last = text.rfind(b"}", brace, stop)
    # most often the body is all there is before the next function: its last brace closes it (a module
    # variable after it ends with `;`; a trailing `.section` block holds no statements the forms would read)
    if last >= 0 and text.find(b";", last, stop) < 0 and text.count(b"{", brace, last) == text.count(b"}", brace, last) + 1:
        return last
    if quick:
        return -1
    depth = 0
    for m in _BRACES.finditer(text, brace, stop):
        depth += 1 if m.group() == b"{" else -1
        if depth == 0:
            return m.start()
    return stop
