"""A PTX module's structure, read as ZLUDA's parser reads it (ptx_parser/src/lib.rs: fn module,
fn directive, fn function, fn statement), precisely enough to apply its rules, no more.

    module = read_module(text)     # text: the entry's bytes, comments and strings already stripped
    module.header_problem          # what in `.version`/`.target` the parser may refuse (or None)
    for f in module.functions:     # every .entry/.func, declarations included
        f.name, f.kernel, f.tuning, f.forms, f.calls

``forms`` is the set of distinct instruction statements of a function as
(head, operands) pairs: the head (opcode and modifiers, ``ld.global.nc.f32``)
as written, the operands with every digit made 0, so that statements that
differ only by register numbers or immediates are one form. Real functions
repeat few forms; each is decided once (cuda4amd.scan.read.ptx.judge).
Declarations (``.reg``, ``.local``, ``.shared``, ``.param``), labels,
``.loc``, ``.pragma`` and blocks are not forms: the grammar's variable and
debug rules accept what nvcc writes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from cuda4amd.scan.read.ptx.lexer import ZERO_DIGITS

__all__ = ["Function", "Module", "read_module"]

_HEADER = re.compile(rb"\A\s*\.version\s+([0-9.]+)\s+\.target\s+([\w]+)((?:\s*,\s*[\w]+)*)\s*"
                     rb"(?:\.address_size\s+([0-9]+))?")
_FUNCTION = re.compile(rb"(?m)^[ \t]*((?:\.(?:extern|visible|weak)[ \t]+)*)\.(entry|func)\b")
_ENTRY_NAME = re.compile(rb"\s+([A-Za-z_$%][\w$]*)")
_FUNC_NAME = re.compile(rb"\s*(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)")
_PARAMS = re.compile(rb"\s*\([^)]*\)")
# One instruction statement: where a statement may start (a line start, after `;`, `{` or `}`), an
# optional label and guard, the head, the operands up to `;`. Two patterns that match alike, one
# capturing the head (read from the text), one the operands (read from the text with digits 0).
_STMT_START = rb"(?m)(?:(?<=[;{}])|^)[ \t\r\n]*(?:[$%\w]+[ \t]*:(?!:)[ \t\r\n]*)*(?:@!?[%$\w]+[ \t]+)?"
_STMT_HEAD = rb"[a-z][a-z0-9_]*(?:\.[\w:]+)*"
_STMT_OPERANDS = rb"[^;{}:]*(?:\{[^;{}:]*\}[^;{}:]*)*"
_HEADS = re.compile(_STMT_START + b"(" + _STMT_HEAD + b")" + _STMT_OPERANDS + b";")
_OPERANDS = re.compile(_STMT_START + _STMT_HEAD + b"(" + _STMT_OPERANDS + b");")
_CALL = re.compile(rb"\bcall(?:\.uni)?\s*(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)")
_BRACES = re.compile(rb"[{}]")


@dataclass
class Function:
    name: str
    kernel: bool
    linking: str
    tuning: bytes  # the text between the parameters and the body (tuning directives)
    has_body: bool
    forms: set[tuple[bytes, bytes]]
    calls: set[str]
    offset: int


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


def read_module(text: bytes) -> Module:
    """The module's header and functions (``text``: lexer.strip's output)."""
    header = _HEADER.match(text)
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
    starts = list(_FUNCTION.finditer(text))
    functions = []
    for i, m in enumerate(starts):
        stop = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        function = _function(text, m, stop)
        if function is not None:
            functions.append(function)
    return Module(version, target, options, address, problem, functions)


def _function(text: bytes, m: re.Match[bytes], stop: int) -> Function | None:
    kernel = m.group(2) == b"entry"
    named = (_ENTRY_NAME if kernel else _FUNC_NAME).match(text, m.end())
    if named is None:
        return None
    pos = named.end()
    params = _PARAMS.match(text, pos)
    if params is not None:
        pos = params.end()
    brace = text.find(b"{", pos, stop)
    semicolon = text.find(b";", pos, stop)
    name = named.group(1).decode("utf-8", "replace")
    linking = m.group(1).decode().split()
    if brace < 0 or 0 <= semicolon < brace:  # a declaration: `.func (...) name (...);`
        end = semicolon if semicolon >= 0 else stop
        return Function(name, kernel, " ".join(linking), text[pos:end], False, set(), set(), m.start())
    end = _body_end(text, brace, stop)
    body = text[brace + 1:end]
    forms = set(zip(_HEADS.findall(body), _OPERANDS.findall(body.translate(ZERO_DIGITS)), strict=True))
    calls = {c.decode("utf-8", "replace") for c in _CALL.findall(body)} if b"call" in body else set()
    return Function(name, kernel, " ".join(linking), text[pos:brace], True, forms, calls, m.start())


def _body_end(text: bytes, brace: int, stop: int) -> int:
    """The offset of the `}` closing the body that opens at ``brace`` (``stop`` if it is never closed)."""
    last = text.rfind(b"}", brace, stop)
    # most often the body is all there is before the next function: its last brace closes it (a module
    # variable after it ends with `;`; a trailing `.section` block holds no statements the forms would read)
    if last >= 0 and b";" not in text[last:stop] and text.count(b"{", brace, last) == text.count(b"}", brace, last) + 1:
        return last
    depth = 0
    for m in _BRACES.finditer(text, brace, stop):
        depth += 1 if m.group() == b"{" else -1
        if depth == 0:
            return m.start()
    return stop
