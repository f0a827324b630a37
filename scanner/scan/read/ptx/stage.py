"""The PTX stage of one binary's read: each registered container's PTX checked at every known release.

    stage = PtxStage.for_rules(kernel_dirs)   # one per scan (worker): its decisions are kept across binaries
    facts = stage.check(buf, offsets)         # PtxFacts for KernelReport (plain tuples: the facts cache keeps them)

Every release is checked, not only the scan's: a fact kept in the facts
cache then answers any ``--zluda-release``. A text is read once for all
releases (cuda4amd.scan.read.ptx.reading.Reading) and dropped; identical texts
are checked once per stage (by sha256: their results are kept, not their
readings), what each distinct statement piece reads as once per stage, and
each instruction form once per release.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cuda4amd.model import PTX_CHECK_COUNTS
from cuda4amd.rules.ptx_rules import load_ptx_rule_files, load_ptx_rules
from cuda4amd.scan.read.binview import Buffer
from cuda4amd.scan.read.ptx.entries import ptx_texts
from cuda4amd.scan.read.ptx.judge import OUTCOMES, ModuleResult, PtxChecker
from cuda4amd.scan.read.ptx.reading import Pieces, Reading

__all__ = ["COUNTS", "PtxFacts", "PtxStage"]

#: the counts per release, in KernelReport.ptx_counts order: the outcomes, then the kernels of the chosen modules
COUNTS = PTX_CHECK_COUNTS
assert COUNTS[:len(OUTCOMES)] == OUTCOMES
#: texts whose results are kept per stage (a worker's memory bound; real trees repeat texts within a library)
MAX_RESULTS = 4096


@dataclass(frozen=True)
class PtxFacts:
    tags: tuple[str, ...] = ()
    counts: tuple[tuple[int, ...], ...] = ()  # per tag, COUNTS
    dropped: tuple[tuple[str, ...], ...] = ()  # per tag, the kernels dropped or lost in empty modules
    refusal: tuple[tuple[str, ...], ...] = ()  # per tag, (construct, source) of the first refusal, or ()


@dataclass
class PtxStage:
    checkers: dict[str, PtxChecker]
    #: sha256 of a text -> its result at each release (the checkers' order)
    results: dict[bytes, tuple[ModuleResult, ...]] = field(default_factory=dict)
    #: what each statement piece reads as, and which are plain at every release
    pieces: Pieces = field(init=False)

    def __post_init__(self) -> None:
        self.pieces = Pieces(tuple(self.checkers.values()))

    @classmethod
    def for_rules(cls, kernel_dirs: Sequence[Path] = ()) -> PtxStage:
        rules = load_ptx_rule_files(list(kernel_dirs)) if kernel_dirs else load_ptx_rules()
        return cls({tag: PtxChecker(r) for tag, r in sorted(rules.items())})

    def check_text(self, text: bytes) -> tuple[ModuleResult, ...]:
        """One PTX text's result at every release (the checkers' order), read once."""
        key = hashlib.sha256(text).digest()
        results = self.results.get(key)
        if results is None:
            if len(self.results) >= MAX_RESULTS:
                self.results.clear()
            reading = Reading(text, self.pieces)
            reading.look_up()  # one pass for all releases
            results = self.results[key] = tuple(checker.check_reading(reading) for checker in self.checkers.values())
        return results

    def check(self, buf: Buffer, offsets: Sequence[int]) -> PtxFacts:
        """The containers at ``offsets`` (registered, carrying PTX), judged at every release."""
        if not offsets or not self.checkers:
            return PtxFacts()
        containers = [[self.check_text(text) for text in ptx_texts(buf, offset)] for offset in offsets]
        tags, counts, dropped, refusal = [], [], [], []
        for number, (tag, checker) in enumerate(self.checkers.items()):
            tally = dict.fromkeys(COUNTS, 0)
            lost: list[str] = []
            first: tuple[str, ...] = ()
            for texts in containers:
                result = checker.choose([results[number] for results in texts])
                tally[result.outcome] += 1
                tally["kernels"] += len(result.kernels)
                if result.outcome == "empty_module":
                    lost += result.kernels
                elif result.outcome in ("functions_dropped", "load_fails"):
                    lost += result.dropped_kernels
                if result.outcome != "ok" and not first:
                    first = (result.construct, result.source)
            tags.append(tag)
            counts.append(tuple(tally[c] for c in COUNTS))
            dropped.append(tuple(dict.fromkeys(lost)))
            refusal.append(first)
        return PtxFacts(tuple(tags), tuple(counts), tuple(dropped), tuple(refusal))
