"""The PTX stage of one binary's read: each registered container's PTX checked at every known release.

    stage = PtxStage.for_rules(kernel_dirs)   # one per scan (worker): its decisions are kept across binaries
    facts = stage.check(buf, offsets)         # PtxFacts for KernelReport (plain tuples: the facts cache keeps them)

Every release is checked, not only the scan's: a fact kept in the facts
cache then answers any ``--zluda-release``. The texts are read once for all
releases (cuda4amd.scan.read.ptx.judge.Reading), identical texts once per
stage (by sha256), and each instruction form once per release.
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
from cuda4amd.scan.read.ptx.judge import OUTCOMES, PtxChecker, Reading, read_text

__all__ = ["COUNTS", "PtxFacts", "PtxStage"]

#: the counts per release, in KernelReport.ptx_counts order: the outcomes, then the kernels of the chosen modules
COUNTS = PTX_CHECK_COUNTS
assert COUNTS[:len(OUTCOMES)] == OUTCOMES
#: readings kept per stage (a worker's memory bound; real trees repeat texts within a library)
MAX_READINGS = 256


@dataclass(frozen=True)
class PtxFacts:
    tags: tuple[str, ...] = ()
    counts: tuple[tuple[int, ...], ...] = ()  # per tag, COUNTS
    dropped: tuple[tuple[str, ...], ...] = ()  # per tag, the kernels dropped or lost in empty modules
    refusal: tuple[tuple[str, ...], ...] = ()  # per tag, (construct, source) of the first refusal, or ()


@dataclass
class PtxStage:
    checkers: dict[str, PtxChecker]
    readings: dict[bytes, Reading] = field(default_factory=dict)

    @classmethod
    def for_rules(cls, kernel_dirs: Sequence[Path] = ()) -> PtxStage:
        rules = load_ptx_rule_files(list(kernel_dirs)) if kernel_dirs else load_ptx_rules()
        return cls({tag: PtxChecker(r) for tag, r in sorted(rules.items())})

    def read(self, text: bytes) -> Reading:
        key = hashlib.sha256(text).digest()
        reading = self.readings.get(key)
        if reading is None:
            if len(self.readings) >= MAX_READINGS:
                self.readings.clear()
            reading = self.readings[key] = read_text(text)
        return reading

    def check(self, buf: Buffer, offsets: Sequence[int]) -> PtxFacts:
        """The containers at ``offsets`` (registered, carrying PTX), judged at every release."""
        if not offsets or not self.checkers:
            return PtxFacts()
        containers = [[self.read(text) for text in ptx_texts(buf, offset)] for offset in offsets]
        tags, counts, dropped, refusal = [], [], [], []
        for tag, checker in self.checkers.items():
            tally = dict.fromkeys(COUNTS, 0)
            lost: list[str] = []
            first: tuple[str, ...] = ()
            for texts in containers:
                result = checker.check_container(texts)
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
