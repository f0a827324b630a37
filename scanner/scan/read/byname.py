"""CUDA libraries a binary loads *by name* (LoadLibrary / dlopen / ctypes).

Most CUDA software does not import its CUDA libraries: the CUDA runtime
loads ``nvcuda.dll`` by name, frameworks load cuDNN, cuBLAS and NVRTC with
LoadLibrary/dlopen/ctypes. Their names are strings in the binary's data::

    refs = find_library_names(buf, info, rules)   # buf: the mmap/bytes read_path read
    # (NameReference(name='cudnn64_9.dll', encoding='ascii', template=False), ...)

Where the names are looked for
------------------------------
* Only data sections: PE ``.rdata``/``.data``; ELF ``.rodata``/``.data``/
  ``.data.rel.ro`` (and the large-model ``.lrodata``/``.ldata``). Never code
  (``.text``), never fat binary sections. NVIDIA's libraries embed fat
  binaries in ``.data``/``.rdata`` too (cufft64_11.dll: 256 of its 268 MB of
  ``.data``); those containers (magic ``0xBA55ED50``, 16-byte header,
  validated) are jumped over without being read, so only the bytes around
  them are touched.
* ASCII and UTF-16LE strings ending in ``.dll`` (any case) or
  ``.so[.N...]``; the name is the run of file-name characters before that
  suffix (a path's directory part is left off). A name counts when the rules
  classify it as CUDA on the binary's platform (PE -> "windows", ELF ->
  "linux"): ``family_for`` or ``is_unknown_cuda``. So ``libnvrtc.so`` inside a
  Windows DLL's error message is not reported.
* Templates: a name with printf/format placeholders (``%d``, ``%s``, ``%u``,
  ``%02d``, ``%ld``, ``{}``, ``{0}``, ``{major}``, ``{:d}``) counts when some
  substitution of small version numbers (0-13, 100-102, 110-112, 120, 130;
  plus cuDNN sub-library words for ``%s``/``{}``) classifies as CUDA; the
  reported name is the template, ``template=True``.
* PE only: the DLL-name strings of the binary's own import, delay-import and
  export directories (MSVC merges them into ``.rdata``) are not by-name loads
  and are skipped *by file offset*; the same name elsewhere in the data
  (e.g. a LoadLibrary argument) is still reported.
* Bare stems alone (``ctypes.util.find_library("cudnn")``) are not reported;
  stems count only as parts of names assembled at run time (below).

Names assembled at run time
---------------------------
Loaders build names from a stem and a version (TSL's
``GetDsoHandle("cublas", "12")`` -> ``"lib" + name + ".so" + "." + version``;
PyTorch's ``"libnvrtc.so." + version``; cuDNN 9's ``"%s.%d"`` applied to
``"libcudnn_graph.so"``). rules/runtime/names.toml holds the templates
(``lib{stem}.so.{version}``, ``{stem}64_{version}.dll``, ...), the fragments
loaders glue around a stem (".so.", "lib", "64_", ...), the version
templates, and the loader functions; the stems come from the family table
(the literal start of each family's patterns matched against a template).
A *head* is a template's text before ``{version}`` with a stem in it:

* a head with its joining piece ("libnvrtc.so.", "cublas64_", "libcudnn")
  as a whole NUL-bounded string counts on its own;
* a bare stem ("cublas") counts only in a binary that also holds a fragment;
* "%s.%d"-style version templates turn the unversioned names the binary
  carries ("libcudnn_graph.so") into versioned ones.

Each gives a reference with encoding "assembled" and the placeholder
``{version}`` (``libcublas.so.{version}``, template=True): the graph stage
picks the expansion the tree holds. Heads ending in ".so"/".so." are seen by
the suffix regex; the other whole strings (between NULs) are searched only
in read-only data (.rodata/.rdata), only in binaries that import a loader
function (dlopen, LoadLibraryExW, ...), never in NVIDIA libraries
(``nvidia=True``; their version templates are checked with one pass when
they carry unversioned names). Stems built as immediates in code are not
searched (measured too slow: see rules/runtime/names.toml).

Cython's compressed string table
--------------------------------
Cython 3.1 keeps plain C strings. Cython 3.2 and later concatenate every
Python string constant of a module (no separators; lengths in a separate
index) into one blob and compress it when that saves bytes; the blob is a C
string literal in ``.rdata``/``.rodata`` and is inflated at import time:

* Cython 3.2.x: zlib (level 9, header ``78 DA``) by default
  (``CYTHON_COMPRESS_STRINGS=1``); bz2 (``BZh9``) with ``=2``; zstd with ``=3``
  (Python >= 3.14 only). Helper ``__Pyx_DecompressString`` carries the message
  "... cannot initialise module strings ...".
* Cython 3.3.x: its own headerless LZSS by default (``=90``; message "LZSS
  string data decompression failed"); zlib/bz2/zstd only if they are smaller
  *and* the builder sets the macro.

Only binaries that contain one of those two messages (in ``.rdata``/
``.rodata``) are searched. zlib/bz2 blobs are found by their header, inflated
with a 16 MB output cap and accepted only if the stream ends cleanly (checksum
verified) right before the literal's NUL terminator (or the section end).
An LZSS blob has no header (and no lengths: those are immediates in the
code): candidates are positions right after a NUL or on a 16-byte boundary
whose first flag byte announces three literals (a back-reference needs 3
bytes of history), decoded under the format's rules (every back-reference
must point into the output so far), and accepted when the first 64 output
bytes are (mostly) text and the output contains a Cython boilerplate name
(``cline_in_traceback``, ``__main__`` or ``__name__``). Checked against
zlib-built twins of the same modules: the LZSS output starts with exactly the
zlib table. LZSS has no end marker: decoding stops at an
invalid back-reference, 8 NUL bytes, the section end or the cap, so a few
bytes after the table may be decoded too (harmless: they are copies of the
table or of the plain strings that follow, which the plain scan sees anyway).
zstd is not decoded (Python < 3.14 has no zstd and Cython emits it only on
request). Names in the decompressed table are reported with encoding
"cython-zlib", "cython-bz2" or "cython-lzss"; as the strings are glued
together (``...driver.pyxlibcuda.so.1nvcuda.dll...`` in cupy), every start
position inside a run is tried (Linux: where "lib" starts; Windows: at a
letter) and every cut of a ``.so`` version tail; a name a family knows wins
over an unknown-CUDA one, then the longest.

Errors: a corrupt compressed blob is skipped silently (it is not a Cython
table, or not one we can read). Hostile files are bounded per binary
(:data:`MAX_HITS` suffix hits and whole strings, :data:`MAX_MARKERS`
occurrences of Cython's markers, :data:`MAX_ATTEMPTS` candidate blobs,
:data:`MAX_INFLATED_TOTAL` decompressed bytes, 16 MB per blob); going over
raises :class:`~cuda4amd.binview.MalformedBinary`. Anything unexpected also
surfaces as MalformedBinary, never another exception type.

Memory: the buffer is searched in place (regex/find over the mmap, slices of
at most a few hundred bytes around each hit); Python allocations stay
around 0.1 MB plus one decompressed table.

Speed: all names are searched at once, never a ``find`` per name; the
patterns are compiled once per scan (:class:`NamePatterns`, held by the
payload inspector). sre's fast path is a regex that starts with a literal
byte: it skips to the next such byte at about 0.35 ns a byte. The suffix
regex starts with "."; a regex that starts with a NUL (the whole strings
between NULs) tries a match at each of the NULs that make up a third of a
typical .rodata (10 to 20 ns each). So the whole strings are found by a few
regexes that each start with one *anchor* byte, chosen so that every string
holds one (``c``, ``n``, ``b``, ``.``: :func:`_anchored_passes`), each
string checked against its NULs by a lookbehind and a lookahead; the one
anchored on "." rides along with the suffix search; where NULs are few
(text) the NUL-led regexes are cheaper and are used: the plan is chosen per
binary from a 16 KB sample of its read-only data (:meth:`_WholeStrings.plan`).
Cython's markers ride along in the anchored passes; fat binary containers
are found by memchr for the magic's last byte. Measured with
``tools/byname_bench.py --against <byname.py of e42b906> --repeat 7 PATH...``
(min of 7 runs, interleaved with the previous version on a shared 2-core
machine; identical results on all 625 binaries of the wheels below,
a Windows and a Linux site-packages and fixtures/), seconds before -> after:
libllvmlite.so (llvmlite 0.50.0) 0.807 -> 0.134, libtriton.so (triton 3.9.0)
0.587 -> 0.099, libjax_common.so (jaxlib 0.12.0.1) 0.259 -> 0.046,
xla_cuda_plugin.so (jax-cuda13-pjrt 0.12.0.1) 0.236 -> 0.055,
libtorch_cpu.so (torch 2.14.1) 0.209 -> 0.042, libtorch_cuda.so 0.033 ->
0.014, libcurand.so.10 (deep) 0.084 -> 0.046; all 625: 2.87 -> 0.96.
"""
from __future__ import annotations

import bz2
import heapq
import itertools
import math
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from cuda4amd.model import BinaryInfo, NameReference, platform_of
from cuda4amd.rules.runtime import name_heads
from cuda4amd.scan.read.binview import BinView, MalformedBinary
from cuda4amd.scan.read.fatbin import Magics, check_section_size
from cuda4amd.scan.read.pages import CHUNK, Pages

__all__ = [
    "ENCODINGS",
    "NamePatterns",
    "NameReference",
    "expand_template",
    "find_library_names",
    "platform_of_info",
]

#: Values of NameReference.encoding. "assembled": the name is put together at
#: run time from a stem found in the binary (see "Names assembled at run time").
ENCODINGS = ("ascii", "utf-16le", "cython-zlib", "cython-bz2", "cython-lzss", "assembled")

#: Sections searched, per format.
PE_SECTIONS = frozenset({".rdata", ".data"})
ELF_SECTIONS = frozenset({".rodata", ".data", ".data.rel.ro", ".lrodata", ".ldata"})
#: Sections that can hold Cython's compressed string literal (and its markers).
PE_CONST_SECTIONS = frozenset({".rdata"})
ELF_CONST_SECTIONS = frozenset({".rodata", ".lrodata"})

#: Longest file name considered (characters before the suffix).
MAX_NAME = 128
#: '.dll'/'.so' occurrences examined per binary at most (real binaries have
#: hundreds; a file made of ".so.so.so" would otherwise cost minutes).
MAX_HITS = 200_000
#: Decompressed output cap per Cython blob.
MAX_INFLATE = 16 * 1024 * 1024
#: Per binary: decompression attempts (candidate blob starts) and total
#: decompressed bytes (a real module has one table of some KB).
MAX_ATTEMPTS = 100_000
MAX_INFLATED_TOTAL = 64 * 1024 * 1024
#: Occurrences of Cython's markers seen by the whole-string passes, per binary
#: (a module has one of each; each costs a Python step, a find for one did not).
MAX_MARKERS = 1000
#: Bytes between two fat binary containers worth searching (less is padding).
MIN_GAP = 16

ZLIB_MARKER = b"cannot initialise module strings"  # Cython >= 3.2, __Pyx_DecompressString
LZSS_MARKER = b"LZSS string data decompression failed"  # Cython >= 3.3
ZLIB_HEADER = b"\x78\xda"  # deflate, 32K window, level 9 (what Cython writes)
BZ2_HEADER = b"BZh9"
BZ2_BLOCK = b"1AY&SY"
CYTHON_BOILERPLATE = (b"cline_in_traceback", b"__main__", b"__name__")


def platform_of_info(info: BinaryInfo) -> str:
    """The rules platform of a binary: "windows" for PE, "linux" for ELF."""
    return platform_of(info.format)


# ---------------------------------------------------------------------------
# name syntax
# ---------------------------------------------------------------------------

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
_HIT_BODY = rb"(?:[dD][lL][lL]|so)|\x00(?:[dD]\x00[lL]\x00[lL]|s\x00o)\x00"
_HIT = re.compile(rb"\.(?:" + _HIT_BODY + rb")")
#: The bytes _HIT_BODY can start with.
_HIT_FIRST = b"dDs\x00"
_HIT_ASCII = re.compile(rb"\.(?:[dD][lL][lL]|so)")

_NUMBERS = tuple(str(n) for n in (*range(14), 100, 101, 102, 110, 111, 112, 120, 130))
_FEW_NUMBERS = ("0", "1", "2", "9", "10", "11", "12", "13", "100", "110", "120", "130")
_WORDS = ("ops", "cnn", "adv", "graph", "heuristic", "engines_precompiled",
          "engines_runtime_compiled", "ops_infer", "ops_train", "cnn_infer", "adv_infer")
#: Combinations tried per template at most.
MAX_COMBOS = 5000


class _Classifier:
    """Memoised "is this a CUDA library name?" for one platform.

    Returns 2 for a family match, 1 for an unknown-CUDA match, 0 otherwise.
    """

    def __init__(self, rules, platform: str) -> None:
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
        yield pieces[0] + "".join(v + p for v, p in zip(combo, pieces[1:]))


def expand_template(name: str, rules, platform: str, unknown: bool = False) -> tuple[str, ...]:
    """The concrete CUDA library names a reported name may stand for, sorted.

    For a template: every substitution (values as in the module docstring)
    that a rules family claims, e.g. ``nvrtc64_%d_0.dll`` -> nvrtc64_100_0.dll
    ... nvrtc64_130_0.dll; with ``unknown=True`` also those only the
    unknown-CUDA patterns match (broad: nvrtc64_9_0.dll ...). For a plain
    name: the name itself if it is CUDA (family, or unknown with ``unknown``).
    """
    classify = _Classifier(rules, platform)
    floor = 1 if unknown else 2
    if not TEMPLATE.search(name):
        return (name,) if classify.plain(name) >= floor else ()
    return tuple(sorted({f for f in _fillings(name) if classify.plain(f) >= floor}))


def _names_in(before: str, suffix: str, after: str, classify: _Classifier,
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


# ---------------------------------------------------------------------------
# the search patterns: one compiled regex per platform for everything
# ---------------------------------------------------------------------------

def _trie_regex(words: Iterable[bytes]) -> bytes:
    """An alternation of ``words`` factored into a trie, so the regex engine
    decides each position on one byte at a time instead of trying every
    word."""
    trie: dict = {}
    for word in words:
        node = trie
        for byte in word:
            node = node.setdefault(byte, {})
        node[None] = {}

    def build(node: dict) -> bytes:
        ends = None in node
        branches = [re.escape(bytes([b])) + build(child) for b, child in sorted(
            ((b, c) for b, c in node.items() if b is not None))]
        if not branches:
            return b""
        body = branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"
        if ends:
            return b"(?:" + body + b")?"
        return body

    return build(trie)


#: One whole-string pass: its regex, and per capturing group how many bytes
#: before the group the string starts and its bytes per character (1: ASCII,
#: 2: UTF-16LE). The last group that matched says which string it is.
_Pass = tuple["re.Pattern[bytes]", tuple[tuple[int, int], ...]]

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


def _trie_group(strings: list[bytes]) -> bytes:
    return b"(" + _trie_regex(strings) + b")"


def _nul_passes(ascii_words: list[bytes], wide_words: list[bytes]) -> tuple[_Pass, ...]:
    """The NUL-led plan: one regex per encoding, each string between NULs
    (the way the search was first written; cheap where NULs are few)."""
    passes: list[_Pass] = []
    if ascii_words:
        regex = re.compile(b"\x00" + _trie_group(ascii_words) + b"(?=\x00)", re.DOTALL)
        passes.append((regex, ((0, 1),)))
    if wide_words:
        regex = re.compile(b"\x00\x00" + _trie_group([_wide(w) for w in wide_words]) + b"(?=\x00\x00)",
                           re.DOTALL)
        passes.append((regex, ((0, 2),)))
    return tuple(passes)


def _anchored_passes(ascii_words: list[bytes], wide_words: list[bytes],
                     anchors: tuple[int, ...], markers: Iterable[bytes] = ()) -> tuple[_Pass, ...]:
    """The anchored plan: one regex per anchor byte (every string contains
    one of ``anchors``), for the strings whose first anchor byte it is.

    Each regex starts with its anchor as a literal: sre then skips to the
    next anchor byte in a tight loop instead of starting a match at every
    NUL. After the anchor, a trie of what follows it in the strings; each
    string ends in a lookbehind for the whole string with the NUL(s) before
    it, a lookahead for the NUL(s) after and an empty group that names it.
    A string is looked for only at its first anchor byte, so each occurrence
    matches once (strings between NULs never overlap). A lookbehind may look
    before the searched range: the caller checks where the string starts.

    ``markers`` (each with an anchor byte): text looked for anywhere, not
    between NULs, reported with 0 bytes per character. They hold no NUL, so
    they never overlap a string between NULs."""
    if wide_words and any(len(w) < 2 for w in ascii_words):
        # a one-byte string between NULs also sits inside UTF-16 text: its own passes, or
        # one match would hide the other
        return _anchored_passes(ascii_words, [], anchors, markers) + _anchored_passes([], wide_words, anchors)
    grouped: dict[int, list[tuple[bytes, bytes, int]]] = {}
    for word, width in sorted({(w, 1) for w in ascii_words} | {(w, 2) for w in wide_words}
                              | {(m, 0) for m in markers}):
        k = min(word.index(a) for a in anchors if a in word)
        grouped.setdefault(word[k], []).append((word, word[k + 1:], width))
    passes: list[_Pass] = []
    for anchor in sorted(grouped):
        leaves = []
        for word, rest, width in grouped[anchor]:
            if width == 0:
                leaf = b"(?<=" + re.escape(word) + b")()"
                leaves.append((rest, leaf, (len(word), width)))
                continue
            if width == 1:
                behind, ahead = b"\x00" + word, b"\x00"
            else:  # the rest starts with the anchor's high byte
                behind, ahead = b"\x00\x00" + _wide(word), b"\x00\x00"
                rest = b"\x00" + _wide(rest)
            leaf = b"(?<=" + re.escape(behind) + b")(?=" + re.escape(ahead) + b")()"
            leaves.append((rest, leaf, (width * len(word), width)))
        body, branches = _leaf_trie(leaves)
        passes.append((re.compile(re.escape(bytes([anchor])) + body, re.DOTALL), branches))
    return tuple(passes)


def _leaf_trie(entries: list[tuple[bytes, bytes, tuple[int, int]]]) -> tuple[bytes, tuple[tuple[int, int], ...]]:
    """A trie of the ``(text, leaf, branch)`` entries' texts, each ending in
    its leaf pattern (one capturing group); returns it and the branches in
    the order of their groups. Alternatives start with their literal byte
    where they can (sre rejects those without entering them); leaves last."""
    trie: dict = {}
    for text, leaf, branch in entries:
        node = trie
        for byte in text:
            node = node.setdefault(byte, {})
        node.setdefault(None, []).append((leaf, branch))
    branches: list[tuple[int, int]] = []

    def build(node: dict) -> bytes:
        alternatives = [re.escape(bytes([b])) + build(child) for b, child in sorted(
            ((b, c) for b, c in node.items() if b is not None))]
        for leaf, branch in node.get(None, []):
            alternatives.append(leaf)
            branches.append(branch)
        return alternatives[0] if len(alternatives) == 1 else b"(?:" + b"|".join(alternatives) + b")"

    return build(trie), tuple(branches)


def _wide(text: bytes) -> bytes:
    return text.decode("latin-1").encode("utf-16-le")


def _cover(words: Iterable[bytes], cost: dict[int, float] | None = None) -> tuple[int, ...]:
    """Anchor bytes such that every word contains one, sorted: greedy, the
    byte with the least cost per word not yet covered first (without
    ``cost``: the byte most words contain; ties to the lower byte); then
    each byte that the others make redundant is dropped."""
    left = {w for w in words if w}  # the rules refuse empty strings
    chosen: list[int] = []
    while left:
        counts: dict[int, int] = {}
        for word in left:
            for byte in set(word):
                counts[byte] = counts.get(byte, 0) + 1
        best = min(counts, key=lambda b: ((cost[b] if cost else 1.0) / counts[b], b))
        chosen.append(best)
        left = {w for w in left if best not in w}
    everything = {w for w in words if w}
    for byte in sorted(chosen, key=lambda b: -(cost[b] if cost else 0.0)):
        rest = [a for a in chosen if a != byte]
        if all(any(a in w for a in rest) for w in everything):
            chosen = rest
    return tuple(sorted(chosen))


_DOT = ord(".")


@dataclass
class _WholeStrings:
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
    nul_passes: tuple[_Pass, ...] | None = None
    default: tuple[int, ...] = ()
    #: cover -> (its passes, whether they look for the markers)
    plans: dict[tuple[int, ...], tuple[tuple[_Pass, ...], bool]] = field(default_factory=dict)
    #: a pass anchored on "." -> it merged with the suffix search
    joined: dict["re.Pattern[bytes]", _Pass] = field(default_factory=dict)
    #: the bytes the strings are made of, and NUL
    used: list[int] = field(default_factory=list)
    #: (dot_free, the sample's quantised frequencies of ``used``) -> the cover chosen
    covers: dict[tuple, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # the plans are compiled when a binary first needs them: compiling them all took 25-40 ms of
        # every worker process, most of whose binaries (NVIDIA's, those that load no library by name)
        # have no whole-string search at all
        self.default = _cover([*self.ascii_words, *self.wide_words])

    def nul(self) -> tuple[_Pass, ...]:
        if self.nul_passes is None:
            self.nul_passes = _nul_passes(self.ascii_words, self.wide_words)
        return self.nul_passes

    def anchored(self, cover: tuple[int, ...]) -> tuple[tuple[_Pass, ...], bool]:
        if cover not in self.plans:
            marked = bool(self.ascii_words or self.wide_words) and all(
                any(a in m for a in cover) for m in self.markers)
            passes = _anchored_passes(self.ascii_words, self.wide_words, cover, self.markers if marked else [])
            self.plans[cover] = passes, marked
        return self.plans[cover]

    def merged(self, dot: _Pass) -> _Pass:
        """The suffix search and the anchored pass ``dot`` (anchor ".") as one
        regex: each match takes the "." alone, so the suffix hits are those of
        :data:`_HIT` (none holds a second "."); group 1 is the suffix after the
        ".", the later groups are ``dot``'s twice over (with and without one)."""
        if dot[0] not in self.joined:
            body = dot[0].pattern[len(re.escape(b".")):]
            # the bytes that can follow the "." of a match: checked first, most "." fail there
            # without entering the two lookaheads (measured: then as fast as the suffix search alone)
            followers = set(_HIT_FIRST)
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
            regex = re.compile(lead + rb"(?:(?=(" + _HIT_BODY + rb"))(?:(?=" + body + rb")|)|(?=" + body + rb"))",
                               re.DOTALL)
            self.joined[dot[0]] = regex, dot[1]
        return self.joined[dot[0]]

    def plan(self, buf, segments: list[tuple[int, int]],
             dot_free: bool = False) -> tuple[tuple[_Pass, ...], bool]:
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
            cover = _cover([*self.ascii_words, *self.wide_words], cost)
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


def _windows(buf, segments: list[tuple[int, int]], total: int) -> Iterator[bytes]:
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
class _PlatformPatterns:
    #: heads, fragments and version templates as whole strings, and their plans
    whole: _WholeStrings
    #: ASCII whole string -> (is a head, "fragment" / "versioner" / "")
    words: dict[str, tuple[bool, str]]
    #: the version templates alone as whole strings
    versioning: tuple[_Pass, ...]
    #: head -> (names it assembles, strong)
    heads: dict[str, tuple[frozenset[str], bool]]
    #: what a versioner template appends to a base name ("" when the platform has none)
    appends: str = ""


class NamePatterns:
    """The compiled search patterns for one RuleSet, built once per scan and
    shared by every binary (per platform, on first use)."""

    def __init__(self, rules, name_rules=None) -> None:
        self.rules = rules
        #: the run-time name rules of every rules folder (RuleSet.names), unless given
        self.name_rules = name_rules if name_rules is not None else rules.names
        self._built: dict[tuple[str, bool], _PlatformPatterns] = {}

    def for_platform(self, platform: str, utf16: bool) -> _PlatformPatterns:
        key = (platform, utf16)
        if key not in self._built:
            self._built[key] = self._build(platform, utf16)
        return self._built[key]

    def _build(self, platform: str, utf16: bool) -> _PlatformPatterns:
        classify = _Classifier(self.rules, platform)
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
        return _PlatformPatterns(_WholeStrings(ascii_words, wide_words), words,
                                 _anchored_passes(versioners, [], _cover(versioners)), heads, appends)


# ---------------------------------------------------------------------------
# ranges
# ---------------------------------------------------------------------------

def _ranges(info: BinaryInfo, wanted: frozenset[str], size: int) -> list[tuple[int, int]]:
    """Merged file ranges [lo, hi) of the sections named in ``wanted``."""
    spans = []
    for s in info.sections:
        if s.name in wanted and s.file_size > 0 and 0 <= s.file_offset < size:
            spans.append((s.file_offset, min(size, s.file_offset + s.file_size)))
            check_section_size(s.name, *spans[-1])  # merged ranges never exceed the file; one claim may
    spans.sort()
    merged: list[list[int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def _segments(buf, lo: int, hi: int, magics: Magics | None = None) -> Iterator[tuple[int, int]]:
    """[lo, hi) minus the fat binary containers in it (not read, just skipped)."""
    pos = search = lo
    magics = magics or Magics(buf)
    while search < hi:
        m = magics.next(search, hi)
        if m < 0:
            break
        if m + 16 <= hi:
            _ver, hsize, rest = struct.unpack_from("<HHQ", buf, m + 4)
            if hsize == 16 and 0 < rest <= hi - m - 16:
                if m - pos >= MIN_GAP:  # padding between containers holds no name
                    yield pos, m
                pos = search = m + 16 + rest
                continue
        search = m + 4
    if pos < hi:
        yield pos, hi


def _pe_directory_names(buf) -> set[int]:
    """File offsets of the DLL-name strings of the import, delay-import and
    export directories (they are not by-name loads). Best effort: a broken
    directory just gives fewer offsets (the readers report such damage)."""
    from cuda4amd.scan.read.pe import DIR_DELAY_IMPORT, DIR_EXPORT, DIR_IMPORT, MAX_DESCRIPTORS, PEImage

    out: set[int] = set()
    try:
        img = PEImage(BinView(buf))
        v = img.v
        rva, _ = img.dir(DIR_IMPORT)
        if rva:
            off = img.rva_to_offset(rva, "import directory")
            for i in range(MAX_DESCRIPTORS):
                _ilt, _ts, _fwd, name, iat = v.unpack("IIIII", off + 20 * i)
                if name == 0 or iat == 0:
                    break
                out.add(img.rva_to_offset(name, "imported DLL name"))
        rva, _ = img.dir(DIR_DELAY_IMPORT)
        if rva:
            off = img.rva_to_offset(rva, "delay-import directory")
            for i in range(MAX_DESCRIPTORS):
                attrs, name = v.unpack("II", off + 32 * i)
                if name == 0:
                    break
                base = 0 if attrs & 1 else img.image_base
                out.add(img.rva_to_offset(name - base, "delay-imported DLL name"))
        rva, _ = img.dir(DIR_EXPORT)
        if rva:
            off = img.rva_to_offset(rva, "export directory")
            (name,) = v.unpack("I", off + 12)
            if name:
                out.add(img.rva_to_offset(name, "exported DLL name"))
    except MalformedBinary:
        pass
    return out


# ---------------------------------------------------------------------------
# plain strings
# ---------------------------------------------------------------------------

def _utf16_text(raw: bytes) -> str:
    """UTF-16LE bytes as text, every non-ASCII unit as a separator."""
    chars = raw[0::2]
    highs = raw[1::2]
    if highs.count(0) != len(highs):
        chars = bytes(c if h == 0 else 0 for c, h in zip(chars, highs))
    return chars.decode("latin-1")


class _Budget:
    """Work limits for one binary; exceeding one means a hostile file and
    raises MalformedBinary (a real binary stays far below each)."""

    __slots__ = ("hits", "attempts", "inflated", "markers")

    def __init__(self) -> None:
        self.hits = MAX_HITS
        self.attempts = MAX_ATTEMPTS
        self.inflated = MAX_INFLATED_TOTAL
        self.markers = MAX_MARKERS

    def marker(self) -> None:
        self.markers -= 1
        if self.markers < 0:
            raise MalformedBinary(
                f"more than {MAX_MARKERS} copies of Cython's string-table markers (hostile file?)")

    def hit(self) -> None:
        self.hits -= 1
        if self.hits < 0:
            raise MalformedBinary(
                f"more than {MAX_HITS} '.dll'/'.so' strings in the data sections (hostile file?)")

    def attempt(self) -> None:
        self.attempts -= 1
        if self.attempts < 0:
            raise MalformedBinary(
                f"more than {MAX_ATTEMPTS} candidate compressed string tables (hostile file?)")

    def inflate(self, nbytes: int) -> None:
        self.inflated -= nbytes
        if self.inflated < 0:
            raise MalformedBinary(
                f"compressed string tables inflate to more than {MAX_INFLATED_TOTAL >> 20} MB (hostile file?)")


def _suffix_hit(buf, lo: int, hi: int, p: int, q: int, classify: _Classifier, skip: set[int],
                found: set[NameReference], heads: dict | None = None, seen: "_Seen | None" = None) -> None:
    """A '.dll'/'.so' occurrence (ASCII or UTF-16LE) at [p, q): the name that
    ends there. With ``heads``: a whole string that is the head of an
    assembled name ("libnvrtc.so." + version) is recorded in ``seen``."""
    if q - p <= 4:  # ".dll" / ".so"
        before = buf[max(lo, p - MAX_NAME):p].decode("latin-1")
        after = buf[q:min(hi, q + 48)].decode("latin-1")
        suffix = buf[p:q].decode("latin-1")
        if heads and seen is not None and after[:2] == ".\0" and _head_at(before, suffix, after, heads, seen):
            return  # "libnvrtc.so." is the start of a name, not the unversioned name
        hit = _names_in(before, suffix, after, classify, glued=False)
        if hit is None:
            if heads and seen is not None:
                _head_at(before, suffix, after, heads, seen)
            return
        name, used = hit
        if p - used in skip:
            return
        found.add(NameReference(name, "ascii", bool(TEMPLATE.search(name))))
    else:
        k = min(MAX_NAME, (p - lo) // 2)
        before = _utf16_text(buf[p - 2 * k:p])
        end = min(hi, q + 96)
        after = _utf16_text(buf[q:end - (end - q) % 2])
        suffix = _utf16_text(buf[p:q])
        hit = _names_in(before, suffix, after, classify, glued=False)
        if hit is not None:
            name = hit[0]
            found.add(NameReference(name, "utf-16le", bool(TEMPLATE.search(name))))


def _head_at(before: str, suffix: str, after: str, heads: dict, seen: "_Seen") -> bool:
    """``before + suffix`` (+ ".") as a whole NUL-bounded string that is a
    head: recorded in ``seen``; returns whether it was one."""
    start = before.rfind("\0") + 1
    if start == 0 and len(before) >= MAX_NAME:
        return False
    text = before[start:] + suffix
    if after[:1] == "." and after[1:2] == "\0":
        text += "."
    elif after[:1] != "\0":
        return False
    if text in heads:
        seen.heads.add(text)
        return True
    return False


@dataclass
class _Seen:
    """What one pass over a binary's data found besides whole names."""

    heads: set[str]
    fragments: int = 0
    versioners: int = 0
    #: Cython's markers the whole-string passes saw
    markers: set[bytes] = field(default_factory=set)


#: A segment longer than 2 * CHUNK is searched in pieces, cut in the middle of a run of
#: this many NULs, and a pass hands each piece's pages back once it has read them (the
#: next pass maps them again: :func:`_pieces`). No string, suffix or marker a pass looks for holds more than three
#: NULs in a row (UTF-16LE's two-byte terminator after a character's zero high byte), so
#: no match crosses a cut, and a name's text is bounded by the NULs on both sides of it:
#: each piece gives what the segment gave there (tests/test_byname_pieces.py).
_CUT = b"\0" * 8


def _pieces(buf, segments: Iterable[tuple[int, int]], pages: Pages) -> Iterator[tuple[int, int]]:
    """The segments, each cut into pieces of about CHUNK bytes where it is longer (at
    runs of NULs: _CUT); the pages of a piece are handed back once it is searched."""
    for a, b in segments:
        while b - a > 2 * CHUNK:
            run = buf.find(_CUT, a + CHUNK, b - CHUNK)
            if run < 0:
                break
            cut = run + len(_CUT) // 2
            yield a, cut
            pages.release(a, cut)
            a = cut
        yield a, b
        if b - a > CHUNK:
            pages.release(a, b)


def _scan_data(buf, segments: Iterable[tuple[int, int]], patterns: "_PlatformPatterns", classify: _Classifier,
               skip: set[int], found: set[NameReference], seen: _Seen, budget: _Budget,
               merged: _Pass | None = None) -> None:
    """The data between fat binary containers: one regex (ASCII and
    UTF-16LE at once) for names ending in .dll/.so, as before; heads that end
    in ".so"/".so." ("libnvrtc.so." + version) are recognised on the way.

    The other whole strings (bare stems, "cublas64_", fragments) are
    :func:`_scan_whole`'s: it runs only over read-only data and only in
    binaries that load libraries themselves. Where these segments are also
    read-only data, ``merged`` (:meth:`_WholeStrings.merged`) finds the
    suffixes and the whole strings whose anchor is "." in one pass."""
    if merged is None:
        for a, b in segments:
            for m in _HIT.finditer(buf, a, b):
                budget.hit()
                _suffix_hit(buf, a, b, m.start(), m.end(), classify, skip, found, patterns.heads, seen)
        return
    regex, branches = merged
    for a, b in segments:
        for m in regex.finditer(buf, a, b):
            if m.start(1) >= 0:
                budget.hit()
                _suffix_hit(buf, a, b, m.start(), m.end(1), classify, skip, found, patterns.heads, seen)
            group = m.lastindex or 0
            if group > 1:
                offset, width = branches[(group - 2) % len(branches)]
                start = m.start(group) - offset
                if start >= a:
                    _record(buf, start, m.end(group), width, patterns.words, seen, budget)


def _whole_matches(buf, lo: int, hi: int, passes: tuple[_Pass, ...], first: int) -> Iterator[tuple[int, int, int]]:
    """(start, end, bytes per character) of the passes' strings in [lo, hi)
    that start at ``first`` or later (their NULs before may lie before lo;
    the NULs after lie before hi)."""
    for regex, branches in passes:
        for m in regex.finditer(buf, lo, hi):
            group = m.lastindex or 0
            offset, width = branches[group - 1]
            start = m.start(group) - offset
            if start >= first:
                yield start, m.end(group), width


def _scan_whole(buf, segments: Iterable[tuple[int, int]], patterns: "_PlatformPatterns",
                passes: tuple[_Pass, ...], seen: _Seen, budget: _Budget) -> None:
    """Stems, heads, fragments and version templates as whole strings in the
    segments (read-only data, fat binary containers skipped). A string may
    start right at a segment's start: its NUL (two for UTF-16) is the byte
    before (a string at the very start of a section follows the previous
    section's padding); it must end before the segment's end."""
    for a, b in segments:
        for start, end, width in _whole_matches(buf, max(0, a - 2), b, passes, a):
            _record(buf, start, end, width, patterns.words, seen, budget)


def _record(buf, start: int, end: int, width: int, words: dict[str, tuple[bool, str]], seen: _Seen,
            budget: _Budget) -> None:
    """What the whole string (or marker: ``width`` 0) at [start, end) means."""
    if width == 0:
        budget.marker()
        seen.markers.add(buf[start:end])
        return
    if width == 2:
        budget.hit()
        seen.heads.add(buf[start:end].decode("utf-16-le"))
        return
    word = buf[start:end].decode("latin-1")
    head, glue = words[word]
    if head:  # as many hits as the three separate regexes once counted
        budget.hit()
        seen.heads.add(word)
    if glue:
        budget.hit()
        if glue == "versioner":
            seen.versioners += 1
        else:
            seen.fragments += 1


def _marker_in(buf, marker: bytes, ranges: list[tuple[int, int]],
               segments: dict[tuple[int, int], list[tuple[int, int]]], seen: _Seen) -> bool:
    """Whether ``marker`` occurs in the ranges (as ``buf.find(marker, lo, hi)``),
    the passes having looked inside the segments: the rest is what an
    occurrence off the segments (in or across a container or the padding
    between two) can touch."""
    if marker in seen.markers:
        return True
    reach = len(marker) - 1
    for lo, hi in ranges:
        edge = lo
        for a, b in [*segments[(lo, hi)], (hi, hi)]:
            if a > edge and buf.find(marker, max(lo, edge - reach), min(hi, a + reach)) >= 0:
                return True
            edge = b
    return False


def _holds_whole(buf, ranges: Iterable[tuple[int, int]], passes: tuple[_Pass, ...]) -> bool:
    """Whether some range holds one of the passes' strings whole, its NULs
    inside the range (as ``buf.find(b"\\0" + string + b"\\0", lo, hi)``)."""
    return any(next(_whole_matches(buf, lo, hi, passes, lo + 1), None) for lo, hi in ranges)


def _scan_table(data: bytes, encoding: str, classify: _Classifier,
                found: set[NameReference]) -> None:
    """Names in a decompressed Cython string table (strings glued together)."""
    for m in _HIT_ASCII.finditer(data):
        p, q = m.start(), m.end()
        before = data[max(0, p - MAX_NAME):p].decode("latin-1")
        after = data[q:q + 48].decode("latin-1")
        hit = _names_in(before, m.group().decode("latin-1"), after, classify, glued=True)
        if hit is not None:
            found.add(NameReference(hit[0], encoding, bool(TEMPLATE.search(hit[0]))))


# ---------------------------------------------------------------------------
# Cython compressed string tables
# ---------------------------------------------------------------------------

def _inflate(buf, start: int, hi: int, make) -> tuple[bytes, int] | None:
    """Decompress the stream at ``start`` (zlib or bz2 decompressor from
    ``make()``), reading at most up to ``hi``. Returns (output, end offset)
    if it ends cleanly before a NUL (or at ``hi``), else None."""
    d = make()
    out = []
    produced = 0
    pos = start
    chunk = 512
    try:
        while pos < hi:
            piece = buf[pos:min(hi, pos + chunk)]
            pos += len(piece)
            chunk = min(chunk * 4, 1 << 20)
            data = d.decompress(piece, MAX_INFLATE + 1 - produced)
            produced += len(data)
            out.append(data)
            if produced > MAX_INFLATE:
                return None
            if d.eof:
                end = pos - len(d.unused_data)
                if end < hi and buf[end] != 0:
                    return None
                return b"".join(out), end
            if isinstance(d, bz2.BZ2Decompressor):
                if not d.needs_input:
                    return None  # output cap reached
            elif d.unconsumed_tail:
                return None  # output cap reached
    except (zlib.error, OSError, EOFError, ValueError):
        return None
    return None


def _lzss(buf, start: int, hi: int) -> tuple[bytes, int]:
    """Decode Cython 3.3's LZSS from ``start`` until the stream stops making
    sense (see the module docstring). Returns (output, end offset).

    Format (Cython/Utility/StringTools.c, __pyx_lzss_decompress): a flag
    byte, then 8 tokens, low bit first: 1 = one literal byte; 0 = a
    back-reference ``lo, hi[, len]``: lo < 0x80: distance lo, length hi;
    hi < 0x80: distance 0x80 + (hi & 0x60) << 2 | lo & 0x7F, length hi & 0x1F;
    else distance 0x80 + (hi & 0x7F) << 7 | lo & 0x7F and a length byte.
    Length += 3; the copy ends ``distance`` bytes before the output's end.
    """
    out = bytearray()
    pos = start
    limit = hi - 3
    eight_nuls = b"\0" * 8
    while pos < limit:
        flags = buf[pos]
        if flags == 0xFF:  # eight literals
            out += buf[pos + 1:pos + 9]
            pos += 9
            if len(out) > MAX_INFLATE:
                break
            continue
        if flags == 0 and buf[pos:pos + 8] == eight_nuls:
            break
        pos += 1
        flags |= 0xFF00
        while flags & 0x100:
            if pos >= limit:
                return bytes(out), pos
            if flags & 1:
                out.append(buf[pos])
                pos += 1
            else:
                lo = buf[pos]
                hi_ = buf[pos + 1]
                if not lo & 0x80:
                    back, length = lo, hi_
                    pos += 2
                elif not hi_ & 0x80:
                    back = 0x80 + (((hi_ << 2) & 0x180) | (lo & 0x7F))
                    length = hi_ & 0x1F
                    pos += 2
                else:
                    back = 0x80 + ((hi_ & 0x7F) << 7 | (lo & 0x7F))
                    length = buf[pos + 2]
                    pos += 3
                length += 3
                ref = len(out) - back - length
                if ref < 0:
                    return bytes(out), pos
                out += out[ref:ref + length]
            flags >>= 1
        if len(out) > MAX_INFLATE:
            break
    return bytes(out), pos


def _texty(data: bytes) -> bool:
    """Mostly printable text (the table starts with str constants)."""
    if not data:
        return False
    bad = sum(1 for b in data if b < 0x20 and b not in (9, 10, 13) or b == 0x7F)
    return bad * 8 <= len(data)


#: Flag bytes whose three low bits are set (the first three tokens are literals).
_FLAGS_OK = bytes(1 if b & 7 == 7 else 0 for b in range(256))
#: Such a flag byte right after a NUL (group 1: where a blob may start).
_AFTER_NUL = re.compile(b"\\x00([" + b"".join(b"\\x%02x" % b for b in range(256) if b & 7 == 7) + b"])")


def _lzss_candidates(buf, lo: int, hi: int) -> Iterator[int]:
    """Where an LZSS blob may start, in file order: right after a NUL (the
    literal before it ended there, or alignment padding), or at a 16-byte
    boundary (MSVC and GCC align large arrays), with a flag byte announcing
    three literals (the table may start with control characters: no more
    can be asked of the first bytes). A start needs 4 bytes before ``hi``;
    one right after a NUL must start before ``hi - 4``.

    Both kinds are found by C-level searches (a regex for the first, a
    strided slice for the second) and merged: a Python step per NUL byte
    was a third of the LZSS search (docs/performance.md)."""
    aligned = lo + (-lo % 16)
    flags = buf[aligned:hi:16].translate(_FLAGS_OK)
    # an aligned start at hi - 4 right after a NUL is one the NUL rule leaves out
    last = hi - 4 if hi - 5 < lo or buf[hi - 5] != 0 else hi - 5
    boundaries = itertools.takewhile(lambda i: i <= last, (aligned + 16 * k for k in _ones(flags)))
    after_nul = (match.start(1) for match in _AFTER_NUL.finditer(buf, lo, hi - 4))
    previous = -1
    for start in heapq.merge(boundaries, after_nul):
        if start != previous:
            yield start
            previous = start


def _ones(flags: bytes) -> Iterator[int]:
    k = flags.find(1)
    while k >= 0:
        yield k
        k = flags.find(1, k + 1)


#: Per flag byte: how many literal tokens come before its first back-reference (8: none).
_LITERALS_FIRST = bytes(8 if b == 0xFF else ((b + 1) & ~b).bit_length() - 1 for b in range(256))


def _ends_young(buf, start: int, hi: int) -> bool:
    """Whether the LZSS decode from ``start`` surely stops before 16 bytes of
    output, told from its first back-reference: after ``t`` literals (the flag
    byte's low one bits) it copies from ``t`` bytes of output, which only a
    short-form reference (first byte below 0x80: distance lo, length hi + 3)
    of lo + hi <= t - 3 can; any other ends the decode there (_lzss: a copy
    from before the output's start). Nearly every candidate ends so, and this
    is a few byte reads instead of a decode."""
    t = _LITERALS_FIRST[buf[start]]
    at = start + 1 + t
    if t == 8 or at + 1 >= hi:
        return False
    lo = buf[at]
    return lo >= 0x80 or lo + buf[at + 1] > t - 3


def _lzss_tables(buf, lo: int, hi: int, budget: _Budget) -> Iterator[bytes]:
    skip_to = lo
    for start in _lzss_candidates(buf, lo, hi):
        if start < skip_to:
            continue
        # The first 64 bytes of output: the format's rules and text.
        budget.attempt()
        if _ends_young(buf, start, hi):
            continue
        head, _ = _lzss(buf, start, min(hi, start + 80))
        if len(head) < 16 or not _texty(head[:64]):
            continue
        data, end = _lzss(buf, start, hi)
        budget.inflate(len(data))
        if any(word in data for word in CYTHON_BOILERPLATE):
            yield data
            skip_to = end


def _cython_markers(buf, ranges: list[tuple[int, int]], pages: Pages) -> tuple[bool, bool]:
    """Whether the ranges hold Cython's zlib and LZSS markers: both looked for in
    one pass over the pieces, each piece searched for both while its pages are
    mapped, until both are found."""
    zlib_ok = lzss_ok = False
    for lo, hi in _pieces(buf, ranges, pages):
        zlib_ok = zlib_ok or buf.find(ZLIB_MARKER, lo, hi) >= 0
        lzss_ok = lzss_ok or buf.find(LZSS_MARKER, lo, hi) >= 0
        if zlib_ok and lzss_ok:
            break
    return zlib_ok, lzss_ok


def _cython_tables(buf, ranges: list[tuple[int, int]],
                   budget: _Budget | None = None,
                   markers: tuple[bool, bool] | None = None,
                   pages: Pages | None = None) -> Iterator[tuple[str, bytes]]:
    """(encoding, decompressed table) of every Cython string blob found.
    ``markers``: (zlib, lzss) marker seen, when the caller's pass looked; else the
    ranges are searched for them in pieces (neither holds a NUL: none crosses a cut)."""
    budget = budget or _Budget()
    if markers is None:
        zlib_ok, lzss_ok = _cython_markers(buf, ranges, pages or Pages(buf))
    else:
        zlib_ok, lzss_ok = markers
    if zlib_ok:
        for lo, hi in ranges:
            for header, make, encoding, check in (
                (ZLIB_HEADER, zlib.decompressobj, "cython-zlib", None),
                (BZ2_HEADER, bz2.BZ2Decompressor, "cython-bz2", BZ2_BLOCK),
            ):
                i = buf.find(header, lo, hi)
                while i >= 0:
                    nxt = i + 1
                    if check is None or buf[i + 4:i + 4 + len(check)] == check:
                        budget.attempt()
                        got = _inflate(buf, i, hi, make)
                        if got is not None:
                            budget.inflate(len(got[0]))
                            yield encoding, got[0]
                            nxt = max(nxt, got[1])
                    i = buf.find(header, nxt, hi)
    if lzss_ok:
        for lo, hi in ranges:
            for data in _lzss_tables(buf, lo, hi, budget):
                yield "cython-lzss", data


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------

def find_library_names(buf, info: BinaryInfo, rules, patterns: "NamePatterns | None" = None, nvidia: bool = False,
                       magics: Magics | None = None) -> tuple[NameReference, ...]:
    """CUDA library names (and name templates) in the data of one binary.

    ``buf`` is the binary's bytes (``bytes``/``bytearray``/``mmap``, as
    :func:`cuda4amd.readers.read_path` maps it), ``info`` what a reader
    produced from it, ``rules`` a :class:`~cuda4amd.rules.RuleSet`;
    ``patterns`` the compiled search patterns for these rules (built once per
    scan by the caller; built here when absent). Returns the references
    sorted, unique by (name, encoding). ``nvidia``: the binary is an NVIDIA
    library (no stem search: they load their own sub-libraries by complete
    names). ``magics``: where the fat binary magic occurs, shared with the
    kernel search of the same buffer. Raises only :class:`MalformedBinary`
    (or OSError from the mapping itself).
    """
    if isinstance(buf, memoryview):
        buf = buf.tobytes()
        magics = None  # its offsets are the same, but it searches the view
    try:
        return _find(buf, info, rules, patterns or NamePatterns(rules), nvidia, magics)
    except (MalformedBinary, OSError):
        raise
    except MemoryError:
        raise MalformedBinary("searching the binary's strings needs more memory than is available") from None
    except Exception as exc:  # noqa: BLE001 - the contract: one exception type for bad input
        raise MalformedBinary(f"cannot search the binary's strings ({type(exc).__name__}: {exc})") from exc


def loads_libraries(info: BinaryInfo, functions: frozenset[str]) -> bool:
    """Whether the binary imports a function that loads a library by name
    (dlopen, LoadLibraryExW, ...): only such a binary assembles names it
    loads itself."""
    if info.format == "PE":
        return any(not functions.isdisjoint(i.symbols) for i in info.imports)
    return not functions.isdisjoint(info.undefined_symbols)


def _find(buf, info: BinaryInfo, rules, patterns: NamePatterns, nvidia: bool = False,
          magics: Magics | None = None) -> tuple[NameReference, ...]:
    size = len(buf)
    platform = platform_of_info(info)
    classify = _Classifier(rules, platform)
    mine = patterns.for_platform(platform, utf16=info.format == "PE")
    pe = info.format == "PE"
    skip = _pe_directory_names(buf) if pe else set()
    found: set[NameReference] = set()
    budget = _Budget()
    seen = _Seen(set())
    whole = not nvidia and loads_libraries(info, patterns.name_rules.loader_functions)
    data = _ranges(info, PE_SECTIONS if pe else ELF_SECTIONS, size)
    const = _ranges(info, PE_CONST_SECTIONS if pe else ELF_CONST_SECTIONS, size)
    pages = Pages(buf)
    magics = magics or Magics(buf, pages)
    segments = {(lo, hi): list(_segments(buf, lo, hi, magics)) for lo, hi in {*data, *(const if whole else ())}}
    merged: dict[tuple[int, int], _Pass] = {}
    markers = None
    if whole:  # string literals (stems, heads) live in the read-only data: the whole-string search stays there
        read_only = [segment for r in const for segment in segments[r]]
        dot_free = set(const) <= set(data)  # the same ranges: the suffix search covers the read-only data
        passes, marked = mine.whole.plan(buf, read_only, dot_free)
        dots = [p for p in passes if p[0].pattern.startswith(re.escape(b"."))]
        if dot_free and len(dots) == 1:
            merged = dict.fromkeys(const, mine.whole.merged(dots[0]))
            passes = tuple(p for p in passes if p is not dots[0])
        for r in const:
            _scan_whole(buf, _pieces(buf, segments[r], pages), mine, passes, seen, budget)
        if marked:
            markers = (_marker_in(buf, ZLIB_MARKER, const, segments, seen),
                       _marker_in(buf, LZSS_MARKER, const, segments, seen))
    for r in data:
        _scan_data(buf, _pieces(buf, segments[r], pages), mine, classify, skip, found, seen, budget, merged.get(r))
    if markers is not None:  # the merged pass may have seen a marker anchored on "."
        markers = (markers[0] or ZLIB_MARKER in seen.markers, markers[1] or LZSS_MARKER in seen.markers)
    if not whole and mine.appends and any(r.encoding == "ascii" and not r.template for r in found):
        seen.versioners += _holds_whole(buf, _pieces(buf, data, pages), mine.versioning)
    for head in seen.heads:
        names, strong = mine.heads[head]
        if strong or seen.fragments:
            for name in names:
                if classify(name) == 2:
                    found.add(NameReference(name, "assembled", bool(TEMPLATE.search(name))))
    if seen.versioners and mine.appends:
        for ref in list(found):
            if ref.encoding in ("ascii", "utf-16le") and not ref.template:
                name = ref.name + mine.appends
                if classify(name) == 2 and classify.plain(ref.name) < 2:
                    found.discard(ref)  # the versioned file is what the loader finds
                    found.add(NameReference(name, "assembled", True))
    for encoding, table in _cython_tables(buf, const, budget, markers, pages):
        _scan_table(table, encoding, classify, found)
    return tuple(sorted(found))
