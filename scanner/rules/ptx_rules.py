"""ZLUDA's PTX rules per release: rules/kernels/ptx-<tag>.toml and rules/kernels/ptx-module.toml.

    rules = load_ptx_rules()             # {tag: PtxRules}, the shipped rules/kernels/
    rules = load_ptx_rules([my_dir])     # + a user's rules folders (later ones win per tag)
    r = rules["v6"]
    r.forms["ld"]                        # the grammar's patterns for `ld`, in ZLUDA's selection order
    r.refusals                           # the translator's refusals (ptx/src/pass/**)

``ptx-<tag>.toml`` is ZLUDA's grammar as data (tools/ptx_rules_from_zluda.py
reads it from the tag and cross-checks it); ``ptx-module.toml`` is
hand-written: how a module picks its PTX entry, the tuning directives a
function header may carry, the ``.target`` forms, and the translator's
refusals, each with file:line@tag. Invalid data raises ``RulesError``.
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda4amd.rules.validate import (
    RulesError,
    check,
    is_bool,
    is_nonempty_str,
    is_str,
    is_str_list,
    read_provenance,
    read_toml,
    rows,
    shipped_rules_dir,
    top_level,
)

__all__ = [
    "PTX_PREFIX",
    "ArgSlot",
    "Form",
    "GrammarError",
    "Modifier",
    "PtxRules",
    "Refusal",
    "load_ptx_rule_files",
    "load_ptx_rules",
]

#: rule files of this module start so in rules/kernels/ (cuda4amd.rules.kernels skips them)
PTX_PREFIX = "ptx-"
MODULE_FILE = "ptx-module.toml"
ENTRY_CHOICES = ("first", "last-first-fewest-invalid")
_SOURCE = re.compile(r"^[\w./-]+:\d+(-\d+)?@[\w.-]+( .*)?$")


@dataclass(frozen=True)
class Modifier:
    """One modifier slot of a pattern: ``.ss`` (optional) standing for any of ``values``."""

    name: str
    optional: bool
    values: frozenset[str]

    @property
    def variable(self) -> str:
        """The name ZLUDA's code block gives it (``.level::cache_hint`` -> ``level_cache_hint``)."""
        name = self.name[1:].replace("::", "_")
        return "type_" if name == "type" else name


@dataclass(frozen=True)
class ArgSlot:
    """One operand of a pattern (ptx_parser_macros_impl parser.rs, Argument)."""

    name: str
    optional: bool = False
    pre_bracket: bool = False
    post_bracket: bool = False
    pre_pipe: bool = False
    negatable: bool = False
    unified: bool = False


@dataclass(frozen=True)
class GrammarError:
    """A PtxError a pattern's code block pushes; ``when``: its ``if`` conditions, outermost first."""

    kind: str
    source: str
    message: str
    when: tuple[str, ...]


@dataclass(frozen=True)
class Form:
    opcode: str
    source: str
    modifiers: tuple[Modifier, ...] = ()
    arguments: tuple[ArgSlot, ...] = ()
    errors: tuple[GrammarError, ...] = ()
    custom: bool = False
    #: the modifiers whose presence selects this pattern (ZLUDA's block selection); empty: the default
    keys: frozenset[str] = frozenset()
    generation: int = 0

    @property
    def possible(self) -> frozenset[str]:
        return frozenset().union(*(m.values for m in self.modifiers)) if self.modifiers else frozenset()


@dataclass(frozen=True)
class Refusal:
    """A statement the parser accepts and the translator refuses: the whole module fails to load."""

    construct: str
    source: str
    opcode: str  # "*": any
    modifiers_any: frozenset[str] = frozenset()
    modifiers_all: frozenset[str] = frozenset()
    pipe_destination: bool = False  # `p|q` as the first operand
    only_in_func: bool = False  # in a .func, not in a kernel


@dataclass(frozen=True)
class PtxRules:
    tag: str
    commit: str
    lexer_source: str
    ident: str
    dot_ident: str
    tokens: frozenset[str]
    forms: dict[str, tuple[Form, ...]]
    modifier_tokens: frozenset[str]
    entry_choice: str
    entry_choice_source: str
    debug_target: bool
    target_source: str
    tuning_directives: frozenset[str]
    tuning_source: str
    drop_source: str
    lexer_error_source: str
    unknown_symbol_source: str
    refusals: tuple[Refusal, ...]


def load_ptx_rules(extra_dirs: Sequence[str | os.PathLike[str]] = ()) -> dict[str, PtxRules]:
    folders = [shipped_rules_dir(), *(Path(d) for d in extra_dirs)]
    return load_ptx_rule_files([Path(f) / "kernels" for f in folders if (Path(f) / "kernels").is_dir()])


def load_ptx_rule_files(kernel_dirs: Sequence[Path]) -> dict[str, PtxRules]:
    """Every ptx-<tag>.toml with the ptx-module.toml rows of its tag (a later folder wins per tag)."""
    grammars: dict[str, tuple[Path, dict[str, Any]]] = {}
    modules: dict[str, tuple[Path, dict[str, Any]]] = {}
    for kernels in kernel_dirs:
        module_path = kernels / MODULE_FILE
        if module_path.is_file():
            modules.update({tag: (module_path, row) for tag, row in _module_rows(module_path).items()})
        for path in sorted(kernels.glob(f"{PTX_PREFIX}*.toml")):
            if path.name != MODULE_FILE:
                doc = read_toml(path)
                grammars[_grammar_tag(path, doc)] = (path, doc)
    result = {}
    for tag, (path, doc) in grammars.items():
        if tag not in modules:
            raise RulesError(path, f"no [[release]] row for {tag!r} in {MODULE_FILE}")
        result[tag] = _build(path, doc, *modules[tag])
    return result


def _grammar_tag(path: Path, doc: dict[str, Any]) -> str:
    read_provenance(path, doc)
    top_level(path, doc, ("provenance", "ptx", "lexer", "form"))
    ptx = check(path, "[ptx]", doc.get("ptx"), {"tag": is_nonempty_str, "commit": is_nonempty_str,
                                                 "grammar": is_nonempty_str})
    if path.name != f"{PTX_PREFIX}{ptx['tag']}.toml":
        raise RulesError(path, f"[ptx] tag {ptx['tag']!r} does not match the file name")
    return str(ptx["tag"])


_RELEASE: dict[str, Any] = {
    "tag": is_nonempty_str, "entry_choice": is_nonempty_str, "entry_choice_source": is_nonempty_str,
    "debug_target": is_bool, "target_source": is_nonempty_str, "tuning_directives": is_str_list,
    "tuning_source": is_nonempty_str, "drop_source": is_nonempty_str, "lexer_error_source": is_nonempty_str,
    "unknown_symbol_source": is_nonempty_str,
}
_REFUSAL: dict[str, Any] = {"tags": is_str_list, "construct": is_nonempty_str, "source": is_str_list,
                            "opcode": is_nonempty_str}
_REFUSAL_OPTIONAL: dict[str, Any] = {"modifiers_any": is_str_list, "modifiers_all": is_str_list,
                                     "pipe_destination": is_bool, "only_in_func": is_bool, "note": is_str}


def _module_rows(path: Path) -> dict[str, dict[str, Any]]:
    doc = read_toml(path)
    read_provenance(path, doc)
    top_level(path, doc, ("provenance", "release", "refusal"))
    releases: dict[str, dict[str, Any]] = {}
    for number, row in enumerate(rows(path, doc, "release"), 1):
        fields = check(path, f"[[release]] #{number}", row, _RELEASE)
        if fields["entry_choice"] not in ENTRY_CHOICES:
            raise RulesError(path, f"[[release]] #{number}: entry_choice must be one of {ENTRY_CHOICES}")
        fields["refusals"] = []
        releases[fields["tag"]] = fields
    for number, row in enumerate(rows(path, doc, "refusal"), 1):
        where = f"[[refusal]] #{number}"
        fields = check(path, where, row, _REFUSAL, _REFUSAL_OPTIONAL)
        if len(fields["tags"]) != len(fields["source"]) or len(set(fields["tags"])) != len(fields["tags"]):
            raise RulesError(path, f"{where}: one source per tag, in the order of tags")
        sources = dict(zip(fields["tags"], fields["source"], strict=True))
        for tag, source in sources.items():
            if tag not in releases:
                raise RulesError(path, f"{where}: no [[release]] row for tag {tag!r}")
            if not _SOURCE.match(source) or not source.split(" ")[0].endswith(f"@{tag}"):
                raise RulesError(path, f"{where}: source {source!r} is not file:line@{tag}")
            releases[tag]["refusals"].append(Refusal(
                construct=fields["construct"], source=source, opcode=fields["opcode"],
                modifiers_any=frozenset(fields.get("modifiers_any", ())),
                modifiers_all=frozenset(fields.get("modifiers_all", ())),
                pipe_destination=fields.get("pipe_destination", False),
                only_in_func=fields.get("only_in_func", False)))
    return releases


def _build(path: Path, doc: dict[str, Any], module_path: Path, release: dict[str, Any]) -> PtxRules:
    tag = doc["ptx"]["tag"]
    lexer = check(path, "[lexer]", doc.get("lexer"), {"source": is_nonempty_str, "ident": is_nonempty_str,
                                                      "dot_ident": is_nonempty_str, "tokens": is_str_list})
    by_opcode: dict[str, list[Form]] = {}
    modifier_tokens: set[str] = set()
    for number, row in enumerate(rows(path, doc, "form"), 1):
        form = _form(path, f"[[form]] #{number}", row)
        by_opcode.setdefault(form.opcode, []).append(form)
        modifier_tokens |= form.possible
    forms = {opcode: _select(path, opcode, defs) for opcode, defs in by_opcode.items()}
    return PtxRules(
        tag=tag, commit=doc["ptx"]["commit"], lexer_source=lexer["source"], ident=lexer["ident"],
        dot_ident=lexer["dot_ident"], tokens=frozenset(lexer["tokens"]), forms=forms,
        modifier_tokens=frozenset(modifier_tokens), entry_choice=release["entry_choice"],
        entry_choice_source=release["entry_choice_source"], debug_target=release["debug_target"],
        target_source=release["target_source"], tuning_directives=frozenset(release["tuning_directives"]),
        tuning_source=release["tuning_source"], drop_source=release["drop_source"],
        lexer_error_source=release["lexer_error_source"],
        unknown_symbol_source=release["unknown_symbol_source"], refusals=tuple(release["refusals"]))


def _form(path: Path, where: str, row: Any) -> Form:
    fields = check(path, where, row, {"opcode": is_nonempty_str, "source": is_nonempty_str},
                   {"custom": is_bool, "modifiers": lambda v: isinstance(v, list), "arguments": is_str,
                    "errors": lambda v: isinstance(v, list)})
    if fields.get("custom"):
        return Form(fields["opcode"], fields["source"], custom=True)
    modifiers = tuple(
        Modifier(m["name"], bool(m["optional"]), frozenset(m["values"]))
        for m in (check(path, f"{where} modifier", m, {"name": is_nonempty_str, "optional": is_bool,
                                                        "values": is_str_list}) for m in fields.get("modifiers", ())))
    errors = tuple(
        GrammarError(e["kind"], e["source"], e.get("message", ""), tuple(e["when"]))
        for e in (check(path, f"{where} error", e, {"kind": is_nonempty_str, "source": is_nonempty_str,
                                                     "when": is_str_list}, {"message": is_str})
                  for e in fields.get("errors", ())))
    return Form(fields["opcode"], fields["source"], modifiers, parse_arguments(fields.get("arguments", "")), errors)


def parse_arguments(text: str) -> tuple[ArgSlot, ...]:
    """``d[|p], a, {!}b{, c}`` as slots (the syntax of ptx_parser_macros_impl's Arguments)."""
    slots: list[ArgSlot] = []
    pos, n = 0, len(text)
    first = True
    while pos < n:
        optional = pre_pipe = negatable = pre_bracket = post_bracket = unified = False
        rest = text[pos:].lstrip()
        pos = n - len(rest)
        if not rest:
            break
        if rest.startswith("{,") or rest.startswith("{ ,"):
            close = text.index("}", pos)
            inner = text[text.index(",", pos) + 1:close].strip()
            slots.extend(_slot(p.strip(), optional=True) for p in inner.split(","))
            pos = close + 1
            continue
        if rest.startswith("[|"):
            close = text.index("]", pos)
            slots.append(_slot(text[pos + 2:close].strip(), optional=True, pre_pipe=True))
            pos = close + 1
            continue
        if rest.startswith("{|"):
            close = text.index("}", pos)
            slots.append(_slot(text[pos + 2:close].strip(), optional=True, pre_pipe=True))
            pos = close + 1
            continue
        if rest.startswith("|"):
            pre_pipe = True
            pos += 1
            continue_at = pos
            rest = text[continue_at:].lstrip()
            pos = n - len(rest)
        if not first and not pre_pipe and rest.startswith(","):
            pos += 1
            continue
        if rest.startswith("{!}"):
            negatable = True
            pos += 3
        elif rest.startswith("!"):
            negatable = True
            pos += 1
        if text.startswith("[", pos):
            pre_bracket = True
            pos += 1
        m = re.compile(r"\s*([A-Za-z_][\w-]*)").match(text, pos)
        if not m:
            raise ValueError(f"cannot read arguments {text!r} at {pos}")
        name = m.group(1)
        pos = m.end()
        if text.startswith("]", pos):
            post_bracket = True
            pos += 1
        if text.startswith("{.unified}", pos):
            unified = True
            pos += len("{.unified}")
        slots.append(ArgSlot(name, optional, pre_bracket, post_bracket, pre_pipe, negatable, unified))
        first = False
    return tuple(slots)


def _slot(name: str, optional: bool = False, pre_pipe: bool = False) -> ArgSlot:
    return ArgSlot(name, optional=optional, pre_pipe=pre_pipe)


def _select(path: Path, opcode: str, defs: list[Form]) -> tuple[Form, ...]:
    """ZLUDA's pattern selection among an opcode's patterns (ptx_parser_macros/src/lib.rs,
    OpcodeDefinitions::new): a pattern is picked by a mandatory modifier that no other unpicked pattern
    can have, generation after generation; the last one left is the default."""
    if any(d.custom for d in defs):
        return tuple(d for d in defs if d.custom)[:1]
    keys: dict[int, tuple[frozenset[str], int]] = {}
    generation = 0
    while True:
        unselected = [i for i in range(len(defs)) if i not in keys]
        if not unselected:
            break
        if len(unselected) == 1:
            keys[unselected[0]] = (frozenset(), generation)
            break
        picked = False
        for i in unselected:
            candidates = sorted((m for m in defs[i].modifiers if not m.optional), key=lambda m: len(m.values))
            for m in candidates:
                if all(not (m.values & defs[j].possible) for j in unselected if j != i):
                    keys[i] = (m.values, generation)
                    picked = True
                    break
        if not picked:
            # ZLUDA's macro panics here, so no tag ships such a grammar; the rest are tried in order
            for i in unselected:
                keys[i] = (frozenset(), generation)
            break
        generation += 1
    ordered = sorted(range(len(defs)), key=lambda i: (keys[i][1], not keys[i][0], i))
    return tuple(Form(defs[i].opcode, defs[i].source, defs[i].modifiers, defs[i].arguments, defs[i].errors,
                      False, keys[i][0], keys[i][1]) for i in ordered)
