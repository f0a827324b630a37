"""The by-name search of one binary, from its sections to its references."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from cuda4amd.model import BinaryInfo, NameReference, platform_of
from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.byname.cython import LZSS_MARKER, ZLIB_MARKER, cython_tables, scan_table
from cuda4amd.scan.read.byname.limits import Budget
from cuda4amd.scan.read.byname.names import TEMPLATE, Classifier
from cuda4amd.scan.read.byname.patterns import NamePatterns, PlatformPatterns
from cuda4amd.scan.read.byname.sections import (
    ELF_CONST_SECTIONS,
    ELF_SECTIONS,
    PE_CONST_SECTIONS,
    PE_SECTIONS,
    pe_directory_names,
    pieces,
    ranges,
    segments,
)
from cuda4amd.scan.read.byname.strings import Seen, marker_in, scan_data, scan_whole
from cuda4amd.scan.read.byname.tries import Pass, holds_whole
from cuda4amd.scan.read.fatbin import Magics
from cuda4amd.scan.read.pages import Pages

if TYPE_CHECKING:
    from cuda4amd.rules.ruleset import RuleSet
    from cuda4amd.scan.read.binview import Buffer

__all__ = ["ENCODINGS", "find_library_names", "loads_libraries", "platform_of_info"]

#: Values of NameReference.encoding. "assembled": the name is put together at
#: run time from a stem found in the binary (see "Names assembled at run time").
ENCODINGS = ("ascii", "utf-16le", "cython-zlib", "cython-bz2", "cython-lzss", "assembled")


def platform_of_info(info: BinaryInfo) -> str:
    """The rules platform of a binary: "windows" for PE, "linux" for ELF."""
    return platform_of(info.format)


def find_library_names(buf: Buffer | memoryview, info: BinaryInfo, rules: RuleSet,
                       patterns: NamePatterns | None = None, nvidia: bool = False,
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
    except Exception as exc:  # the contract: one exception type for bad input
        raise MalformedBinary(f"cannot search the binary's strings ({type(exc).__name__}: {exc})") from exc


def loads_libraries(info: BinaryInfo, functions: frozenset[str]) -> bool:
    """Whether the binary imports a function that loads a library by name
    (dlopen, LoadLibraryExW, ...): only such a binary assembles names it
    loads itself."""
    if info.format == "PE":
        return any(not functions.isdisjoint(i.symbols) for i in info.imports)
    return not functions.isdisjoint(info.undefined_symbols)


def _find(buf: Buffer, info: BinaryInfo, rules: RuleSet, patterns: NamePatterns, nvidia: bool,
          magics: Magics | None) -> tuple[NameReference, ...]:
    size = len(buf)
    platform = platform_of_info(info)
    classify = Classifier(rules, platform)
    mine = patterns.for_platform(platform, utf16=info.format == "PE")
    pe = info.format == "PE"
    skip = pe_directory_names(buf) if pe else set()
    found: set[NameReference] = set()
    budget = Budget()
    seen = Seen(set())
    whole = not nvidia and loads_libraries(info, patterns.name_rules.loader_functions)
    data = ranges(info, PE_SECTIONS if pe else ELF_SECTIONS, size)
    const = ranges(info, PE_CONST_SECTIONS if pe else ELF_CONST_SECTIONS, size)
    pages = Pages(buf)
    magics = magics or Magics(buf, pages)
    spans = {(lo, hi): list(segments(buf, lo, hi, magics)) for lo, hi in {*data, *(const if whole else ())}}
    merged: dict[tuple[int, int], Pass] = {}
    markers = None
    if whole:  # string literals (stems, heads) live in the read-only data: the whole-string search stays there
        merged, markers = _search_whole(buf, data, const, spans, mine, pages, seen, budget)
    for r in data:
        scan_data(buf, pieces(buf, spans[r], pages), mine, classify, skip, found, seen, budget, merged.get(r))
    if markers is not None:  # the merged pass may have seen a marker anchored on "."
        markers = (markers[0] or ZLIB_MARKER in seen.markers, markers[1] or LZSS_MARKER in seen.markers)
    if not whole and mine.appends and any(r.encoding == "ascii" and not r.template for r in found):
        seen.versioners += holds_whole(buf, pieces(buf, data, pages), mine.versioning)
    _assemble(found, seen, mine, classify)
    for encoding, table in cython_tables(buf, const, budget, markers, pages):
        scan_table(table, encoding, classify, found)
    return tuple(sorted(found))


def _search_whole(buf: Buffer, data: list[tuple[int, int]], const: list[tuple[int, int]],
                  spans: dict[tuple[int, int], list[tuple[int, int]]], mine: PlatformPatterns, pages: Pages,
                  seen: Seen, budget: Budget) -> tuple[dict[tuple[int, int], Pass], tuple[bool, bool] | None]:
    """The whole strings of the read-only data ``const`` into ``seen``. Returns the
    suffix search merged with the pass anchored on "." per range of ``data`` that
    takes it, and Cython's markers (zlib, lzss) where the passes looked for them."""
    merged: dict[tuple[int, int], Pass] = {}
    read_only = [segment for r in const for segment in spans[r]]
    dot_free = set(const) <= set(data)  # the same ranges: the suffix search covers the read-only data
    passes, marked = mine.whole.plan(buf, read_only, dot_free)
    dots = [p for p in passes if p[0].pattern.startswith(re.escape(b"."))]
    if dot_free and len(dots) == 1:
        merged = dict.fromkeys(const, mine.whole.merged(dots[0]))
        passes = tuple(p for p in passes if p is not dots[0])
    for r in const:
        scan_whole(buf, pieces(buf, spans[r], pages), mine, passes, seen, budget)
    if not marked:
        return merged, None
    return merged, (marker_in(buf, ZLIB_MARKER, const, spans, seen), marker_in(buf, LZSS_MARKER, const, spans, seen))


def _assemble(found: set[NameReference], seen: Seen, mine: PlatformPatterns, classify: Classifier) -> None:
    """The names assembled at run time from the heads, fragments and version templates seen."""
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
