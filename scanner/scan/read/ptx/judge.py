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

Every instruction form is decided once per checker (``shapes``): a scan
meets the same few hundred forms in thousands of functions. A text is read
once for all releases (cuda4amd.scan.read.ptx.reading.Reading): its
distinct pieces cut at `;` with digits 0 are its statement keys; a key ok at
every exact head its head stands for is ok without a look at the text; the
others are looked up where they occur, each occurrence keyed by its head as
written, and only then placed in functions. The known approximation: a head
with a token the lexer does not know, of the same length as a known one once
digits are 0 (``.u17`` beside ``.u32``, same operands), is decided as the
known ones; compilers write no such token.
"""
from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cuda4amd.rules.ptx_rules import ArgSlot, Form, PtxRules
from cuda4amd.scan.read.ptx.lexer import ZERO_DIGITS, tokens
from cuda4amd.scan.read.ptx.module import Function
from cuda4amd.scan.read.ptx.reading import Pieces, Reading, Shape, parse_statement

__all__ = ["OUTCOMES", "Decision", "ModuleResult", "PtxChecker", "Shape"]

OUTCOMES = ("ok", "functions_dropped", "load_fails", "empty_module", "no_ptx")
#: invalid_directives of ast::Module::empty() (usize::MAX): a lexer error or an unparsable module
EMPTY = 1 << 64
_VECTOR_INDEX = frozenset({".x", ".y", ".z", ".w", ".r", ".g", ".b", ".a"})


@dataclass(frozen=True)
class Decision:
    """One instruction form: "ok", "drop" (the parser fails: the function is dropped), "refuse" (the
    translator fails: the module does not load) or "refuse_in_func" (refused in a .func only)."""

    status: str
    construct: str = ""
    source: str = ""


OK = Decision("ok")
#: the kinds of refusal a function's fate depends on the first of (PtxChecker._function)
_REFUSALS = ("drop", "refuse", "refuse_in_func")


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


#: a head's opcode, the pattern it selects, {variable: modifier} and its modifiers
_FittedHead = tuple[str, Form, dict[str, str], frozenset[str]]
#: the most exact heads one key's head is expanded into (more: the key is looked up in the text)
MAX_VARIANTS = 64


@dataclass
class PtxChecker:
    rules: PtxRules
    #: each exact shape met (head as written, operands with digits 0 and identifiers `x`) -> its decision:
    #: the statements of different functions differ mostly by names and numbers
    shapes: dict[Shape, Decision] = field(default_factory=dict)
    #: each key's shape (head with digits 0) -> its decision when every exact head it stands for decides
    #: so; None when it must be looked up in the text (Reading.by_shape)
    keys: dict[Shape, Decision | None] = field(default_factory=dict)
    #: the shapes met in texts that decide ok (a set: a text's others are found at C speed)
    ok_shapes: set[Shape] = field(default_factory=set)
    keywords: frozenset[str] = field(init=False)
    #: a head's dotted part with digits 0 -> the lexer's tokens that read so
    by_zeroed: dict[bytes, tuple[bytes, ...]] = field(init=False)
    #: each head decided -> its pattern and modifiers, or its decision when the head alone decides it
    _heads: dict[str, Decision | _FittedHead] = field(default_factory=dict, repr=False)
    #: (a pattern's arguments, operands) -> the arguments present, or None when the operands do not fit
    _arguments: dict[tuple[tuple[ArgSlot, ...], str], set[str] | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.keywords = self.rules.tokens | self.rules.modifier_tokens | frozenset(self.rules.forms)
        grouped: dict[bytes, list[bytes]] = {}
        for word in sorted(self.keywords):
            token = word.encode()
            zeroed = token.translate(ZERO_DIGITS)
            if zeroed != token or b"0" in token:
                grouped.setdefault(zeroed, []).append(token)
        self.by_zeroed = {k: tuple(v) for k, v in grouped.items()}

    # -- a container ----------------------------------------------------------------------------

    def check_container(self, entries: Sequence[bytes | Reading],
                        read: Callable[[bytes], Reading] | None = None) -> ModuleResult:
        """ZLUDA's choice among a container's PTX entries (module.rs at the tag), then that module's fate.
        ``entries``: the decompressed PTX entries that are UTF-8, in file order, or their readings (a
        caller checking several releases reads each once); ``read``: how a text is read."""
        if read is None:
            pieces = Pieces((self,))
            read = lambda text: Reading(text, pieces)  # noqa: E731
        if not entries:
            return self.choose([])
        if self.rules.entry_choice == "first":
            return self.choose([self.check_reading(_reading(entries[0], read))], len(entries))
        results: list[ModuleResult | None] = [None] * len(entries)
        for index in range(len(entries) - 1, -1, -1):  # last first
            results[index] = result = self.check_reading(_reading(entries[index], read))
            if result.invalid_directives == 0:
                break
        return self.choose(results)

    def choose(self, results: Sequence[ModuleResult | None], entries: int = 0) -> ModuleResult:
        """ZLUDA's choice among the results of a container's entries (file order; None: not read, as
        ZLUDA stops at the first module with no invalid directive, last first): a new result with
        ``entry``/``entries`` set. ``entries``: how many the container has, when ``results`` are fewer."""
        if not results:
            return ModuleResult("no_ptx", EMPTY, construct="no PTX entry", source=self.rules.entry_choice_source)
        count = max(entries, len(results))
        if self.rules.entry_choice == "first":
            assert results[0] is not None
            return dataclasses.replace(results[0], entry=0, entries=count)
        best: tuple[int, ModuleResult] | None = None
        for index in range(len(results) - 1, -1, -1):  # last first
            result = results[index]
            if result is None:
                continue
            if result.invalid_directives == 0:
                return dataclasses.replace(result, entry=index, entries=count)
            if best is None or result.invalid_directives < best[1].invalid_directives:
                best = (index, result)
        assert best is not None
        return dataclasses.replace(best[1], entry=best[0], entries=count)

    # -- a module ---------------------------------------------------------------------------------

    def check_module(self, text: bytes) -> ModuleResult:
        return self.check_reading(Reading(text, Pieces((self,))))

    def check_reading(self, reading: Reading) -> ModuleResult:
        """One module's fate (``reading``'s pieces read for this release, or for several at once)."""
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
        problems = self._problems(reading)
        dropped: list[Function] = []
        refused: tuple[str, str] | None = None
        kept: list[Function] = []
        for index, function in enumerate(module.functions):
            problem, refusal = self._function(function, problems.get(index, ()))
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
                gone = sorted(reading.calls(function) & dropped_names)
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

    def _problems(self, reading: Reading) -> dict[int, list[Decision]]:
        """For each function (by index in module.functions) whose body holds statements this release
        refuses, the first refusal of each kind, in body order."""
        occurrences = reading.look_up()
        bad = []
        for shape in occurrences.keys() - self.ok_shapes:  # C-level: the shapes not known ok at this release
            decision = self.decide_shape(shape)
            if decision.status == "ok":
                self.ok_shapes.add(shape)
            else:
                bad.append((occurrences[shape], decision))
        return reading.place(bad, _REFUSALS) if bad else {}

    def _function(self, function: Function,
                  problems: Sequence[Decision]) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
        """(why the parser drops it, or None; the translator's first refusal in it, or None)."""
        for directive in function.directives:
            if directive not in self.rules.tuning_directives:
                return (f".{'entry' if function.kernel else 'func'} {function.name}: {directive}",
                        self.rules.tuning_source), None
        refusal: tuple[str, str] | None = None
        for decision in problems:  # in body order: the first is reported
            if decision.status == "drop":
                return (decision.construct, decision.source), None
            if refusal is None and (decision.status == "refuse" or not function.kernel):
                refusal = (decision.construct, decision.source)
        return None, refusal

    # -- a key: a statement with digits 0 -------------------------------------------------------------

    def decide_key(self, shape: Shape) -> Decision | None:
        """A key's decision when it needs no look at the text (every exact head its head stands for
        decides ok), else None; made once per key shape."""
        if shape in self.keys:
            return self.keys[shape]
        decision: Decision | None
        if isinstance(shape, bytes):
            # a piece that is neither a statement nor nothing: its text as written is the construct
            decision = self.decide_shape(shape) if not shape or shape.startswith(b".") else None
        elif b"0" not in shape[0]:
            decision = self.decide_shape(shape)  # no digit in the head: the key is its exact shape
        else:
            variants = self.variants(shape[0])
            decision = None
            if variants is not None and all(self.decide_shape((v, shape[1])).status == "ok" for v in variants):
                decision = OK
        self.keys[shape] = decision
        return decision

    def variants(self, head: bytes) -> list[bytes] | None:
        """The exact heads that read as ``head`` once digits are 0 and are made of the lexer's tokens
        (None when a part has none, or when they are more than MAX_VARIANTS)."""
        choices: list[tuple[bytes, ...]] = []
        count = 1
        for part in re.split(rb"(?=\.)", head):
            if b"0" not in part:
                choices.append((part,))
                continue
            known = self.by_zeroed.get(part)
            if not known:
                return None
            choices.append(known)
            count *= len(known)
            if count > MAX_VARIANTS:
                return None
        return [b"".join(p) for p in itertools.product(*choices)]

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
        fitted = self._heads.get(head)
        if fitted is None:  # a head is read once: a scan meets each with a few operand shapes
            fitted = self._heads[head] = self._fit_head(head)
        if isinstance(fitted, Decision):
            return fitted
        opcode, form, filled, known = fitted
        fit = (form.arguments, operands)
        args = self._arguments.get(fit, ())
        if args == ():  # patterns with equal argument lists share each fit: it is read once
            args = self._arguments[fit] = _match_arguments(form.arguments, tokens(operands, self.keywords))
        if args is None:
            written = f"{head}{operands.rstrip()}"[:100]
            return Decision("drop", f"{written}: operands do not fit {opcode}'s pattern", form.source)
        present = dict(filled)
        present.update(dict.fromkeys(args, ""))
        for error in form.errors:
            if all(_holds(condition, present) for condition in error.when):
                what = error.message or error.kind
                return Decision("drop", f"{head}: {what}", error.source)
        return self._refusal(opcode, known, operands, head)

    def _fit_head(self, head: str) -> Decision | _FittedHead:
        """What a head reads as (_FittedHead), or its decision when the head alone decides it."""
        parts = tokens(head, self.keywords)
        opcode = parts[0][1]
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
        return opcode, form, filled, frozenset(known)

    def _refusal(self, opcode: str, modifiers: frozenset[str], operands: str, head: str) -> Decision:
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

