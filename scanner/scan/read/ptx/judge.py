"""What ZLUDA does with a PTX module and with a fat binary container's PTX entries, per release.

    checker = PtxChecker(rules)                  # rules: cuda4amd.rules.ptx_rules.PtxRules of one tag
    result = checker.check_module(text)          # ModuleResult: outcome, dropped kernels, first refusal
    result = checker.check_container(entries)    # entries: the container's PTX texts (bytes), file order

Outcomes: "ok"; "functions_dropped" (the parser dropped functions: the
module loads, their kernels are missing); "load_fails" (the translator
refuses a statement, or a function calls a dropped one: the whole module
fails with CUDA_ERROR_UNKNOWN); "empty_module" (a lexer error, or the
module's header does not parse: ZLUDA loads an empty module); for a
container also "no_ptx" (no usable PTX entry: an empty module too).

Every instruction form is decided once per checker (``decisions``): a scan
meets the same few hundred forms in thousands of functions.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cuda4amd.rules.ptx_rules import ArgSlot, Form, PtxRules
from cuda4amd.scan.read.ptx.lexer import ZERO_DIGITS, lexer_error, strip, tokens
from cuda4amd.scan.read.ptx.module import Function, Module, read_module

__all__ = ["OUTCOMES", "Decision", "ModuleResult", "PtxChecker"]

OUTCOMES = ("ok", "functions_dropped", "load_fails", "empty_module", "no_ptx")
#: invalid_directives of ast::Module::empty() (usize::MAX): a lexer error or an unparsable module
EMPTY = 1 << 64
#: what may stand before a statement: blanks, block braces, labels (not `::`), `.loc` lines (no `;`)
_LEAD_IN = re.compile(rb"(?:\s+|[{}]|[$%\w]+[ \t]*:(?!:)|\.loc\b[^\n]*)*")
#: then an instruction: a guard, the head, the operands
_STATEMENT = re.compile(_LEAD_IN.pattern + rb"(?:@!?[%$\w]+\s+)?([a-z][a-z0-9_]*(?:\.[\w:]+)*)([^:]*)\Z")
#: operand identifiers (registers, names, labels), not a `.x` member or a suffix of a number
_IDENTIFIERS = re.compile(rb"%[\w$]+|(?<![\w.$%])[A-Za-z_$][\w$]*")
_VECTOR_INDEX = frozenset({".x", ".y", ".z", ".w", ".r", ".g", ".b", ".a"})


@dataclass(frozen=True)
class Decision:
    """One instruction form: "ok", "drop" (the parser fails: the function is dropped), "refuse" (the
    translator fails: the module does not load) or "refuse_in_func" (refused in a .func only)."""

    status: str
    construct: str = ""
    source: str = ""


OK = Decision("ok")


@dataclass
class ModuleResult:
    outcome: str
    invalid_directives: int = 0
    kernels: tuple[str, ...] = ()
    dropped_kernels: tuple[str, ...] = ()
    dropped_functions: tuple[str, ...] = ()
    construct: str = ""  # the first refusal, as written
    source: str = ""  # its file:line@tag
    entry: int = -1  # which of a container's entries ZLUDA took (file order)
    entries: int = 0


#: (head, operand shape) of an instruction; b"" for no instruction; other bytes: a statement that is neither
Shape = tuple[bytes, bytes] | bytes


@dataclass(frozen=True)
class Reading:
    """What every release's check of one PTX text shares: the text as the lexer sees it, its lexer error,
    its structure (the lexer's rules are the same at every tag in rules/kernels/)."""

    lexer_error: tuple[int, bytes] | None
    module: Module
    #: each statement key of the module -> its shape (parse_statement): how it reads at every release
    shape_of: dict[bytes, Shape]
    shapes: frozenset[Shape]


def read_text(text: bytes) -> Reading:
    stripped = strip(text)
    module = read_module(stripped)
    shape_of = {key: parse_statement(written) for key, written in module.statements.items()}
    return Reading(lexer_error(stripped), module, shape_of, frozenset(shape_of.values()))


@dataclass
class PtxChecker:
    rules: PtxRules
    #: each shape met (Reading.shape_of: head, operands with digits 0 and identifiers `x`) -> its
    #: decision: the statements of different functions differ mostly by names and numbers
    shapes: dict[Shape, Decision] = field(default_factory=dict)
    #: the shapes that are not ok (a set: a module's are checked against it at C speed)
    not_ok: set[Shape] = field(default_factory=set)
    keywords: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.keywords = self.rules.tokens | self.rules.modifier_tokens | frozenset(self.rules.forms)

    # -- a container ----------------------------------------------------------------------------

    def check_container(self, entries: Sequence[bytes | Reading],
                        read: Callable[[bytes], Reading] = read_text) -> ModuleResult:
        """ZLUDA's choice among a container's PTX entries (module.rs at the tag), then that module's fate.
        ``entries``: the decompressed PTX entries that are UTF-8, in file order, or their readings (a
        caller checking several releases reads each once); ``read``: how a text is read."""
        if not entries:
            return ModuleResult("no_ptx", EMPTY, construct="no PTX entry",
                                source=self.rules.entry_choice_source)
        if self.rules.entry_choice == "first":
            result = self.check_reading(_reading(entries[0], read))
            result.entry, result.entries = 0, len(entries)
            return result
        best: ModuleResult | None = None
        for index in range(len(entries) - 1, -1, -1):  # last first
            result = self.check_reading(_reading(entries[index], read))
            result.entry, result.entries = index, len(entries)
            if result.invalid_directives == 0:
                return result
            if best is None or result.invalid_directives < best.invalid_directives:
                best = result
        assert best is not None
        return best

    # -- a module ---------------------------------------------------------------------------------

    def check_module(self, text: bytes) -> ModuleResult:
        return self.check_reading(read_text(text))

    def check_reading(self, reading: Reading) -> ModuleResult:
        module = reading.module
        kernels = tuple(module.kernels)
        if reading.lexer_error is not None:
            return ModuleResult("empty_module", EMPTY, kernels=kernels,
                                construct=f"lexer: {reading.lexer_error[1].decode('utf-8', 'replace')}",
                                source=self.rules.lexer_error_source)
        if module.header_problem is not None:
            return ModuleResult("empty_module", EMPTY, kernels=kernels, construct=module.header_problem,
                                source=self.rules.target_source)
        invalid = 0
        first: tuple[str, str] | None = None
        options = [o for o in module.target_options if not (o == "debug" and self.rules.debug_target)]
        if options:  # recovered as one unrecognized directive (fn directive's recovery)
            invalid += 1
            first = (f".target {module.target}, {', '.join(options)}", self.rules.target_source)
        for shape in reading.shapes - self.shapes.keys():  # each shape decided once per release
            if self.decide_shape(shape).status != "ok":
                self.not_ok.add(shape)
        bad_shapes = reading.shapes & self.not_ok
        bad = {key for key, shape in reading.shape_of.items() if shape in bad_shapes} if bad_shapes else set()
        shape_of = reading.shape_of
        dropped: list[Function] = []
        refused: tuple[str, str] | None = None
        kept: list[Function] = []
        for function in module.functions:
            problem, refusal = self._function(function, bad, shape_of)
            if problem is not None:
                dropped.append(function)
                first = first or problem
            else:
                kept.append(function)
                refused = refused or refusal
        invalid += len(dropped)
        dropped_names = {f.name for f in dropped}
        dropped_kernels = tuple(f.name for f in dropped if f.kernel and f.has_body)
        if refused is None and dropped_names:
            for function in kept:
                gone = sorted(function.calls & dropped_names)
                if gone:
                    refused = (f"{function.name} calls {gone[0]}, which the parser dropped",
                               self.rules.unknown_symbol_source)
                    break
        base = {"invalid_directives": invalid, "kernels": kernels, "dropped_kernels": dropped_kernels,
                "dropped_functions": tuple(f.name for f in dropped)}
        if refused is not None:
            return ModuleResult("load_fails", construct=refused[0], source=refused[1], **base)  # type: ignore[arg-type]
        if invalid:
            assert first is not None
            return ModuleResult("functions_dropped", construct=first[0], source=first[1], **base)  # type: ignore[arg-type]
        return ModuleResult("ok", **base)  # type: ignore[arg-type]

    def _function(self, function: Function, bad: set[bytes],
                  shape_of: dict[bytes, Shape]) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
        """(why the parser drops it, or None; the translator's first refusal in it, or None)."""
        for directive in function.directives:
            if directive not in self.rules.tuning_directives:
                return (f".{'entry' if function.kernel else 'func'} {function.name}: {directive}",
                        self.rules.tuning_source), None
        statements = function.statements
        if not bad or statements.keys().isdisjoint(bad):
            return None, None
        refusal: tuple[str, str] | None = None
        for key in statements:  # in body order: the first is reported
            decision = self.shapes[shape_of[key]]
            if decision.status == "ok":
                continue
            if decision.status == "drop":
                return (decision.construct, decision.source), None
            if refusal is None and (decision.status == "refuse" or not function.kernel):
                refusal = (decision.construct, decision.source)
        return None, refusal

    # -- one instruction form -------------------------------------------------------------------------

    def decide_statement(self, statement: bytes) -> Decision:
        """One statement as written (what lies between two `;` of a body), e.g. to say why a kernel went."""
        return self.decide_shape(parse_statement(statement))

    def decide_shape(self, shape: Shape) -> Decision:
        """A shape's decision, made once: identifiers are operands alike to the grammar (an identifier
        that is one of the lexer's keywords is not, which this does not tell apart); a declaration or
        nothing is ok."""
        decision = self.shapes.get(shape)
        if decision is None:
            if isinstance(shape, bytes):
                text = shape.decode("utf-8", "replace")[:60]
                decision = OK if not shape else Decision("drop", f"{text}: not a statement the parser knows",
                                                         self.rules.drop_source)
            else:
                decision = self.decide(shape[0].decode("utf-8", "replace"), shape[1].decode("utf-8", "replace"))
            self.shapes[shape] = decision
        return decision

    def decide(self, head: str, operands: str) -> Decision:
        """One statement ``head operands;`` as ZLUDA's generated parser and its translator see it."""
        parts = tokens(head, self.keywords)
        opcode = parts[0][1]
        written = f"{head}{operands.rstrip()}"[:100]
        defs = self.rules.forms.get(opcode)
        if not defs or parts[0][0] != "kw":
            return Decision("drop", f"{head}: no rule for `{opcode}`", self.rules.drop_source)
        if defs[0].custom:
            return OK
        modifiers = [value for kind, value in parts[1:] if kind == "dot"]
        if len(modifiers) != len(parts) - 1:
            return Decision("drop", f"{head}: not a modifier", defs[0].source)
        # modifiers are the tokens the lexer has as modifier literals; the first other one ends them
        known = [m for m in modifiers if m in self.rules.modifier_tokens]
        rest = ""
        if len(known) != len(modifiers):
            cut = next(i for i, m in enumerate(modifiers) if m not in self.rules.modifier_tokens)
            known = modifiers[:cut]
            rest = "".join(modifiers[cut:])
        form = _select(defs, known)
        if form is None:
            return Decision("drop", f"{head}: no pattern of `{opcode}` takes these modifiers", defs[0].source)
        filled = _assign(form, known)
        if filled is None or rest:
            return Decision("drop", f"{head}: modifiers do not fit {opcode}'s pattern", form.source)
        args = _match_arguments(form.arguments, tokens(rest + operands, self.keywords))
        if args is None:
            return Decision("drop", f"{written}: operands do not fit {opcode}'s pattern", form.source)
        present = dict(filled)
        present.update(dict.fromkeys(args, ""))
        for error in form.errors:
            if all(_holds(condition, present) for condition in error.when):
                what = error.message or error.kind
                return Decision("drop", f"{head}: {what}", error.source)
        return self._refusal(opcode, set(known), operands, head)

    def _refusal(self, opcode: str, modifiers: set[str], operands: str, head: str) -> Decision:
        for refusal in self.rules.refusals:
            if refusal.opcode not in ("*", opcode):
                continue
            if refusal.modifiers_any and not (refusal.modifiers_any & modifiers):
                continue
            if refusal.modifiers_all and not refusal.modifiers_all <= modifiers:
                continue
            if refusal.pipe_destination and "|" not in operands.split(",")[0]:
                continue
            return Decision("refuse_in_func" if refusal.only_in_func else "refuse",
                            f"{head}: {refusal.construct}", refusal.source)
        return OK


def check_ptx_module(text: bytes, rules: PtxRules) -> ModuleResult:
    """One PTX module at one release (a fresh checker: for many modules keep a PtxChecker)."""
    return PtxChecker(rules).check_module(text)


def check_container(entries: Sequence[bytes], rules: PtxRules) -> ModuleResult:
    """A container's PTX entries (file order) at one release, after ZLUDA's choice among them."""
    return PtxChecker(rules).check_container(entries)


def _reading(entry: bytes | Reading, read: Callable[[bytes], Reading]) -> Reading:
    return entry if isinstance(entry, Reading) else read(entry)


def parse_statement(statement: bytes) -> Shape:
    """(head, operand shape) of an instruction statement; else b"" (a declaration or nothing) or the text
    that is neither."""
    m = _STATEMENT.match(statement)
    if m is None:
        rest = _LEAD_IN.sub(b"", statement, count=1).strip()
        return b"" if not rest or rest.startswith(b".") else rest
    return m.group(1), _IDENTIFIERS.sub(b"x", m.group(2).translate(ZERO_DIGITS))


def _select(defs: tuple[Form, ...], modifiers: list[str]) -> Form | None:
    """The pattern ZLUDA's block selection takes: the first whose key modifier is present, else the default."""
    present = set(modifiers)
    for form in defs:
        if not form.keys or form.keys & present:
            return form
    return None


def _assign(form: Form, modifiers: list[str]) -> dict[str, str] | None:
    """Each written modifier into one slot of the pattern (none twice), every mandatory slot filled;
    {variable: value} or None. Order is not checked (ZLUDA checks only the trailing type order)."""
    slots = form.modifiers
    used: dict[int, str] = {}  # slot index -> value (`.bf16.bf16`: two slots of one name)
    for value in modifiers:
        for index, slot in enumerate(slots):
            if index not in used and value in slot.values:
                used[index] = value
                break
        else:
            return None
    if any(not slot.optional and index not in used for index, slot in enumerate(slots)):
        return None
    return {slots[index].variable: value for index, value in used.items()}


def _match_arguments(slots: tuple[ArgSlot, ...], toks: list[tuple[str, str]]) -> set[str] | None:
    """The slots' names present when the operand tokens fit the pattern (optional ones tried first, as
    winnow's first_optional does), else None."""
    return _walk(slots, toks, 0, 0, True)


def _walk(slots: tuple[ArgSlot, ...], toks: list[tuple[str, str]], index: int, pos: int,
          first: bool) -> set[str] | None:
    if index == len(slots):
        return set() if pos == len(toks) else None
    slot = slots[index]
    end = _slot_end(slot, toks, pos, first)
    if end >= 0:
        rest = _walk(slots, toks, index + 1, end, False)
        if rest is not None:
            unified = slot.unified and toks[end - 1] == ("dot", ".unified")
            return rest | {slot.name} | ({"unified"} if unified else set())
    if slot.optional:
        return _walk(slots, toks, index + 1, pos, first)
    return None


def _slot_end(slot: ArgSlot, toks: list[tuple[str, str]], pos: int, first: bool) -> int:
    """Where one argument of the pattern ends (ptx_parser_macros: comma, `[`, `|`, `!`, operand, `]`,
    `.unified`), or -1."""
    expected = [] if first or slot.pre_pipe else [","]
    expected += ["["] if slot.pre_bracket else []
    expected += ["|"] if slot.pre_pipe else []
    for wanted in expected:
        if pos >= len(toks) or toks[pos][0] != wanted:
            return -1
        pos += 1
    if slot.negatable and pos < len(toks) and toks[pos][0] == "!":
        pos += 1
    pos = _operand(toks, pos)
    if pos < 0:
        return -1
    if slot.post_bracket:
        if pos >= len(toks) or toks[pos][0] != "]":
            return -1
        pos += 1
    if slot.unified and pos < len(toks) and toks[pos] == ("dot", ".unified"):
        pos += 1
    return pos


def _operand(toks: list[tuple[str, str]], pos: int) -> int:
    """Where one operand ends (ParsedOperand::parse: ident, ident+offset, ident.x, an immediate, a vector
    `{a, b}`), or -1."""
    if pos >= len(toks):
        return -1
    kind, value = toks[pos]
    if kind == "-" and pos + 1 < len(toks) and toks[pos + 1][0] == "num":
        return pos + 2
    if kind == "num" or (kind == "kw" and value == "WARP_SZ"):  # WARP_SZ: a constant (fn immediate_value)
        return pos + 1
    if kind == "id":
        return _ident_operand(toks, pos + 1)
    if kind != "{":
        return -1
    pos += 1
    while True:
        nxt = _operand(toks, pos)
        if nxt < 0 or nxt >= len(toks):
            return -1
        if toks[nxt][0] == "}":
            return nxt + 1
        if toks[nxt][0] != ",":
            return -1
        pos = nxt + 1


def _ident_operand(toks: list[tuple[str, str]], pos: int) -> int:
    """After an identifier: `+ offset`, a vector member `.x`, or nothing."""
    if pos + 1 < len(toks) and toks[pos][0] == "+":
        nxt = pos + 1
        if toks[nxt][0] == "-":
            nxt += 1
        return nxt + 1 if nxt < len(toks) and toks[nxt][0] == "num" else -1
    if pos < len(toks) and toks[pos][0] == "dot" and toks[pos][1] in _VECTOR_INDEX:
        return pos + 1
    return pos


def _holds(condition: str, present: dict[str, str]) -> bool:
    """Whether one ``if`` condition of a pattern's code block holds for this statement ("a || b" holds when
    one term does). Terms it cannot read count as false: only what the grammar plainly says drops code."""
    for term in condition.split("||"):
        term = term.strip()
        m = re.fullmatch(r"let Some\(\w+\) = (\w+)|(\w+)\.is_some\(\)|(\w+)", term)
        if m:
            if (m.group(1) or m.group(2) or m.group(3)) in present:
                return True
            continue
        m = re.fullmatch(r"(\w+) (!=|==) \w+::(\w+)", term)
        if m and m.group(1) in present:
            value = present[m.group(1)]
            if (value == "." + m.group(3).lower()) == (m.group(2) == "=="):
                return True
    return False

