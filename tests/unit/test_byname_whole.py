"""The whole-string search of the by-name scan (heads, fragments, version
templates between NULs): every plan, NUL-led or anchored on any cover of
bytes, finds exactly the strings a plain walk from NUL to NUL finds, at the
section's edges and next to fat binary containers too."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda4amd.scan.read import byname, fatbin
from cuda4amd.scan.read.byname import limits, names, patterns, sections, strings, tries
from cuda4amd.scan.read.byname.limits import Budget
from cuda4amd.scan.read.byname.strings import Seen
from cuda4amd.scan.read.fatbin import MAGIC_BYTES


def walk(buf: bytes, lo: int, hi: int, ascii_words: set[bytes], wide_words: set[bytes], first: int):
    """The reference: every NUL-bounded ASCII string and every UTF-16LE
    string between NUL units, in [lo, hi), starting at ``first`` or later."""
    found = []
    for i in range(lo, hi):
        if buf[i] == 0:
            j = buf.find(b"\0", i + 1, hi)
            if j > i + 1 and buf[i + 1:j] in ascii_words and i + 1 >= first:
                found.append((i + 1, j, 1))
        if buf[i:i + 2] == b"\0\0" and i + 2 <= hi:
            k = i + 2
            while k + 1 < hi and buf[k] != 0 and buf[k + 1] == 0:
                k += 2
            text = buf[i + 2:k]
            if text and k + 2 <= hi and buf[k:k + 2] == b"\0\0" and i + 2 >= first and text[0::2] in wide_words:
                found.append((i + 2, k, 2))
    return sorted(found)


def search(buf: bytes, lo: int, hi: int, passes, first: int):
    return sorted(tries.whole_matches(buf, lo, hi, passes, first))


def plans(ascii_words: list[bytes], wide_words: list[bytes]):
    everything = [*ascii_words, *wide_words]
    covers = {tries.cover_of(everything)}
    for favourite in sorted(set(b"".join(everything))):  # each byte the cheapest once
        covers.add(tries.cover_of(everything, {b: 0.1 if b == favourite else 1.0 + b / 256 for b in range(256)}))
    return [tries.nul_passes(ascii_words, wide_words),
            *(tries.anchored_passes(ascii_words, wide_words, cover) for cover in sorted(covers))]


word = st.binary(min_size=1, max_size=4).map(lambda b: bytes(98 + x % 4 for x in b))  # over "bcde"
piece = st.one_of(
    word, word.map(lambda w: w.decode().encode("utf-16-le")),
    st.sampled_from([b"\0", b"\0\0", b"\0\0\0", b"a", b"b\0c", b"d\0\0"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(word, min_size=1, max_size=5, unique=True), st.lists(word, max_size=3, unique=True),
       st.lists(piece, max_size=30), st.integers(0, 3), st.integers(0, 3))
def test_every_plan_finds_exactly_the_whole_strings(ascii_words, wide_words, pieces, cut_lo, cut_hi):
    buf = b"".join(pieces)
    lo, hi = min(cut_lo, len(buf)), max(min(cut_lo, len(buf)), len(buf) - cut_hi)
    expected = walk(buf, max(0, lo - 2), hi, set(ascii_words), set(wide_words), lo)
    for passes in plans(ascii_words, wide_words):
        assert search(buf, max(0, lo - 2), hi, passes, lo) == expected


def container(payload: bytes) -> bytes:
    return MAGIC_BYTES + struct.pack("<HHQ", 1, 16, len(payload)) + payload


REAL = [
    (b"\0\0cublas64_\0libcudnn\0", "windows", True),
    (b"\0" + "nvrtc64_".encode("utf-16-le") + b"\0\0%s64_%d.dll\0x", "windows", True),
    # the NUL before "libnvrtc" is the container's last byte
    (b"libcublas\0lib\0" + container(b"\0libcufft\0" * 3) + b"libnvrtc\0\0\0libcudart\0", "linux", False),
    (b"\0%s.%d\0libcudnn_graph.so\0.so.\0cudart\0", "linux", False),
]


def test_real_patterns_at_section_edges_and_around_containers(rules):
    """The real heads and fragments: a string right at the section's start
    (its NUL is the byte before), after a fat binary container, as UTF-16."""
    names = byname.NamePatterns(rules)
    for text, platform, utf16 in REAL:
        mine = names.for_platform(platform, utf16)
        ascii_words = {w.encode() for w in mine.words}
        wide_words = {w.encode() for w in mine.heads} if utf16 else set()
        for lead in (b"", b"\0", b"x\0"):
            buf = lead + text
            lo = len(lead)
            for a, b in sections.segments(buf, lo, len(buf)):
                expected = walk(buf, max(0, a - 2), b, ascii_words, wide_words, a)
                assert expected, (text, lead)
                whole = mine.whole
                whole.anchored(whole.default)  # compiled when first needed: here, now
                for passes in (whole.nul(), *(p for p, _ in whole.plans.values()), whole.plan(buf, [(a, b)])[0]):
                    assert search(buf, max(0, a - 2), b, passes, a) == expected


def test_a_plan_is_chosen_from_the_data(rules):
    """Big NUL-dense data gets the anchored plan, big text the NUL-led one;
    both give the same names (the other tests)."""
    mine = byname.NamePatterns(rules).for_platform("linux", False)
    dense = (b"\0" * 24 + b"some_symbol_name") * (patterns.PLAN_MIN // 40 + 1)
    text = b"lorem ipsum dolor sit amet, consectetur adipiscing elit " * (patterns.PLAN_MIN // 56 + 1)
    assert mine.whole.plan(dense, [(0, len(dense))])[0] is not mine.whole.nul()
    assert mine.whole.plan(text, [(0, len(text))])[0] is mine.whole.nul()


def test_version_templates_of_an_nvidia_library(rules):
    """``tries.holds_whole`` keeps ``buf.find(b"\\0" + template + b"\\0", lo, hi)``'s bounds."""
    mine = byname.NamePatterns(rules).for_platform("linux", False)
    buf = b"\0%s.%d\0"
    assert tries.holds_whole(buf, [(0, len(buf))], mine.versioning)
    assert not tries.holds_whole(buf, [(1, len(buf))], mine.versioning)  # its NUL before the range
    assert not tries.holds_whole(buf, [(0, len(buf) - 1)], mine.versioning)  # its NUL after the range


marker_piece = st.one_of(
    st.sampled_from([byname.ZLIB_MARKER, byname.LZSS_MARKER, byname.ZLIB_MARKER[:9], b"\0", b"x" * 20]),
    st.binary(max_size=24).map(container),
    st.binary(max_size=24).map(lambda b: container(b + byname.LZSS_MARKER)),  # inside a container
    st.integers(1, 36).map(  # across a container's end: it claims the marker's first bytes
        lambda k: MAGIC_BYTES + struct.pack("<HHQ", 1, 16, k) + byname.ZLIB_MARKER),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(marker_piece, max_size=8), st.integers(0, 40))
def test_markers_are_seen_as_a_find_over_the_whole_range_sees_them(rules, pieces, cut):
    """An anchored plan looks for Cython's markers in the segments; what a
    container or the padding between two hides is searched on its own."""
    buf = b"".join(pieces)
    lo, hi = min(cut, len(buf)), len(buf)
    mine = byname.NamePatterns(rules).for_platform("linux", False)
    passes, marked = mine.whole.anchored(mine.whole.default)
    assert marked
    segments = {(lo, hi): list(sections.segments(buf, lo, hi))}
    seen = Seen(set())
    strings.scan_whole(buf, segments[(lo, hi)], mine, passes, seen, Budget())
    for marker in (byname.ZLIB_MARKER, byname.LZSS_MARKER):
        assert strings.marker_in(buf, marker, [(lo, hi)], segments, seen) == (buf.find(marker, lo, hi) >= 0)


def segments_by_find(buf: bytes, lo: int, hi: int):
    """The reference: the containers found with bytes.find from each position."""
    out, pos, search = [], lo, lo
    while search < hi:
        m = buf.find(MAGIC_BYTES, search, hi)
        if m < 0:
            break
        if m + 16 <= hi:
            _ver, hsize, rest = struct.unpack_from("<HHQ", buf, m + 4)
            if hsize == 16 and 0 < rest <= hi - m - 16:
                if m - pos >= sections.MIN_GAP:
                    out.append((pos, m))
                pos = search = m + 16 + rest
                continue
        search = m + 4
    if pos < hi:
        out.append((pos, hi))
    return out


container_piece = st.one_of(
    st.binary(max_size=40).map(container), st.binary(max_size=40),
    st.sampled_from([MAGIC_BYTES, MAGIC_BYTES[-1:] * 3, MAGIC_BYTES[:3], b"\0" * 17]),
    st.integers(1, 60).map(lambda k: MAGIC_BYTES + struct.pack("<HHQ", 1, 16, k)),  # claims what follows
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(container_piece, max_size=12), st.integers(0, 8), st.integers(0, 8), st.integers(0, 100),
       st.sampled_from([fatbin.CHUNK, 1, 2, 3, 5, 16]), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)),
                                                                 max_size=4))
def test_containers_are_found_as_bytes_find_finds_them(monkeypatch, pieces, cut_lo, cut_hi, misses, chunk, before):
    """The container search (fatbin.Magics: memchr for the magic's last byte, the
    regex once that byte is common; ``chunk`` bytes at a time, its pages handed
    back behind it) cuts the same segments as bytes.find: a magic across a
    chunk's end is found in that chunk (it starts before the end). ``before``:
    other searches of the same buffer first (the deep kernel search of an
    NVIDIA library asks first), whose answers are kept and used."""
    monkeypatch.setattr(fatbin, "MAGIC_MISSES", misses)
    monkeypatch.setattr(fatbin, "CHUNK", chunk)
    buf = b"".join(pieces)
    lo, hi = min(cut_lo, len(buf)), max(min(cut_lo, len(buf)), len(buf) - cut_hi)
    magics = fatbin.Magics(buf)
    for at, end in before:
        magics.next(min(at, len(buf)), min(max(at, end), len(buf)))
    assert list(sections.segments(buf, lo, hi, magics)) == segments_by_find(buf, lo, hi)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from([MAGIC_BYTES, MAGIC_BYTES[-1:], MAGIC_BYTES[:3], MAGIC_BYTES[1:], b"\0", b"ab"]),
                max_size=30),
       st.lists(st.tuples(st.integers(0, 130), st.integers(0, 130)), min_size=1, max_size=12),
       st.integers(0, 3), st.sampled_from([fatbin.CHUNK, 1, 2, 4, 7]))
def test_each_next_magic_is_the_first_bytes_find_finds(monkeypatch, pieces, questions, misses, chunk):
    """Whatever was asked before (what is kept), Magics.next gives what bytes.find gives."""
    monkeypatch.setattr(fatbin, "MAGIC_MISSES", misses)
    monkeypatch.setattr(fatbin, "CHUNK", chunk)
    buf = b"".join(pieces)
    magics = fatbin.Magics(buf)
    for at, hi in questions:
        at, hi = min(at, len(buf)), min(max(at, hi), len(buf))
        assert magics.next(at, hi) == buf.find(MAGIC_BYTES, at, hi), (at, hi)
    assert magics.starts == sorted(magics.starts)
    assert all(a < b for a, b in zip(magics.starts, magics.ends, strict=True))


@pytest.mark.parametrize("questions", [
    [(0, 4), (3, 8)],  # a magic across the end of what was searched, asked about from after its start
    [(4, 8), (0, 8)],  # one across the start of what was searched
    [(0, 5), (5, 8), (0, 8), (1, 8), (2, 6), (3, 8)],
    [(0, 4), (4, 8), (0, 8)],  # two searches that meet where a magic crosses: it is in neither
    [(4, 8), (0, 4), (0, 8)],
])
def test_a_magic_across_the_edge_of_what_was_searched(questions):
    buf = b"ab" + MAGIC_BYTES + b"ab"
    magics = fatbin.Magics(buf)
    for at, hi in questions:
        assert magics.next(at, hi) == buf.find(MAGIC_BYTES, at, hi), (at, hi)


def test_a_container_at_a_chunks_start_is_found_once_the_regex_has_taken_over(monkeypatch):
    # a miss in the first chunk hands the search to the regex; the next chunk starts with a container
    monkeypatch.setattr(fatbin, "MAGIC_MISSES", 0)
    monkeypatch.setattr(fatbin, "CHUNK", 4)
    buf = b"\0\0\0" + MAGIC_BYTES[-1:] + container(b"x" * 8) + b"y" * 20
    assert list(sections.segments(buf, 0, len(buf), fatbin.Magics(buf))) == segments_by_find(buf, 0, len(buf))
    assert segments_by_find(buf, 0, len(buf)) == [(len(buf) - 20, len(buf))]


def real_piece(platform: str):
    names = [b"libcublas.so.12", b"libcudnn_graph.so", b"libnvrtc.so.", b"cudnn64_9.dll", b"nvcuda.dll",
             b"%s64_%d.dll", b".so", b".so.%d", b"%s.%d", b"lib%s.so", b"_0.dll", b"64_", b"cublas64_",
             b"libcudart", b"cufft", byname.ZLIB_MARKER, b"x.so.1", b".DLL"]
    text = st.sampled_from(names)
    return st.one_of(text, text.map(lambda b: b"\0" + b + b"\0"), text.map(lambda b: b.decode().encode("utf-16-le")),
                     st.sampled_from([b"\0", b"\0\0", b".", b"a", b"\0.\0"]), st.binary(max_size=12).map(container))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([("linux", False), ("windows", True)]), st.data())
def test_a_dot_pass_merged_with_the_suffix_search_changes_nothing(rules, where, data):
    """The suffix search with the pass anchored on "." folded in finds the
    same names, whole strings and markers as the two apart."""
    platform, utf16 = where
    merged_agrees(rules, platform, utf16, b"".join(data.draw(st.lists(real_piece(platform), max_size=25))))


def test_a_dot_pass_merged_with_the_suffix_search_on_its_own_strings(rules):
    for text in (b"\0%s.%d\0", b"\0.so.%d\0libcudnn.so.\0", b"\0%s.%d.%d\0.so\0"):
        merged_agrees(rules, "linux", False, text)
    merged_agrees(rules, "windows", True, b"\0%s.dll\0_0.dll\0" + "x.dll".encode("utf-16-le") + b"\0\0")


def merged_agrees(rules, platform: str, utf16: bool, buf: bytes) -> None:
    mine = byname.NamePatterns(rules).for_platform(platform, utf16)
    everything = [*mine.whole.ascii_words, *mine.whole.wide_words]
    # "." the cheapest and few bytes before a "." in the cover: "%s.%d" is found at its "." (no suffix there)
    cover = tries.cover_of(everything, {b: 0.0 if b == ord(".") else 1.0 if chr(b) in "bcni46_" else 100.0
                                       for b in range(256)})
    passes, _ = mine.whole.anchored(cover)
    dot = [p for p in passes if p[0].pattern.startswith(b"\\.")]
    assert len(dot) == 1
    rest = tuple(p for p in passes if p is not dot[0])
    segments = list(sections.segments(buf, 0, len(buf)))
    classify = names.Classifier(rules, platform)
    results = []
    for merged, whole in ((None, passes), (mine.whole.merged(dot[0]), rest)):
        found: set = set()
        seen = Seen(set())
        budget = Budget()
        strings.scan_data(buf, segments, mine, classify, set(), found, seen, budget, merged)
        strings.scan_whole(buf, segments, mine, whole, seen, budget)
        results.append((found, seen, budget.hits))
    assert results[0] == results[1]


def test_hostile_marker_copies_are_capped(rules, monkeypatch):
    """Cython's markers ride along in the anchored passes: each copy costs a
    Python step, so a file of copies is refused like one of '.so' strings."""
    from cuda4amd.model import BinaryInfo, Section
    from cuda4amd.scan.read.binview import MalformedBinary

    monkeypatch.setattr(limits, "MAX_MARKERS", 10)
    data = (b"\0" + byname.ZLIB_MARKER) * 20
    info = BinaryInfo(format="ELF", machine="x86_64", bits=64, kind="dll", undefined_symbols=("dlopen",),
                      sections=(Section(".rodata", 0, len(data), 0, len(data)),))
    with pytest.raises(MalformedBinary, match="markers"):
        byname.find_library_names(data, info, rules)
    data = (b"\0" + byname.ZLIB_MARKER) * 10
    info = BinaryInfo(format="ELF", machine="x86_64", bits=64, kind="dll", undefined_symbols=("dlopen",),
                      sections=(Section(".rodata", 0, len(data), 0, len(data)),))
    assert byname.find_library_names(data, info, rules) == ()


def test_the_suffix_regex_starts_with_the_bytes_the_merged_pass_lets_through():
    import re

    body = re.compile(names.HIT_BODY)
    for byte in range(256):
        for tail in (b"ll", b"LL", b"lL", b"o", b"\0l\0l\0", b"\0L\0L\0", b"\0o\0"):
            if body.match(bytes([byte]) + tail):
                assert byte in names.HIT_FIRST


def test_no_plan_is_compiled_before_a_binary_needs_one(rules):
    """A process whose binaries have no whole-string search (NVIDIA's, those that load nothing by
    name) compiles none of its plans; the first binary that has one compiles only the plan it uses."""
    whole = byname.NamePatterns(rules).for_platform("linux", False).whole
    assert whole.plans == {} and whole.nul_passes is None
    small = b"\0libcudnn_graph.so\0" * 4
    passes, _ = whole.plan(small, [(0, len(small))])
    assert list(whole.plans) == [whole.default] and whole.nul_passes is None
    assert whole.plans[whole.default][0] is passes
