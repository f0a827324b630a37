"""The syntax of a library name in a binary's data, and which names are CUDA.

A name is the run of file-name characters before ``.dll`` (any case) or
``.so[.N...]`` (a path's directory part is left off). It counts when the
rules classify it as CUDA on the binary's platform: ``family_for`` or
``is_unknown_cuda``.

Templates: a name with printf/format placeholders (``%d``, ``%s``, ``%u``,
``%02d``, ``%ld``, ``{}``, ``{0}``, ``{major}``, ``{:d}``) counts when some
substitution of small version numbers (0-13, 100-102, 110-112, 120, 130;
plus cuDNN sub-library words for ``%s``/``{}``) classifies as CUDA; the
reported name is the template, ``template=True``.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda4amd.rules.ruleset import RuleSet

__all__ = [
    "HIT",
    "HIT_ASCII",
    "HIT_BODY",
    "HIT_FIRST",
    "MAX_NAME",
    "TEMPLATE",
    "Classifier",
    "expand_template",
    "names_in",
]

#: Longest file name considered (characters before the suffix).
MAX_NAME = 128

_TEMPLATE_SRC = (
    r"%[-+ #0]*[0-9]*(?:\.[0-9]+)?(?:hh|h|ll|l|z|j|t|I64|I32)?[diuxXs]"
    r"|\{[A-Za-z0-9_]*(?::[^{}\s]{0,10})?\}"
)
TEMPLATE = re.compile(_TEMPLATE_SRC, re.ASCII)
#: The run of file-name characters (and placeholders) that ends a window.
_STEM_END = re.compile(r"(?:" + _TEMPLATE_SRC + r"|[A-Za-z0-9_+\-.])+\Z", re.ASCII)
#: Version tail after ".so": .12, .9.1.0, .%d, .{}
_SO_TAIL = re.compile(r"(?:\.(?:[0-9]+|" + _TEMPLATE_SRC + r"))*", re.ASCII)
_WORD_CHAR = re.compile(r"[A-Za-z0-9_]", re.ASCII)
_LEAD_TEMPLATES = re.compile(r"(?:" + _TEMPLATE_SRC + r")+", re.ASCII)

#: One pass over the data finds both encodings' suffixes.
HIT_BODY = rb"(?:[dD][lL][lL]|so)|\x00(?:[dD]\x00[lL]\x00[lL]|s\x00o)\x00"
HIT = re.compile(rb"\.(?:" + HIT_BODY + rb")")
#: The bytes HIT_BODY can start with.
HIT_FIRST = b"dDs\x00"
HIT_ASCII = re.compile(rb"\.(?:[dD][lL][lL]|so)")

_NUMBERS = tuple(str(n) for n in (*range(14), 100, 101, 102, 110, 111, 112, 120, 130))
_FEW_NUMBERS = ("0", "1", "2", "9", "10", "11", "12", "13", "100", "110", "120", "130")
_WORDS = ("ops", "cnn", "adv", "graph", "heuristic", "engines_precompiled",
          "engines_runtime_compiled", "ops_infer", "ops_train", "cnn_infer", "adv_infer")
#: Combinations tried per template at most.
MAX_COMBOS = 5000


class Classifier:
    """Memoised "is this a CUDA library name?" for one platform.

    Returns 2 for a family match, 1 for an unknown-CUDA match, 0 otherwise.
    """

    def __init__(self, rules: RuleSet, platform: str) -> None:
        self.rules = rules
        self.platform = platform
        self.cache: dict[str, int] = {}

    def plain(self, name: str) -> int:
        level = self.cache.get(name)
        if level is None:
            if self.rules.family_for(name, self.platform) is not None:
                level = 2
            elif self.rules.is_unknown_cuda(name, self.platform):
                level = 1
            else:
                level = 0
            self.cache[name] = level
        return level

    def __call__(self, name: str) -> int:
        level = self.cache.get(name)
        if level is not None:
            return level
        if not TEMPLATE.search(name):
            return self.plain(name)
        best = 0
        for filled in _fillings(name):
            best = max(best, self.plain(filled))
            if best == 2:
                break
        self.cache[name] = best
        return best


def _fillings(name: str) -> Iterator[str]:
    """``name`` with its placeholders replaced by plausible values (at most
    MAX_COMBOS combinations)."""
    pieces = TEMPLATE.split(name)
    holes = TEMPLATE.findall(name)
    choices = []
    for hole in holes:
        wordy = hole.endswith("s") or hole.startswith("{")
        nums = _NUMBERS if len(holes) <= 2 else _FEW_NUMBERS
        choices.append((*nums, *_WORDS) if wordy else nums)
    for n, combo in enumerate(itertools.product(*choices)):
        if n >= MAX_COMBOS:
            return
        yield pieces[0] + "".join(v + p for v, p in zip(combo, pieces[1:], strict=True))


def expand_template(name: str, rules: RuleSet, platform: str, unknown: bool = False) -> tuple[str, ...]:
    """The concrete CUDA library names a reported name may stand for, sorted.

    For a template: every substitution (values as in the module docstring)
    that a rules family claims, e.g. ``nvrtc64_%d_0.dll`` -> nvrtc64_100_0.dll
    ... nvrtc64_130_0.dll; with ``unknown=True`` also those only the
    unknown-CUDA patterns match (broad: nvrtc64_9_0.dll ...). For a plain
    name: the name itself if it is CUDA (family, or unknown with ``unknown``).
    """
    classify = Classifier(rules, platform)
    floor = 1 if unknown else 2
    if not TEMPLATE.search(name):
        return (name,) if classify.plain(name) >= floor else ()
    return tuple(sorted({f for f in _fillings(name) if classify.plain(f) >= floor}))


def names_in(before: str, suffix: str, after: str, classify: Classifier,
                glued: bool) -> tuple[str, int] | None:
    """The CUDA library name that ends with ``suffix`` (".dll"/".so"), or None.

    ``before``: the text just before the suffix; ``after``: the text after it.
    Returns (name, number of characters of ``before`` it uses).

    Plain strings (``glued`` False) are NUL/space separated: the name is the
    whole run of file-name characters and must end there. In Cython's string
    table the strings are concatenated, so every start inside the run and
    every cut of a ``.so`` version tail is tried; a family match wins over an
    unknown-CUDA one, then the longest name.
    """
    m = _STEM_END.search(before[-MAX_NAME:]) if before else None
    if m is None:
        return None
    stem = m.group()
    if suffix[1:].lower() == "so":
        so_tail = _SO_TAIL.match(after)  # matches always: every part of it is optional
        tail = so_tail.group() if so_tail is not None else ""
    else:
        tail = ""
    rest = after[len(tail):]
    if not glued:
        stem = stem.lstrip(".+-")
        if not stem or _WORD_CHAR.match(rest[:1]) or rest[:1] in ("+", "-"):
            return None
        if rest[:1] == "." and _WORD_CHAR.match(rest[1:2]):
            return None
        name = stem + suffix + tail
        if classify(name):
            return name, len(stem)
        # "%s\\cudnn64_9.dll" is cut at the backslash already; "%snvcuda.dll"
        # (a directory with its separator) is not: drop leading placeholders.
        lead = _LEAD_TEMPLATES.match(stem)
        if lead and lead.end() < len(stem):
            name = stem[lead.end():] + suffix + tail
            if classify(name):
                return name, len(stem) - lead.end()
        return None
    # glued: candidate tails, longest first; candidate starts, earliest first
    tails = [tail[:k] for k in range(len(tail), -1, -1) if k == 0 or tail[k - 1] != "."]
    # Linux library names start with "lib" (every Linux pattern of the rules
    # does); Windows names with a letter.
    if classify.platform == "linux":
        starts = [i for i in range(len(stem)) if stem.startswith("lib", i)]
    else:
        starts = [i for i in range(len(stem)) if stem[i].isalpha()]
    found_unknown = None
    for t in tails:
        for i in starts:
            name = stem[i:] + suffix + t
            level = classify(name)
            if level == 2:
                return name, len(stem) - i
            if level == 1 and found_unknown is None:
                found_unknown = (name, len(stem) - i)
    return found_unknown

