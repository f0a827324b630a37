"""The search patterns of one RuleSet, compiled once per scan and shared by
every binary (per platform, on first use): the whole strings of names
assembled at run time, and the plan that searches them in one binary.

All names are searched at once, never a ``find`` per name. The plan is
chosen per binary from a 16 KB sample of its read-only data
(:meth:`WholeStrings.plan`): NUL-led where NULs are few (text), else
anchored on a cover of bytes (tries.py); the pass anchored on "." rides
along with the suffix search (:meth:`WholeStrings.merged`), and Cython's
markers ride along in the anchored passes.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cuda4amd.rules.runtime import name_heads
from cuda4amd.scan.read.byname.cython import LZSS_MARKER, ZLIB_MARKER
from cuda4amd.scan.read.byname.names import HIT_BODY, HIT_FIRST, Classifier
from cuda4amd.scan.read.byname.tries import Pass, anchored_passes, cover_of, nul_passes

if TYPE_CHECKING:
    from cuda4amd.rules.ruleset import RuleSet
    from cuda4amd.rules.runtime import NameRules
    from cuda4amd.scan.read.binview import Buffer

__all__ = ["PLAN_MIN", "NamePatterns", "PlatformPatterns", "WholeStrings"]

# Cost model of one pass, measured with CPython 3.11's sre on the .rodata of
# libllvmlite.so (59 MiB, a third NULs), libtorch_cuda.so (9 MiB of text, 3%
# NULs) and ctranslate2.dll (8 MiB, 7% NULs): a regex that starts with one
# literal byte skips to the next such byte at about 0.35 ns a byte; each
# occurrence of that byte costs a match attempt, about 15 ns (20 ns for the
# NUL-led trie of every string, whose attempt starts at every NUL).
_NS_PER_BYTE = 0.35
_NS_PER_ATTEMPT = 15.0
_NS_PER_NUL = 20.0
#: Read-only data below this size is searched with the default plan (choosing
#: one costs more than it saves).
PLAN_MIN = 1 << 20
#: The sample a plan is chosen from: this many windows of this many bytes.
PLAN_WINDOWS = 64
PLAN_WINDOW = 256
#: Plans compiled per platform at most (a hostile tree cannot make every
#: binary compile its own).
MAX_PLANS = 8

_DOT = ord(".")


@dataclass
class WholeStrings:
    """Heads, fragments and version templates as whole strings (heads in
    UTF-16LE too, PE only), and the plans that search them: NUL-led or
    anchored on a cover of bytes, chosen per binary from a sample of its
    read-only data (:meth:`plan`). An anchored plan also looks for Cython's
    markers (:data:`ZLIB_MARKER`, :data:`LZSS_MARKER`) when its anchors
    cover them: then their own search is needed only off the segments."""

    ascii_words: list[bytes]
    wide_words: list[bytes]
    markers: list[bytes] = field(default_factory=lambda: [ZLIB_MARKER, LZSS_MARKER])
    #: the NUL-led plan, compiled when first chosen (see :meth:`nul`)
    nul_passes: tuple[Pass, ...] | None = None
    default: tuple[int, ...] = ()
    #: cover -> (its passes, whether they look for the markers)
    plans: dict[tuple[int, ...], tuple[tuple[Pass, ...], bool]] = field(default_factory=dict)
    #: a pass anchored on "." -> it merged with the suffix search
    joined: dict[re.Pattern[bytes], Pass] = field(default_factory=dict)
    #: the bytes the strings are made of, and NUL
    used: list[int] = field(default_factory=list)
    #: (dot_free, the sample's quantised frequencies of ``used``) -> the cover chosen
    covers: dict[tuple, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # the plans are compiled when a binary first needs them: compiling them all took 25-40 ms of
        # every worker process, most of whose binaries (NVIDIA's, those that load no library by name)
        # have no whole-string search at all
        self.default = cover_of([*self.ascii_words, *self.wide_words])

    def nul(self) -> tuple[Pass, ...]:
        if self.nul_passes is None:
            self.nul_passes = nul_passes(self.ascii_words, self.wide_words)
        return self.nul_passes

    def anchored(self, cover: tuple[int, ...]) -> tuple[tuple[Pass, ...], bool]:
        if cover not in self.plans:
            marked = bool(self.ascii_words or self.wide_words) and all(
                any(a in m for a in cover) for m in self.markers)
            passes = anchored_passes(self.ascii_words, self.wide_words, cover, self.markers if marked else [])
            self.plans[cover] = passes, marked
        return self.plans[cover]

    def merged(self, dot: Pass) -> Pass:
        """The suffix search and the anchored pass ``dot`` (anchor ".") as one
        regex: each match takes the "." alone, so the suffix hits are those of
        :data:`~cuda4amd.scan.read.byname.names.HIT` (none holds a second
        "."); group 1 is the suffix after the ".", the later groups are
        ``dot``'s twice over (with and without one)."""
        if dot[0] not in self.joined:
            body = dot[0].pattern[len(re.escape(b".")):]
            # the bytes that can follow the "." of a match: checked first, most "." fail there
            # without entering the two lookaheads (measured: then as fast as the suffix search alone)
            followers = set(HIT_FIRST)
            gate = True
            for text in (*self.ascii_words, *self.markers):
                for i, byte in enumerate(text):
                    if byte == _DOT:
                        if i + 1 < len(text):
                            followers.add(text[i + 1])
                        elif text in self.markers:
                            gate = False  # a marker may end at its "."
                        else:
                            followers.add(0)  # a string between NULs ends there
            if any(_DOT in w for w in self.wide_words):
                followers.add(0)  # the "."'s high byte
            lead = rb"\.(?=[" + b"".join(re.escape(bytes([b])) for b in sorted(followers)) + rb"])" if gate else rb"\."
            regex = re.compile(lead + rb"(?:(?=(" + HIT_BODY + rb"))(?:(?=" + body + rb")|)|(?=" + body + rb"))",
                               re.DOTALL)
            self.joined[dot[0]] = regex, dot[1]
        return self.joined[dot[0]]

    def plan(self, buf: Buffer, segments: list[tuple[int, int]],
             dot_free: bool = False) -> tuple[tuple[Pass, ...], bool]:
        """The cheaper plan for these segments by the cost model above, from
        the byte frequencies of evenly spread sample windows: its passes, and
        whether they look for the markers. ``dot_free``: a pass anchored on
        "." can ride along with the suffix search (:meth:`merged`)."""
        total = sum(b - a for a, b in segments)
        if not self.ascii_words and not self.wide_words:
            return (), False
        if total < PLAN_MIN:
            return self.anchored(self.default)
        sample = b"".join(_windows(buf, segments, total))
        if not self.used:
            self.used = sorted({0, *b"".join(self.ascii_words + self.wide_words)})
        share = {byte: sample.count(byte) / len(sample) for byte in self.used}
        # frequencies to powers of two: close samples give the same cover (one compiled plan)
        quantised = {byte: 2.0 ** round(math.log2(max(f, 1e-6))) for byte, f in share.items()}
        cost = {byte: _NS_PER_BYTE + _NS_PER_ATTEMPT * f for byte, f in quantised.items()}
        if dot_free and _DOT in cost:
            cost[_DOT] -= _NS_PER_BYTE
        key = (dot_free, *quantised.values())
        cover = self.covers.get(key)
        if cover is None:
            cover = cover_of([*self.ascii_words, *self.wide_words], cost)
            if len(self.covers) >= 256:
                self.covers.clear()
            self.covers[key] = cover
        if cover not in self.plans and len(self.plans) >= MAX_PLANS:
            cover = min(self.plans, key=lambda c: (sum(cost[b] for b in c), c))
        passes = bool(self.ascii_words) + bool(self.wide_words)  # the NUL-led plan's: one per encoding
        nul_cost = passes * _NS_PER_BYTE + _NS_PER_NUL * share[0] * passes
        if nul_cost < sum(cost[b] for b in cover):
            return self.nul(), False
        return self.anchored(cover)


def _windows(buf: Buffer, segments: list[tuple[int, int]], total: int) -> Iterator[bytes | bytearray]:
    """PLAN_WINDOWS windows of PLAN_WINDOW bytes, evenly spread over the segments."""
    step = total // PLAN_WINDOWS
    it = iter(segments)
    a, b = next(it)
    skipped = 0  # bytes of the segments before [a, b)
    for k in range(PLAN_WINDOWS):
        at = k * step
        while at >= skipped + (b - a):
            skipped += b - a
            a, b = next(it)
        lo = a + at - skipped
        yield buf[lo:min(b, lo + PLAN_WINDOW)]


@dataclass(frozen=True)
class PlatformPatterns:
    #: heads, fragments and version templates as whole strings, and their plans
    whole: WholeStrings
    #: ASCII whole string -> (is a head, "fragment" / "versioner" / "")
    words: dict[str, tuple[bool, str]]
    #: the version templates alone as whole strings
    versioning: tuple[Pass, ...]
    #: head -> (names it assembles, strong)
    heads: dict[str, tuple[frozenset[str], bool]]
    #: what a versioner template appends to a base name ("" when the platform has none)
    appends: str = ""


class NamePatterns:
    """The compiled search patterns for one RuleSet, built once per scan and
    shared by every binary (per platform, on first use)."""

    def __init__(self, rules: RuleSet, name_rules: NameRules | None = None) -> None:
        self.rules = rules
        #: the run-time name rules of every rules folder (RuleSet.names), unless given
        self.name_rules = name_rules if name_rules is not None else rules.names
        self._built: dict[tuple[str, bool], PlatformPatterns] = {}

    def for_platform(self, platform: str, utf16: bool) -> PlatformPatterns:
        key = (platform, utf16)
        if key not in self._built:
            self._built[key] = self._build(platform, utf16)
        return self._built[key]

    def _build(self, platform: str, utf16: bool) -> PlatformPatterns:
        classify = Classifier(self.rules, platform)
        heads = {h: v for h, v in name_heads(self.name_rules, self.rules, platform).items()
                 if not classify.plain(h)}  # a complete name is the suffix search's job
        fragments = self.name_rules.fragments.get(platform, ())
        versioning, appends = self.name_rules.versioners.get(platform, ((), ""))
        words: dict[str, tuple[bool, str]] = {}
        for v in versioning:
            words[v] = (False, "versioner")
        for f in fragments:
            words[f] = (False, "fragment")  # a string that is both counts as a fragment
        for h in heads:
            words[h] = (True, words.get(h, (False, ""))[1])
        ascii_words = [w.encode("latin-1") for w in words]
        wide_words = [h.encode("latin-1") for h in heads] if utf16 else []
        versioners = [v.encode("latin-1") for v in versioning]
        return PlatformPatterns(WholeStrings(ascii_words, wide_words), words,
                                anchored_passes(versioners, [], cover_of(versioners)), heads, appends)
