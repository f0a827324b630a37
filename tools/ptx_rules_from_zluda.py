"""Read ZLUDA's PTX grammar at a tag and write (or cross-check) rules/kernels/ptx-<tag>.toml.

    python tools/ptx_rules_from_zluda.py --mirror /work/.mirror/vosen+ZLUDA/repo --tag v6          # write
    python tools/ptx_rules_from_zluda.py --mirror /work/.mirror/vosen+ZLUDA/repo --tag v6 --check  # compare

ZLUDA's parser (``ptx_parser/src/lib.rs``) declares its instructions in the
``derive_parser!(...)`` block: patterns such as ``ld{.weak}{.ss}.type d, [a]``
followed by the rules that say what each named modifier stands for
(``.ss: StateSpace = { .global, .shared{::cta} };``). This tool READS that
block as text (it never builds or runs ZLUDA) and writes what it says as data:
one ``[[form]]`` per pattern with its modifiers' alternatives, its operands
and the file:line at the tag, plus the lexer's token rules. Each ``PtxError``
a pattern's code block pushes (a parser ``Todo`` or ``SyntaxError``) is kept
with the modifiers or operands its ``if`` tests, so the checker drops the
function where ZLUDA would. The translator's refusals (ptx/src/pass/**) are
not in the grammar: they are hand-written in rules/kernels/ptx-translator.toml.

The output is data with citations, not ZLUDA's code. ``--check`` re-reads the
grammar and fails on any difference from the committed file (a form added,
removed or moved), so the rules cannot drift from the tag silently.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

GRAMMAR = "ptx_parser/src/lib.rs"
RULES_DIR = Path(__file__).resolve().parents[1] / "rules" / "kernels"

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOTMOD = re.compile(r"\.([A-Za-z0-9_]+)(?:::([A-Za-z0-9_]+))?")
_PUSH = re.compile(r"state\.errors\.push\(\s*PtxError::(Todo|SyntaxError)\b")


@dataclass
class Rule:
    name: str | None  # ".ss" (None: a type-only rule)
    type_: str | None
    alternatives: list[str]
    line: int


@dataclass
class Pattern:
    opcode: str
    modifiers: list[tuple[str, bool]]  # (".ss", optional)
    arguments: str
    line: int
    special: bool
    code: str
    code_line: int


@dataclass
class Grammar:
    lexer_start: int
    lexer_end: int
    ident_regex: str
    dot_ident_regex: str
    tokens: list[str]
    forms: list[dict] = field(default_factory=list)
    modifier_tokens: set[str] = field(default_factory=set)


def literal_end(text: str, i: int) -> int:
    """Where the Rust string or char literal starting at ``i`` ends (after it), or -1 if none starts there."""
    c = text[i]
    if c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
        m = re.compile(r'r(#*)"').match(text, i)
        if m:
            close = text.find('"' + m.group(1), m.end())
            return len(text) if close < 0 else close + 1 + len(m.group(1))
    if c == '"':
        j = i + 1
        while j < len(text) and text[j] != '"':
            j += 2 if text[j] == "\\" else 1
        return j + 1
    if c == "'":
        m = re.compile(r"'(\\.|[^\\'])'").match(text, i)
        if m:
            return m.end()
    return -1


def blank_comments(text: str) -> str:
    """Comments replaced by spaces (newlines kept, so line numbers stay right); strings left alone."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        j = literal_end(text, i) if c in "r\"'" else -1
        if j > 0:
            out.append(text[i:j])
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def match_brace(text: str, at: int) -> int:
    """The index after the bracket closing the one at ``at`` (string literals skipped)."""
    opening = text[at]
    closing = {"{": "}", "(": ")", "[": "]"}[opening]
    depth = 0
    i = at
    while i < len(text):
        c = text[i]
        j = literal_end(text, i) if c in "r\"'" else -1
        if j > 0:
            i = j
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced {opening} at {at}")


def expand_alternatives(body: str) -> list[str]:
    """``.global, .shared{::cta, ::cluster}`` -> .global .shared .shared::cta .shared::cluster"""
    result: list[str] = []
    for m in re.finditer(r"\.([A-Za-z0-9_]+)(?:::([A-Za-z0-9_]+))?(\s*\{([^}]*)\})?", body):
        base = "." + m.group(1)
        if m.group(3):
            result.append(base)
            result += [base + s.strip() for s in m.group(4).split(",") if s.strip()]
        else:
            result.append(base + (f"::{m.group(2)}" if m.group(2) else ""))
    return result


def parse_grammar(source: str) -> Grammar:
    text = blank_comments(source)
    line_of = _line_index(text)
    start = text.index("derive_parser!(")
    end = match_brace(text, start + len("derive_parser!"))
    token_enum = text.index("enum Token", start)
    token_end = match_brace(text, text.index("{", token_enum))
    enum_text = text[token_enum:token_end]
    tokens = re.findall(r'#\[token\("([^"]*)"', enum_text)
    regexes = re.findall(r'#\[regex\(r#?"(.*?)"#?[,)]', enum_text)
    ident_regex = next(r for r in regexes if r.startswith("[a-zA-Z]"))
    dot_ident_regex = next(r for r in regexes if r.startswith("\\."))
    grammar = Grammar(line_of(token_enum), line_of(token_end), ident_regex, dot_ident_regex, tokens)
    items = _items(text, token_end, end - 1, line_of)
    _build_forms(grammar, items)
    return grammar


def _line_index(text: str):
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    from bisect import bisect_right

    return lambda pos: bisect_right(starts, pos)


def _items(text: str, pos: int, end: int, line_of) -> list[Rule | Pattern]:
    items: list[Rule | Pattern] = []
    while True:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos >= end:
            return items
        if text.startswith("#[", pos):
            pos = match_brace(text, pos + 1)
            continue
        m = re.compile(r"(pub\s+)?enum\b").match(text, pos)
        if m:
            pos = match_brace(text, text.index("{", pos))
            continue
        rule = re.compile(r"(\.[A-Za-z0-9_]+(?:::[A-Za-z0-9_]+)?)\s*(?::\s*([A-Za-z0-9_]+)\s*)?=\s*\{"
                          r"|([A-Z][A-Za-z0-9_]*)\s*=\s*\{").match(text, pos)
        if rule:
            brace = rule.end() - 1
            close = match_brace(text, brace)
            alternatives = expand_alternatives(text[brace + 1:close - 1])
            items.append(Rule(rule.group(1), rule.group(2) or rule.group(3), alternatives, line_of(pos)))
            pos = text.index(";", close) + 1
            continue
        arrow = re.compile(r"=>|<=").search(text, pos)
        assert arrow is not None
        head = text[pos:arrow.start()]
        code_at = text.index("{", arrow.end())
        code_end = match_brace(text, code_at)
        opcode_m = _IDENT.match(head)
        assert opcode_m is not None, head[:80]
        rest = head[opcode_m.end():]
        modifiers: list[tuple[str, bool]] = []
        while True:
            mm = re.match(r"\s*(\{\s*)?\.([A-Za-z0-9_]+(?:::[A-Za-z0-9_]+)?)\s*(\})?", rest)
            if not mm or bool(mm.group(1)) != bool(mm.group(3)):
                break
            modifiers.append(("." + mm.group(2), bool(mm.group(1))))
            rest = rest[mm.end():]
        items.append(Pattern(opcode_m.group(0), modifiers, " ".join(rest.split()), line_of(pos), arrow.group(0) == "<=",
                             text[code_at:code_end], line_of(code_at)))
        pos = code_end
    return items


def _build_forms(grammar: Grammar, items: list[Rule | Pattern]) -> None:
    # an OpcodeDefinition is patterns then rules; its rules serve the patterns of its last opcode
    groups: list[tuple[list[Pattern], list[Rule]]] = []
    for item in items:
        if isinstance(item, Pattern):
            if not groups or groups[-1][1]:
                groups.append(([], []))
            groups[-1][0].append(item)
        else:
            groups[-1][1].append(item)
    for patterns, rules in groups:
        last = patterns[-1].opcode
        named = {r.name: r for r in rules if r.name}
        for p in patterns:
            own = named if p.opcode == last else {}
            if p.special:
                grammar.forms.append({"opcode": p.opcode, "custom": True, "line": p.line})
                continue
            mods = []
            for name, optional in p.modifiers:
                rule = own.get(name)
                values = rule.alternatives if rule else [name]
                grammar.modifier_tokens.update(values)
                mods.append({"name": name, "optional": optional, "values": values,
                             "typed": bool(rule and rule.type_)})
            form = {"opcode": p.opcode, "modifiers": mods, "arguments": p.arguments, "line": p.line}
            errors = _errors(p)
            if errors:
                form["errors"] = errors
            grammar.forms.append(form)


def _errors(p: Pattern) -> list[dict]:
    """The PtxErrors the code block pushes, each with the variables its enclosing ``if``s test."""
    found = []
    code = p.code
    for m in _PUSH.finditer(code):
        conditions = _enclosing_conditions(code, m.start())
        message = re.search(r'"([^"]*)"', code[m.end():m.end() + 300])
        found.append({"kind": m.group(1), "line": p.code_line + code.count("\n", 0, m.start()),
                      "when": conditions, "message": message.group(1) if message else ""})
    return found


def _enclosing_conditions(code: str, at: int) -> list[str]:
    """The conditions of the ``if`` blocks around ``at``, outermost first, as written. A push nested in
    any other block (a closure, a match arm, an else) depends on something this tool does not read:
    that is said as one condition starting ``unread:``, which the checker never counts as met."""
    conditions = []
    covered: list[tuple[int, int]] = []
    for m in re.finditer(r"\bif\s+(.*?)\{", code[:at], re.S):
        try:
            close = match_brace(code, m.end() - 1)
        except (ValueError, IndexError):
            continue
        if close > at:
            conditions.append(" ".join(m.group(1).split()))
            covered.append((m.end() - 1, close))
    # braces open around `at` that are neither the code block's own nor an `if`'s
    depth_opens = []
    for i, c in enumerate(code[:at]):
        if c == "{":
            depth_opens.append(i)
        elif c == "}" and depth_opens:
            depth_opens.pop()
    others = [i for i in depth_opens[1:] if all(i != start for start, _ in covered)]
    if others:
        snippet = " ".join(code[max(0, others[-1] - 40):others[-1]].split())
        conditions.append(f"unread: {snippet}")
    return conditions


def render(tag: str, commit: str, g: Grammar) -> str:
    out = [
        f"# ZLUDA {tag}'s PTX grammar as data: read from vosen/ZLUDA@{commit[:8]} {GRAMMAR}",
        "# by tools/ptx_rules_from_zluda.py (which reads the grammar's text; it builds nothing).",
        "# Regenerate with the tool; `--check` compares this file with the tag. Lines are at the tag.",
        "",
        "[provenance]",
        "generated_by = 'tools/ptx_rules_from_zluda.py'",
        f"sources = ['vosen/ZLUDA@{commit} ({tag}) {GRAMMAR}: derive_parser! block (Token enum, patterns, rules)']",
        "notes = [",
        "    'form.line: the pattern in the grammar; form.errors: PtxError::Todo/SyntaxError its code block pushes, "
        "with the if-conditions around each (an error in a statement drops its whole function: fn directive)',",
        "    'modifier.values: what the named rule lets the modifier be (a modifier without a rule is itself)',",
        "    'custom forms (the grammar`s `<=` patterns) have hand-written parsers: every modifier is accepted',",
        "]",
        "",
        "[ptx]",
        f"tag = '{tag}'",
        f"commit = '{commit}'",
        f"grammar = '{GRAMMAR}'",
        "",
        "[lexer]",
        f"source = '{GRAMMAR}:{g.lexer_start}-{g.lexer_end}@{tag}'",
        f"ident = {_toml_str(g.ident_regex)}",
        f"dot_ident = {_toml_str(g.dot_ident_regex)}",
        "tokens = [" + ", ".join(_toml_str(t) for t in g.tokens) + "]",
        "",
    ]
    for f in g.forms:
        out.append("[[form]]")
        out.append(f"opcode = '{f['opcode']}'")
        out.append(f"source = '{GRAMMAR}:{f['line']}@{tag}'")
        if f.get("custom"):
            out.append("custom = true")
            out.append("")
            continue
        out.append("modifiers = [")
        for m in f["modifiers"]:
            values = ", ".join(_toml_str(v) for v in m["values"])
            out.append(f"    {{ name = {_toml_str(m['name'])}, optional = {str(m['optional']).lower()}, "
                       f"values = [{values}] }},")
        out.append("]")
        out.append(f"arguments = {_toml_str(f['arguments'])}")
        for e in f.get("errors", ()):
            out.append("[[form.errors]]")
            out.append(f"kind = '{e['kind']}'")
            out.append(f"source = '{GRAMMAR}:{e['line']}@{tag}'")
            out.append("when = [" + ", ".join(_toml_str(c) for c in e["when"]) + "]")
            out.append(f"message = {_toml_str(e['message'])}")
        out.append("")
    return "\n".join(out)


def _toml_str(s: str) -> str:
    if "'" not in s and "\n" not in s:
        return f"'{s}'"
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


_CITATION = re.compile(r"^(?P<path>[\w./-]+):(?P<first>\d+)(?:-(?P<last>\d+))?@(?P<tag>[\w.-]+)(?: (?P<rest>.*))?$")


def check_sources(mirror: str, path: Path) -> list[str]:
    """Every file:line@tag of a hand-written rules file (ptx-module.toml) against the tag: the lines exist,
    a quoted or code text after the citation is on them, and every `fn NAME` it names starts in them."""
    import tomllib

    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    citations = [v for row in doc.get("release", []) for k, v in row.items() if k.endswith("_source")]
    citations += [c for row in doc.get("refusal", []) for c in row["source"]]
    problems = []
    files: dict[tuple[str, str], list[str]] = {}
    for citation in citations:
        m = _CITATION.match(citation)
        if m is None:
            problems.append(f"{citation!r}: not file:line@tag")
            continue
        key = (m["tag"], m["path"])
        if key not in files:
            files[key] = subprocess.run(["git", "-C", mirror, "show", f"{m['tag']}:{m['path']}"], check=True,
                                        capture_output=True, text=True).stdout.splitlines()
        lines = files[key]
        first, last = int(m["first"]), int(m["last"] or m["first"])
        if not 1 <= first <= last <= len(lines):
            problems.append(f"{citation!r}: lines {first}-{last} not in {m['path']} ({len(lines)} lines)")
            continue
        cited = " ".join(" ".join(lines[first - 1:last]).split())
        rest = (m["rest"] or "").strip()
        wanted = [f"fn {name}" for name in re.findall(r"\bfn (\w+)", rest)]
        if rest.startswith('"'):
            wanted += re.findall(r'"([^"]+)"', rest)
        elif rest and not rest.startswith("("):  # code as written, after any `fn NAME: `
            wanted.append(" ".join(re.sub(r"^fn \w+: ", "", rest).split())[:25])
        for text in wanted:
            if text not in cited:
                problems.append(f"{citation!r}: {text!r} is not on those lines")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", required=True, help="a bare git mirror of vosen/ZLUDA (the fetch tool's)")
    ap.add_argument("--tag", action="append", required=True)
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    ap.add_argument("--out", type=Path, default=RULES_DIR)
    ap.add_argument("--check-sources", action="store_true",
                    help="also check every citation of ptx-module.toml against the mirror")
    args = ap.parse_args(argv)
    status = 0
    if args.check_sources:
        problems = check_sources(args.mirror, args.out / "ptx-module.toml")
        print(f"ptx-module.toml: {len(problems)} citation problem(s)")
        for problem in problems:
            print(f"  {problem}")
        status |= bool(problems)
    for tag in args.tag:
        source = subprocess.run(["git", "-C", args.mirror, "show", f"{tag}:{GRAMMAR}"], check=True,
                                capture_output=True, text=True).stdout
        commit = subprocess.run(["git", "-C", args.mirror, "rev-list", "-n1", tag], check=True,
                                capture_output=True, text=True).stdout.strip()
        text = render(tag, commit, parse_grammar(source))
        path = args.out / f"ptx-{tag}.toml"
        if args.check:
            same = path.is_file() and path.read_text(encoding="utf-8") == text
            print(f"{tag}: {'matches' if same else 'DIFFERS from'} {path}")
            status |= not same
        else:
            path.write_text(text, encoding="utf-8")
            print(f"{tag}: wrote {path} ({text.count('[[form]]')} forms)")
    return status


if __name__ == "__main__":
    sys.exit(main())
