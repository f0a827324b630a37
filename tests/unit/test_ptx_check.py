"""ZLUDA's PTX check (scan/read/ptx, rules/kernels/ptx-*.toml): hand-written PTX per rule.

Each fixture under fixtures/ptx/ says in its comment what ZLUDA's source does with it.
"""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import lz4.block
import pytest
import zstandard
from conftest import FIXTURES, REPO

from cuda4amd.rules.ptx_rules import load_ptx_rules, parse_arguments
from cuda4amd.rules.validate import RulesError, shipped_rules_dir
from cuda4amd.scan.read.ptx import PtxChecker
from cuda4amd.scan.read.ptx.entries import ptx_texts
from cuda4amd.scan.read.ptx.lexer import lexer_error, strip
from cuda4amd.scan.read.ptx.stage import PtxStage

PTX = FIXTURES / "ptx"
RULES = load_ptx_rules()
TAGS = ("v5", "v6-preview.69", "v6", "v7-preview.9")


def fixture(name: str) -> bytes:
    return (PTX / name).read_bytes()


def check(name: str, tag: str):
    return PtxChecker(RULES[tag]).check_module(fixture(name))


def test_every_release_of_the_project_has_rules():
    assert set(TAGS) <= set(RULES)
    for tag in TAGS:
        rules = RULES[tag]
        assert rules.forms and rules.refusals
        for forms in rules.forms.values():
            assert all(f.source.endswith(f"@{tag}") for f in forms)
        assert all(r.source.split(" ")[0].endswith(f"@{tag}") for r in rules.refusals)


@pytest.mark.parametrize("tag", TAGS)
def test_accepted(tag):
    result = check("accepted.ptx", tag)
    assert result.outcome == "ok" and result.kernels == ("_Z4axpyfPKfPfi",) and result.invalid_directives == 0


@pytest.mark.parametrize("tag", TAGS)
def test_dropped_function(tag):
    result = check("dropped_function.ptx", tag)
    assert result.outcome == "functions_dropped"
    assert result.dropped_kernels == ("drop_me",) and result.kernels == ("keep", "drop_me")
    assert "red.global.add.f32" in result.construct and result.source.endswith(
        f"@{tag} (fn directive: an error while parsing drops the directive)")


@pytest.mark.parametrize("tag", TAGS)
def test_lexer_error_empties_the_module(tag):
    result = check("lexer_error.ptx", tag)
    assert result.outcome == "empty_module" and result.kernels == ("k",)
    assert ".callprototype" in result.construct and "parse_module_unchecked" in result.source


@pytest.mark.parametrize("tag", TAGS)
def test_translator_refusal_fails_the_load(tag):
    result = check("translator_refusal.ptx", tag)
    assert result.outcome == "load_fails" and "setp with two destinations" in result.construct
    assert result.source.startswith("ptx/src/pass/llvm/emit.rs:") and f"@{tag}" in result.source


@pytest.mark.parametrize("tag", TAGS)
def test_a_call_to_a_dropped_function_fails_the_load(tag):
    result = check("calls_dropped.ptx", tag)
    assert result.outcome == "load_fails" and result.dropped_functions == ("helper",)
    assert result.construct == "k calls helper, which the parser dropped"
    # why helper went: ld with an L2 cache hint is a parser Todo at every tag
    decisions = PtxChecker(RULES[tag])
    decisions.check_module(fixture("calls_dropped.ptx"))
    drops = [d for d in decisions.shapes.values() if d.status == "drop"]
    assert drops and "cache" in drops[0].construct


@pytest.mark.parametrize(("tag", "outcome"), [("v5", "functions_dropped"), ("v6-preview.69", "functions_dropped"),
                                              ("v6", "ok"), ("v7-preview.9", "ok")])
def test_instruction_forms_differ_by_release(tag, outcome):
    result = check("by_release.ptx", tag)
    assert result.outcome == outcome
    if outcome != "ok":
        assert "no rule for `exit`" in result.construct or "no rule for `bfind`" in result.construct


@pytest.mark.parametrize(("tag", "outcome"), [("v5", "functions_dropped"), ("v6-preview.69", "functions_dropped"),
                                              ("v6", "ok"), ("v7-preview.9", "ok")])
def test_debug_target(tag, outcome):
    result = check("debug_target.ptx", tag)
    assert result.outcome == outcome and result.dropped_kernels == ()


def test_choice_among_entries_last_first():
    ok, dropped, two = fixture("accepted.ptx"), fixture("dropped_function.ptx"), fixture("calls_dropped.ptx")
    checker = PtxChecker(RULES["v6"])
    # the last entry is parsed first and wins when it has no invalid directive
    assert checker.check_container([dropped, ok]).entry == 1
    # else an earlier one without invalid directives
    result = checker.check_container([ok, dropped])
    assert (result.entry, result.outcome) == (0, "ok")
    # else the fewest invalid directives; a tie keeps the later entry (seen first)
    assert checker.check_container([dropped, dropped]).entry == 1
    assert checker.check_container([fixture("lexer_error.ptx"), dropped]).entry == 1
    assert checker.check_container([dropped, two]).outcome in ("functions_dropped", "load_fails")
    assert checker.check_container([]).outcome == "no_ptx"


def test_module_level_api():
    from cuda4amd.scan.read.ptx import check_container, check_ptx_module

    assert check_ptx_module(fixture("accepted.ptx"), RULES["v6"]).outcome == "ok"
    assert check_container([fixture("dropped_function.ptx")], RULES["v6"]).dropped_kernels == ("drop_me",)


def test_v5_takes_the_first_entry():
    checker = PtxChecker(RULES["v5"])
    result = checker.check_container([fixture("dropped_function.ptx"), fixture("accepted.ptx")])
    assert (result.entry, result.outcome) == (0, "functions_dropped")
    assert "get_ptx" in RULES["v5"].entry_choice_source


def test_forms_are_decided_once():
    checker = PtxChecker(RULES["v6"])
    checker.check_module(fixture("accepted.ptx"))
    decided, keys = dict(checker.shapes), dict(checker.keys)
    checker.check_module(fixture("accepted.ptx"))
    # a key (a statement with digits 0) is decided once; its head's exact variants (`mov.u00`: mov.u16,
    # mov.u32, mov.u64) are the shapes decided for it
    assert checker.shapes == decided and checker.keys == keys and len(keys) < 30


@pytest.mark.parametrize(("statement", "status", "tags"), [
    (b"\n\tred.global.add.f32 \t[%rd2], %f1", "drop", TAGS),  # no rule for red at any tag
    (b"\n\tld.global.L2::cache_hint.u32 %r1, [%rd1], %rd2", "drop", TAGS),  # a parser Todo
    (b"\n\tsetp.eq.s32 %p1|%p2, %r1, 0", "refuse", TAGS),  # the translator's refusal
    (b"\n$L__BB0_2:\n\tatom.global.cluster.add.u32 %r1, [%rd1], 1", "refuse", TAGS),  # .cluster scope
    (b"\n\t@%p1 bra \t$L__BB0_2", "ok", TAGS),
    (b"\n\t.reg .b32 \t%r<6>", "ok", TAGS),
    (b"\n\tld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd13+16]", "ok", TAGS),
    (b"\n\tld.global.u32 %r1, %rd13", "drop", TAGS),  # the address needs brackets
    (b"\n\tbfind.shiftamt.u32 %r2, %r1", "ok", ("v6", "v7-preview.9")),
    (b"\n\tbfind.shiftamt.u32 %r2, %r1", "drop", ("v5", "v6-preview.69")),
])
def test_one_statement(statement, status, tags):
    for tag in tags:
        decision = PtxChecker(RULES[tag]).decide_statement(statement)
        assert decision.status == status, (tag, decision)
        assert status == "ok" or decision.source.split(" ")[0].endswith(f"@{tag}")


_SHARING = [  # heads met with several operand shapes, operand shapes met with several heads and patterns
    b"ld.global.u32 %r1, %rd13", b"ld.global.u32 %r1, [%rd13]", b"ld.global.u64 %rd1, [%rd13]",
    b"ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd13+16]", b"ld.global.u32 {%r1, %r2, %r3, %r4}, [%rd13+16]",
    b"setp.eq.s32 %p1|%p2, %r1, 0", b"setp.eq.s32 %p1, %r1, 0", b"setp.eq.u32 %p1|%p2, %r1, 0",
    b"mov.u32 %r1, %r2", b"mov.f32 %f1, %f2", b"mov.f16 %h1, %h2", b"add.s32 %r1, %r2", b"add.s32 %r1, %r2, %r3",
    b"red.global.add.f32 [%rd2], %f1", b"bfind.shiftamt.u32 %r2, %r1", b"ld.global.L2::cache_hint.u32 %r1, [%rd1], %rd2",
]


@pytest.mark.parametrize("tag", TAGS)
def test_what_a_checker_keeps_between_statements_changes_no_decision(tag):
    # a head is fitted once and each (arguments, operands) fit read once per checker: statements
    # sharing either, decided by one checker in either order, decide as each does alone
    alone = [PtxChecker(RULES[tag]).decide_statement(s) for s in _SHARING]
    for order in (_SHARING, _SHARING[::-1]):
        shared = PtxChecker(RULES[tag])
        decided = {s: shared.decide_statement(s) for s in order}
        assert [decided[s] for s in _SHARING] == alone
    assert len({d.status for d in alone}) > 1


def test_lexer_alphabet():
    assert lexer_error(strip(b".version 8.0 // a comment with * & # and a lone _\n")) is None
    assert lexer_error(strip(b'.file 1 "a&b.cu"\n')) is None
    for bad in (b"add.s32 %r1, %r2, _;", b"mov.u32 %r1, 3*4;", b"x $ y", b'.file 1 "unterminated', "é".encode()):
        assert lexer_error(strip(bad)) is not None, bad


def test_argument_patterns():
    slots = parse_arguments("p[|q], a, b, {!}c")
    assert [(s.name, s.optional, s.pre_pipe, s.negatable) for s in slots] == [
        ("p", False, False, False), ("q", True, True, False), ("a", False, False, False), ("b", False, False, False),
        ("c", False, False, True)]
    slots = parse_arguments("d, [a]{.unified}{, cache_policy}")
    assert [(s.name, s.pre_bracket, s.post_bracket, s.unified, s.optional) for s in slots] == [
        ("d", False, False, False, False), ("a", True, True, True, False), ("cache_policy", False, False, False, True)]


def _container(entries: list[tuple[int, int, bytes]]) -> bytes:
    """A fat binary container of (flags, header version, payload) PTX entries (layout: scan/read/fatbin.py)."""
    body = b""
    for flags, version, text in entries:
        if flags & 0x2000:
            payload = lz4.block.compress(text, store_size=False)
        elif flags & 0x8000:
            payload = zstandard.ZstdCompressor().compress(text)
        else:
            payload = text
        padded = payload + b"\0" * (-len(payload) % 8)
        compressed = len(payload) if flags & 0xA000 else 0
        header = struct.pack("<HHIQII", 1, version, 0x40, len(padded), compressed, 0)
        header += struct.pack("<HHI", 0, 8, 52) + b"\0" * 8 + struct.pack("<Q", flags | 0x1) + b"\0" * 8
        header += struct.pack("<Q", len(text) if compressed else 0)
        assert len(header) == 0x40
        body += header + padded
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def test_entries_decompressed_as_zluda_does():
    text = fixture("accepted.ptx")
    blob = b"pad!" * 2 + _container([(0x2000, 0x101, text), (0x8000, 0x101, text), (0, 0x101, text + b"\0\0"),
                                     (0, 0x101, b"\xff\xfe not utf-8"), (0, 0x102, text)])
    texts = ptx_texts(blob, 8)
    # lz4, zstd, plain (trailing NULs cut); not UTF-8 and an unknown header version skipped
    assert texts == [text, text, text]
    facts = PtxStage.for_rules().check(blob, [8])
    assert facts.tags == tuple(sorted(RULES))
    assert all(counts[0] == 1 and counts[-1] == 1 for counts in facts.counts)  # one container ok, one kernel


def test_kernels_dir_skips_ptx_files():
    from cuda4amd.rules.kernels import load_ptx_facts

    assert set(TAGS) <= set(load_ptx_facts().releases)


def test_a_refusal_needs_a_source_per_tag(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    text = (shipped_rules_dir() / "kernels" / "ptx-module.toml").read_text(encoding="utf-8")
    (kernels / "ptx-module.toml").write_text(text.replace("'ptx/src/pass/llvm/emit.rs:1504@v5", "'emit.rs@v5", 1),
                                             encoding="utf-8")
    shutil.copy(shipped_rules_dir() / "kernels" / "ptx-v5.toml", kernels / "ptx-v5.toml")
    from cuda4amd.rules.ptx_rules import load_ptx_rule_files

    with pytest.raises(RulesError, match="not file:line@v5"):
        load_ptx_rule_files([kernels])


MIRROR = Path(os.environ.get("ZLUDA_MIRROR", "/work/.mirror/vosen+ZLUDA/repo"))


@pytest.mark.skipif(not (MIRROR / "HEAD").exists(), reason="no fetched mirror of vosen/ZLUDA")
def test_rules_match_the_grammar_at_each_tag():
    tags = [a for tag in TAGS for a in ("--tag", tag)]
    run = subprocess.run([sys.executable, str(REPO / "tools" / "ptx_rules_from_zluda.py"), "--mirror", str(MIRROR),
                          "--check", "--check-sources", *tags], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.skipif(not (MIRROR / "HEAD").exists(), reason="no fetched mirror of vosen/ZLUDA")
def test_zludas_own_test_ptx_is_ok():
    # v5 and v6-preview.69 reject two of their own tests' `.target …, debug` (their fn target has no `, debug`)
    run = subprocess.run([sys.executable, str(REPO / "tools" / "check_zluda_test_ptx.py"), "--mirror", str(MIRROR),
                          "--tag", "v6", "--tag", "v7-preview.9"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "v6: 195 of 195" in run.stdout and "v7-preview.9: 201 of 201" in run.stdout


def _two_kernels(first: bytes, second: bytes) -> bytes:
    """A module of two kernels whose one statement each differs from the other's only by digits of the
    head: with digits 0 they read the same."""
    kernel = (b"\n.visible .entry %s()\n{\n\t.reg .b32 \t%%r<9>;\n\t.reg .b64 \t%%rd<3>;\n"
              b"\t%s;\n\tret;\n}\n")
    return (b".version 7.0\n.target sm_80\n.address_size 64\n"
            + kernel % (b"k_first", first) + kernel % (b"k_second", second))


_SET_F32 = b"set.eq.u32.f32 \t%r1, %r2, %r3"
_SET_F16 = b"set.eq.u32.f16 \t%r1, %r2, %r3"  # rules/kernels/ptx-v5.toml: set's types at v5 have no .f16
_MMA = (b"mma.sync.aligned.m16n8k%s.row.col.f32.f16.f16.f32 \t{%%r1, %%r2, %%r3, %%r4}, {%%r5, %%r6, %%r7, %%r8}, "
        b"{%%r1, %%r2}, {%%r5, %%r6, %%r7, %%r8}")  # v6 implements m16n8k16 and not m16n8k32


@pytest.mark.parametrize(("tag", "good", "bad"), [
    ("v5", _SET_F32, _SET_F16),
    ("v6", _MMA % b"16", _MMA % b"32"),
])
@pytest.mark.parametrize("bad_first", [True, False])
def test_heads_that_differ_by_digits_are_decided_apart(tag: str, good: bytes, bad: bytes, bad_first: bool):
    # statements are keyed by their head as written: one of two digit-different heads with the same
    # operands is dropped, the other accepted, whichever comes first or last in the text
    text = _two_kernels(bad, good) if bad_first else _two_kernels(good, bad)
    checker = PtxChecker(RULES[tag])
    assert checker.decide_statement(b"\n\t" + good).status == "ok"
    assert checker.decide_statement(b"\n\t" + bad).status == "drop"
    result = checker.check_module(text)
    assert result.outcome == "functions_dropped"
    assert result.dropped_kernels == (("k_first",) if bad_first else ("k_second",))
    assert result.construct.startswith(bad.split()[0].decode())
    # and through the stage, which reads a text once for every release
    stage = PtxStage({tag: PtxChecker(RULES[tag])})
    assert stage.check_text(text)[0].dropped_kernels == result.dropped_kernels


def test_a_head_written_two_ways_in_one_function_is_found_where_it_is():
    # the same key twice in one body, the second occurrence the refused one: the function is dropped and
    # the construct is that occurrence's head as written
    body = b"\n\t" + _SET_F32 + b";\n\t" + _SET_F16
    result = PtxChecker(RULES["v5"]).check_module(_two_kernels(body, b"ret"))
    assert result.dropped_kernels == ("k_first",)
    assert result.construct.startswith("set.eq.u32.f16")


# The text is cut at `;` before comments and strings are stripped, piece by piece (scan/read/ptx/reading.py);
# where a comment or string runs across a `;` the whole text is stripped first. Either way a module must read
# as it reads stripped: these variations of the fixtures, each with the comment or string the reading must see
# through, keep the fixture's outcome at every release.
_VARIANTS = {  # each replaces every `ret;` of the fixture
    "a comment holding `;`": b"ret; // done; nothing after",
    "a string holding `;`": b'.pragma "a;b";\n\tret;',
    "a block comment over lines": b"/* ret;\n\t{ } */ ret;",
    "a comment holding a brace": b"ret; // }",
    "a comment naming a function": b"ret;\n\t// .entry ghost(",
    "a comment holding a call": b"// call.uni helper, (x)\n\tret;",
    "a comment holding foreign bytes": b"ret; // \xc3\xa9 & * # '",
}


@pytest.mark.parametrize("name", ["accepted.ptx", "dropped_function.ptx", "translator_refusal.ptx",
                                  "calls_dropped.ptx", "lexer_error.ptx"])
@pytest.mark.parametrize("variant", sorted(_VARIANTS))
def test_comments_and_strings_are_seen_through(name, variant):
    text = fixture(name)
    assert b"\tret;" in text
    changed = text.replace(b"\tret;", b"\t" + _VARIANTS[variant])
    for tag in TAGS:
        expected, got = (PtxChecker(RULES[tag]).check_module(t) for t in (text, changed))
        assert (got.outcome, got.kernels, got.dropped_kernels, got.dropped_functions) == (
            expected.outcome, expected.kernels, expected.dropped_kernels, expected.dropped_functions), (variant, tag)


def test_a_refused_statement_in_a_comment_or_string_is_not_read():
    text = fixture("accepted.ptx").replace(b"\tret;", b'\t// red.global.add.f32 [%rd1], %f1;\n'
                                           b'\t.pragma "red.global.add.f32 [%rd1], %f1;";\n\tret;')
    for tag in TAGS:
        assert PtxChecker(RULES[tag]).check_module(text).outcome == "ok", tag


def test_one_stage_reads_texts_with_and_without_comments_alike():
    """The stage keeps what each piece reads as across texts: a piece first met in a text read as written
    and then in a stripped one (or the other way) reads the same."""
    plain = fixture("dropped_function.ptx")
    commented = plain.replace(b"\tret;", b"\tret; // a; b")
    stage = PtxStage.for_rules()
    first = [(r.outcome, r.dropped_kernels) for r in stage.check_text(plain)]
    assert [(r.outcome, r.dropped_kernels) for r in stage.check_text(commented)] == first
    assert [(r.outcome, r.dropped_kernels) for r in PtxStage.for_rules().check_text(commented)] == first


def test_a_call_in_a_comment_calls_nothing():
    text = fixture("dropped_function.ptx").replace(b"\tret;", b"\t// call.uni drop_me, (x)\n\tret;")
    for tag in TAGS:
        result = PtxChecker(RULES[tag]).check_module(text)
        assert (result.outcome, result.dropped_kernels) == ("functions_dropped", ("drop_me",)), tag
