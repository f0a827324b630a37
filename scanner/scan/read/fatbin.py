"""Fat binary (CUDA kernel) analysis: which SASS and PTX a binary carries.

ZLUDA runs only the PTX entries of a fat binary; SASS (cubin) entries are
compiled for NVIDIA GPUs and useless on AMD. This module finds the fat binary
containers of one PE/ELF file and classifies every entry *from its header
alone* — payloads are never read, let alone decompressed.

    report = analyse_kernels(buf, info)             # known container sections
    report = analyse_kernels(buf, info, deep=True)  # + .data/.rdata/.rodata/.cask_re
    report.state        # "ptx-available" | "sass-only" | "relocatable-ptx-only" | "none"
    report.to_dict()    # JSON shape, see KernelReport.to_dict

``buf`` is the whole file (an ``mmap`` or ``bytes``/``bytearray``; a
``memoryview`` is copied first) and ``info`` the :class:`BinaryInfo` a reader
produced from it. Only the container/wrapper sections (and, with ``deep``,
the scanned data sections) are touched: container and entry headers are
unpacked in place, the deep scan uses ``buf.find`` over the section (no
copies), so memory does not grow with file size. With an ``mmap`` (Linux,
macOS) big container sections are read with ``MADV_RANDOM`` (no readahead of
payloads between headers; reset to normal afterwards) and scanned pages are
handed back with ``MADV_DONTNEED`` every ``CHUNK`` bytes, so resident
memory stays bounded too; the mapping must be read-only (``ACCESS_READ``, as
:func:`cuda4amd.readers.read_path` makes it), never privately modified.
Everything is bounds checked; a corrupt container raises
:class:`MalformedBinary`, nothing else.

Where containers are found
--------------------------
* Container sections, walked from start to end: PE ``.nv_fatb`` and ELF
  ``.nv_fatbin`` (registered fat binaries), PE ``__nv_rel`` and ELF
  ``__nv_relfatbin`` (relocatable device code from ``-rdc=true``, the input
  of the device link; the registered module is the device-linked result in
  ``.nv_fatbin``. The runtime sees the relocatable code only through the
  version-2 wrapper's prelinked-fatbin array, for a link at load time; whether
  ZLUDA can do that is not established, so PTX found only there is reported
  as ``relocatable-ptx-only``, never as ``ptx-available``). Containers sit
  back to back; only zero padding may separate them (MSVC aligns each one to
  16 bytes, leaving 8 zero bytes; GNU ld packs nvcc's ``.align 8`` blobs
  without gaps).
* Wrapper sections (PE ``.nvFatBi``, ELF ``.nvFatBinSegment``) hold
  ``__fatBinC_Wrapper_t {int magic 0x466243B1; int version; const void *data;
  void *filename_or_fatbins}`` records (24 bytes on 64-bit, 16 on 32-bit),
  back to back or with zero padding between them.
  ``data`` is a virtual address (PE: ImageBase + RVA) mapped to a file offset
  through the section table. Version 1 is a plain module (``data`` →
  ``.nv_fatbin``, or → ``__nv_relfatbin`` for an ``-rdc`` object's
  relocatable code); version 2 (``FATBINC_LINK_VERSION``) is the device-link
  stub nvcc generates, its last field points at the prelinked-fatbin array.
  In ELF the pointer is a dynamic relocation: GNU ld also writes its value in
  place, lld by default does not (``--apply-dynamic-relocs`` is off), so a
  pointer 0 in place is read from its R_*_RELATIVE relocation in DT_RELA, as
  ld.so writes it (cuda4amd.scan.read.elf.relative_addends); one still 0 (an
  object file) is skipped. A pointer that maps to no file bytes, or to bytes
  that are not a container, is a damaged wrapper (MalformedBinary).
  Wrappers matter only for containers outside the container sections, and
  for a container section whose header the loader's map contradicts
  (cuda4amd.scan.read.loadmap: ld.so maps PT_LOAD segments and ignores section
  headers; Windows maps the section table). Such a section (a 1 TiB size, an
  offset its address does not map to) is not walked: its containers are
  parsed where the wrappers point, through the loader's map, each bounded by
  its own size and the file data of its region, and ``notes`` says so. If no
  wrapper points into it, nothing tells where its containers are: that is a
  reading error (MalformedBinary), never "no kernels".
* ``deep=True``: ``.data``, ``.rdata``, ``.rodata``, ``.cask_re`` are searched
  for the container magic at 8-byte aligned file offsets (NVIDIA's own
  libraries embed many fat binaries there: cufft64_11.dll has ~24 000 in
  ``.data``, cublasLt64_12.dll ~470 in ``.cask_re``). A hit counts only with a
  plausible header (version 1, header size 16, contents inside the section);
  the search resumes after each container, so magics inside payloads are not
  seen.

Layout (little endian), checked against nvcc/fatbinary 13.0 output
-------------------------------------------------------------------
Container, 16 bytes: u32 magic 0xBA55ED50, u16 version (always 1), u16 header
size (16), u64 size of the entries that follow. A container may be empty
(size 0: nvcc's device-link stub when no SASS was requested).

Entry header (``header size`` bytes, at least 0x40; then the payload):

====  ====  =============================================================
0x00  u16   kind: 1 PTX, 2 cubin (SASS), 8 LTO-IR (NVVM IR for -dlto)
0x02  u16   version (0x0101)
0x04  u32   header size, >= 0x40 (0x40 cubin, 0x48/0x50 PTX, 0x58-0x80
            when the header carries an options block: sm_100f/120a
            cubins, -rdc PTX, LTO-IR)
0x08  u64   padded payload size (multiple of 8); next entry = this entry +
            header size + padded size
0x10  u32   compressed size (0 when not compressed)
0x14  u32   offset of the options block inside the header (0 = none)
0x18  u16   minor \\ PTX entries: PTX ISA version major.minor (0x1A.0x18),
0x1A  u16   major /  e.g. 9.0 from CUDA 13.0, 8.8 from CUDA 12.8/12.9. Cubins
            carry 1.8 here, LTO-IR 1.65 (their own format versions): not
            a PTX ISA, so ``ptx_isa`` is None for them.
0x1C  u32   SM number (86 for sm_86 and for compute_86 PTX)
0x28  u64   flags: 0x1 64-bit, 0x2 debug (``nvcc -G``: the PTX says
            ``.target sm_86, debug``), 0x10 Linux host, 0x40 Windows host (MSVC
            builds; cufft64_11.dll's .data fat binaries say Linux), 0x2000
            LZ4 (``--compress-mode=speed``; most CUDA 12 Windows wheels),
            0x8000 zstd (the CUDA 13 default and ``size``/``balance``),
            0x100000 ``a`` (sm_90a), 0x200000 ``f`` (sm_100f); also seen:
            0x1000000 on cubins whose header has an options block, 0x10000
            on LTO-IR (meanings unknown, ignored)
0x38  u64   uncompressed payload size (0 when not compressed)
====  ====  =============================================================

Corrections to DESIGN.md §2: containers are 8-byte aligned, not always 16
(nvcc's ``fatbinData`` is ``.align 8``; in ELF files containers often start
at 8 mod 16 — MSVC-built PE files happen to align them to 16); minor/major at
0x18/0x1A confirmed (major is the *high* half-word); default nvcc 13
compression is zstd of PTX only (cubins stay uncompressed unless
``-Xfatbin -compress-all``); ``nvcc -shared`` in CUDA 13 always adds a
device-link container (an nvlink-built cubin per SASS arch, empty container
when there is no SASS) next to the module's own.
"""
from __future__ import annotations

import re
import struct
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Mapping
from functools import partial

from cuda4amd.model import BinaryInfo, FatbinEntry, KernelReport, Section
from cuda4amd.scan.read.binview import Buffer, MalformedBinary
from cuda4amd.scan.read.elf import relative_addends
from cuda4amd.scan.read.loadmap import LoadMap, disagreement, load_map
from cuda4amd.scan.read.pages import CHUNK, Pages, disk_faults

__all__ = [
    "CONTAINER_SECTIONS",
    "DEEP_SECTIONS",
    "MAX_ENTRIES",
    "MAX_SECTION_BYTES",
    "REGISTERED_SECTIONS",
    "RELOCATABLE_SECTIONS",
    "WRAPPER_SECTIONS",
    "FatbinEntry",
    "KernelReport",
    "Magics",
    "MalformedBinary",
    "analyse_kernels",
    "arch_sort_key",
    "check_section_size",
]

MAGIC = 0xBA55ED50
MAGIC_BYTES = struct.pack("<I", MAGIC)
WRAPPER_MAGIC = 0x466243B1
WRAPPER_MAGIC_BYTES = struct.pack("<I", WRAPPER_MAGIC)

#: Sections walked container by container (PE names are cut to 8 characters).
CONTAINER_SECTIONS = frozenset({".nv_fatb", ".nv_fatbin", "__nv_rel", "__nv_relfatbin"})
#: Registered at start-up by __cudaRegisterFatBinary: the containers ZLUDA's PTX check counts.
REGISTERED_SECTIONS = frozenset({".nv_fatb", ".nv_fatbin"})
#: Relocatable device code (-rdc), the input of the device link: see the module docstring.
RELOCATABLE_SECTIONS = frozenset({"__nv_rel", "__nv_relfatbin"})
#: Sections of __fatBinC_Wrapper_t records pointing at containers.
WRAPPER_SECTIONS = frozenset({".nvFatBi", ".nvFatBinSegment"})
#: Searched for container magics only with deep=True.
DEEP_SECTIONS = frozenset({".data", ".rdata", ".rodata", ".cask_re"})

#: Caps against hostile input.
MAX_ENTRIES = 100_000
MAX_CONTAINERS = 100_000
MAX_WRAPPERS = 100_000
MIN_ENTRY_HEADER = 0x40
MAX_ENTRY_HEADER = 0x10000
MAX_CONTAINER_HEADER = 0x1000
#: Bytes examined in one section. The biggest real fat binary section is about
#: 1.5 GiB (libtorch_cuda.so); a sparse file can claim a TiB of holes, which
#: would take hours to search. A bigger section is a per-file error.
MAX_SECTION_BYTES = 4 << 30
#: Container magics one file may hold (a real one holds thousands at most: one per container).
MAX_MAGICS = 1_000_000
#: Bytes examined in one file, as a multiple of its size (plus 1 MiB):
#: sections do not overlap in a real binary, so every byte is searched about once.
MAX_EXAMINED_FACTOR = 2
#: Padding between containers is checked in chunks of this size (no big copies).
_GAP_CHUNK = 1 << 20

KIND_NAMES = {1: "ptx", 2: "sass", 8: "lto-ir"}
#: __fatBinC_Wrapper_t version of nvcc's device-link stub (FATBINC_LINK_VERSION)
LINK_WRAPPER_VERSION = 2
#: A cubin's section header table is read only up to this many sections.
MAX_CUBIN_SECTIONS = 1 << 16
FLAG_DEBUG = 0x2  # nvcc -G: PTX written with `.target sm_XX, debug` (checked: nvcc 13.0, -G -fatbin)
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000  # sm_90a
FLAG_FAMILY = 0x200000  # sm_100f

_CONTAINER = struct.Struct("<IHHQ")
# Entry header 0x00..0x40: kind, version, header size, padded size, compressed
# size, options offset, minor, major, SM, (0x20), flags @0x28, (0x30), uncompressed @0x38
_ENTRY = struct.Struct("<HHIQIIHHI8xQ8xQ")
#: An entry's header size and padded payload size (at +4): where the next entry starts.
_ENTRY_SIZES = struct.Struct("<IQ")
#: How far past a container's end the next one may start (MSVC pads each to 16 bytes).
_GAP_SEARCH = 64


#: The magic as a regex: sre's literal search is 1.8x faster than mmap.find (libllvmlite.so's
#: 59 MiB .rodata: 18 against 33 ms), and finditer hands every match over from C.
_MAGIC_SEARCH = re.compile(re.escape(MAGIC_BYTES))
#: Its last byte, rare in data (0.1 to 1 per KiB in the .rodata of libllvmlite.so,
#: libtriton.so, libtorch_cpu.so, xla_cuda_plugin.so): a memchr for it and a compare is
#: faster still, until it is not rare (libllvmlite.so's .rodata: 21-25 against 38-40 ms).
_MAGIC_LAST = MAGIC_BYTES[-1:]
#: Misses allowed before the regex takes over: this many, and one per KiB searched.
MAGIC_MISSES = 64


class Magics:
    """Where the container magic occurs in one file, found as the searches ask
    and kept: an NVIDIA library's deep kernel search (here) and its by-name
    search (which skips containers) read the same data sections, and searching
    them twice was over a quarter of the reading of a tree of NVIDIA DLLs
    (docs/performance.md).

    ``next(at, hi)`` is the first magic starting at ``at`` or later and ending
    by ``hi``. A search stops at the first magic it finds, so the body of a
    container that its caller skips is read by no one, as before; what has been
    searched is kept as intervals [a, b) in which every magic p with a <= p and
    p + 4 <= b is known. Searches go CHUNK bytes at a time and hand back the
    pages of a chunk without a magic.
    """

    __slots__ = ("buf", "ends", "found", "misses", "pages", "searched", "starts")

    def __init__(self, buf: Buffer, pages: Pages | None = None) -> None:
        self.buf = buf
        self.pages = pages or Pages(buf)
        self.starts: list[int] = []  # the intervals searched, disjoint, in file order
        self.ends: list[int] = []
        self.found: list[int] = []  # the magics in them, ascending
        self.misses = 0  # the last byte's false alarms so far, against the bytes searched
        self.searched = 0

    def next(self, at: int, hi: int) -> int:
        """The first offset p >= at of the magic with p + 4 <= hi, or -1."""
        while at + len(MAGIC_BYTES) <= hi:
            i = bisect_right(self.starts, at) - 1
            if i >= 0 and at < self.ends[i]:  # searched: the answer is known up to its end
                end = self.ends[i]
                k = bisect_left(self.found, at)
                if k < len(self.found) and self.found[k] + len(MAGIC_BYTES) <= end:
                    hit = self.found[k]
                    return hit if hit + len(MAGIC_BYTES) <= hi else -1
                if end >= hi:
                    return -1
                at = max(at, end - len(MAGIC_BYTES) + 1)  # one may start in its last 3 bytes and end beyond
                i += 1
            else:
                i += 1
            # up to the next interval searched and 3 bytes into it (a magic across its start is not in it)
            stop = hi if i >= len(self.starts) else min(hi, self.starts[i] + len(MAGIC_BYTES) - 1)
            hit = self._search(at, stop)
            if hit >= 0:
                return hit
            at = stop - len(MAGIC_BYTES) + 1
        return -1

    def _search(self, lo: int, hi: int) -> int:
        """The first magic in [lo, hi), searched for and kept, or -1."""
        at = lo
        hit = -1
        while at < hi:
            end = min(hi, at + CHUNK)
            # a magic starting before the chunk's end is this chunk's: the next starts at end
            hit = self._first(at, min(hi, end + len(MAGIC_BYTES) - 1), self.searched - at)
            self.searched += (end if hit < 0 else hit) - at
            if hit >= 0:
                break
            self.pages.release(at, end)
            at = end
        self._known(lo, hi if hit < 0 else hit + len(MAGIC_BYTES), hit)
        return hit

    def _first(self, at: int, hi: int, credit: int) -> int:
        """The first magic in [at, hi): a memchr for its last byte while that byte is rare
        (``credit + at``: the bytes searched so far), then the regex."""
        buf = self.buf
        while self.misses <= MAGIC_MISSES or self.misses << 10 <= credit + at:
            last = buf.find(_MAGIC_LAST, at + 3, hi)
            if last < 0:
                return -1
            if buf[last - 3:last + 1] == MAGIC_BYTES:
                return last - 3
            self.misses += 1
            at = last - 2  # the next magic ends after this byte
        found = _MAGIC_SEARCH.search(buf, at, hi)
        return -1 if found is None else found.start()

    def _known(self, lo: int, hi: int, hit: int) -> None:
        """[lo, hi) searched, ``hit`` the one magic in it (or -1): kept, merged with the intervals it
        overlaps by 3 bytes or more (a magic across an interval's end then lies in the other)."""
        if hit >= 0:
            if len(self.found) >= MAX_MAGICS:
                raise MalformedBinary(f"more than {MAX_MAGICS} fat binary container magics (hostile input?)")
            insort(self.found, hit)
        reach = len(MAGIC_BYTES) - 1
        i = bisect_right(self.starts, lo) - 1
        if i >= 0 and self.ends[i] - reach >= lo:  # the one before reaches into this one
            lo = self.starts[i]
            hi = max(hi, self.ends[i])
            del self.starts[i], self.ends[i]
        else:
            i += 1
        while i < len(self.starts) and self.starts[i] <= hi - reach:
            hi = max(hi, self.ends[i])
            del self.starts[i], self.ends[i]
        self.starts.insert(i, lo)
        self.ends.insert(i, hi)


def arch_sort_key(arch: str) -> tuple[int, str]:
    """Sort key by SM number: sm_90 < sm_90a < sm_100 < sm_100f."""
    digits = arch[3:].rstrip("abcdefghijklmnopqrstuvwxyz")
    return (int(digits) if digits.isdigit() else 1 << 30, arch)


def _extent(sec: Section, filesize: int, strict: bool = True) -> tuple[int, int]:
    """File range [start, end) of a section's data (PE: the smaller of virtual and raw size).

    A section starting beyond the end of the file raises when ``strict``,
    else it is empty.
    """
    size = sec.file_size
    if sec.virtual_size and sec.virtual_size < size:
        size = sec.virtual_size
    start = sec.file_offset
    if size <= 0 or start < 0:
        return (start, start)
    if start >= filesize:
        if not strict:
            return (start, start)
        raise MalformedBinary(
            f"section {sec.name} starts at file offset {start:#x}, beyond the end of the file "
            f"({filesize:#x} bytes): truncated"
        )
    return (start, min(start + size, filesize))


def check_section_size(name: str, start: int, end: int) -> None:
    """MalformedBinary when a section's file range is over MAX_SECTION_BYTES (an oversized claim)."""
    if end - start > MAX_SECTION_BYTES:
        raise MalformedBinary(
            f"section {name} claims {end - start:#x} bytes of file data at {start:#x}, more than the "
            f"{MAX_SECTION_BYTES >> 30} GiB examined per section (sparse holes or a damaged header?): not searched")


class _Scan:
    __slots__ = (
        "_names",
        "budget",
        "buf",
        "containers",
        "entries",
        "kinds",
        "link_targets",
        "magics",
        "pages",
        "section_of",
        "sections",
        "seen",
        "size",
        "wrapped",
    )

    def __init__(self, buf: Buffer, magics: Magics | None = None) -> None:
        self.buf = buf
        self.size = len(buf)
        self.budget = MAX_EXAMINED_FACTOR * self.size + (1 << 20)
        self.pages = Pages(buf)  # read pages handed back every CHUNK bytes
        self.magics = magics or Magics(buf, self.pages)
        self.entries: list[FatbinEntry] = []
        self.seen: dict[int, int] = {}  # file offset -> end of each container parsed
        self.sections: dict[str, None] = {}
        self.containers = 0
        self._names: dict[tuple, tuple] = {}  # interned kind/arch/isa strings
        self.kinds: dict[int, str] = {}  # container offset -> module kind (see _module_kind)
        self.link_targets: set[int] = set()  # containers a version-2 (device-link) wrapper points at
        self.section_of: dict[int, str] = {}  # container offset -> its section
        #: containers outside the container sections that a wrapper points at: registered by the runtime
        self.wrapped: set[int] = set()

    # -- one container ---------------------------------------------------------------

    def container(self, off: int, end: int, section: str) -> int:
        """Parse the container at ``off`` (must end by ``end``); return its end offset."""
        buf = self.buf
        if off + 16 > end:
            raise MalformedBinary(
                f"fat binary container header at {off:#x} in {section} is cut off by the end of "
                f"the section ({end:#x})"
            )
        magic, _version, hsize, size = _CONTAINER.unpack_from(buf, off)
        if magic != MAGIC:
            raise MalformedBinary(f"no fat binary container magic at {off:#x} in {section}")
        if hsize < 16 or hsize > MAX_CONTAINER_HEADER:
            raise MalformedBinary(
                f"fat binary container at {off:#x} in {section} has an impossible header size {hsize}"
            )
        first = off + hsize
        stop = first + size
        if stop > end:
            raise MalformedBinary(
                f"fat binary container at {off:#x} in {section} claims {size:#x} bytes of entries, "
                f"running {stop - end:#x} bytes past the end of the section ({end:#x}): truncated or corrupt"
            )
        self.containers += 1
        if self.containers > MAX_CONTAINERS:
            raise MalformedBinary(f"more than {MAX_CONTAINERS} fat binary containers (hostile input?)")
        self.seen[off] = stop
        self.sections.setdefault(section, None)
        relocatable = section in RELOCATABLE_SECTIONS
        entries = self.entries
        names_cache = self._names
        ptx = debug_ptx = 0
        cubins: list[tuple[int, int, bool]] = []  # (payload offset, size, compressed)
        other_code = False
        e = first
        while e < stop:
            if e + MIN_ENTRY_HEADER > stop:
                raise MalformedBinary(
                    f"fat binary entry at {e:#x} in {section}: its header runs past the end of "
                    f"its container ({stop:#x})"
                )
            kind, _v, ehs, psize, _csize, _opt, minor, major, arch, flags, unc = _ENTRY.unpack_from(buf, e)
            if ehs < MIN_ENTRY_HEADER or ehs > MAX_ENTRY_HEADER:
                raise MalformedBinary(
                    f"fat binary entry at {e:#x} in {section} has an impossible header size {ehs:#x}"
                )
            nxt = e + ehs + psize
            if nxt > stop:
                raise MalformedBinary(
                    f"fat binary entry at {e:#x} in {section} claims a {psize:#x}-byte payload, running "
                    f"{nxt - stop:#x} bytes past the end of its container ({stop:#x}): truncated or corrupt"
                )
            compression = _compression(flags)
            if compression == "none":
                unc = psize
            key = (kind, arch, flags & (FLAG_ARCH_SPECIFIC | FLAG_FAMILY), minor, major)
            names = names_cache.get(key)
            if names is None:
                suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
                names = names_cache[key] = (
                    KIND_NAMES.get(kind) or f"unknown({kind})",
                    f"sm_{arch}{suffix}",
                    f"{major}.{minor}" if kind == 1 else None,
                )
            debug = bool(flags & FLAG_DEBUG)
            entry = FatbinEntry(names[0], names[1], names[2], compression, section, relocatable, psize, unc, debug)
            if kind == 1:
                ptx += 1
                debug_ptx += debug
            elif kind == 2:
                cubins.append((e + ehs, psize, compression != "none"))
            else:
                other_code = True
            entries.append(entry)
            if len(entries) > MAX_ENTRIES:
                raise MalformedBinary(f"more than {MAX_ENTRIES} fat binary entries (hostile input?)")
            e = nxt
        self.kinds[off] = _module_kind(buf, relocatable, ptx, debug_ptx, cubins, other_code)
        self.section_of[off] = section
        return stop

    # -- a container section, walked -----------------------------------------------------

    def examine(self, start: int, end: int, section: str) -> None:
        """Count [start, end) of `section` against the caps before searching it."""
        check_section_size(section, start, end)
        self.budget -= end - start
        if self.budget < 0:
            raise MalformedBinary(
                f"sections overlap: searching {section} would examine more than {MAX_EXAMINED_FACTOR}x the "
                f"file's {self.size:#x} bytes (a damaged or hostile section table): not searched")

    def walk(self, start: int, end: int, section: str, hints: Callable[[], list[int]] = list) -> None:
        """Walk a container section from container to container. ``hints``: where its containers
        start, as its wrappers say (:func:`_wrapper_targets`), asked for only if the walk reads the disk."""
        self.examine(start, end, section)
        buf = self.buf
        pos = mark = start
        self.pages.advise(start, end, "MADV_RANDOM")
        # a big section that is not in the page cache: its headers are asked for ahead (_ask_ahead)
        watch = self.pages.advisable(start, end)
        faults = disk_faults() if watch else 0
        try:
            while pos < end:
                hit = buf.find(MAGIC_BYTES, pos, end)
                gap_end = end if hit < 0 else hit
                if gap_end > pos:
                    self._check_zero(pos, gap_end, section, hit < 0)
                if hit < 0:
                    break
                pos = self.container(hit, end, section)
                if watch and disk_faults() != faults:
                    watch = False
                    self._ask_ahead(pos, end, hints())
                if pos - mark >= CHUNK:
                    self.pages.release(mark, pos)
                    mark = pos
            self.pages.release(mark, end)
        finally:
            self.pages.advise(start, end, "MADV_NORMAL")

    def _ask_ahead(self, pos: int, end: int, hints: list[int]) -> None:
        """Ask for the header pages of the containers and entries in [pos, end) before the walk reads them.

        The walk reads a header, then the next one where that one says; from the disk that is one page
        fault after another (a 234 MB cuDNN library: 3,561 in a row, the longest read of the device's
        cold scan, docs/performance.md). Here the same chains are followed a link at a time for all the
        containers at once, each round's pages asked for together, so the disk reads them side by side.
        Containers start where the wrappers say (``hints``) and where the one before ends. Nothing here
        is trusted or reported: the walk then reads and checks every header as before, from memory.
        """
        buf, pages = self.buf, self.pages
        todo = [(at, -1) for at in sorted({pos, *(h for h in hints if pos < h < end)})]  # -1: a container
        started: set[int] = set()
        steps = 0
        while todo and steps <= MAX_CONTAINERS + MAX_ENTRIES:
            pages.ask([(at, at + _ENTRY.size) for at, _ in todo])
            later: list[tuple[int, int]] = []
            for at, stop in todo:
                steps += 1
                if stop < 0:
                    hit = buf.find(MAGIC_BYTES, at, min(end, at + _GAP_SEARCH))  # after any zero padding
                    if hit < 0 or hit in started or hit + _CONTAINER.size > end:
                        continue
                    started.add(hit)
                    _magic, _version, hsize, size = _CONTAINER.unpack_from(buf, hit)
                    first, stop = hit + hsize, hit + hsize + size
                    if hsize < _CONTAINER.size or stop > end:
                        continue
                    if stop < end:
                        later.append((stop, -1))
                    if first < stop:
                        later.append((first, stop))
                elif at + _ENTRY.size <= stop:
                    header, size = _ENTRY_SIZES.unpack_from(buf, at + 4)
                    if MIN_ENTRY_HEADER <= header <= MAX_ENTRY_HEADER and at + header + size < stop:
                        later.append((at + header + size, stop))
            todo = later
        pages.release(pos, end)  # what was read here is mapped again, from the page cache, as the walk reads it

    def _check_zero(self, start: int, end: int, section: str, tail: bool) -> None:
        buf = self.buf
        for a in range(start, end, _GAP_CHUNK):
            b = min(end, a + _GAP_CHUNK)
            if buf[a:b].strip(b"\0"):
                where = "after the last container" if tail else "between containers"
                raise MalformedBinary(
                    f"unexpected non-zero bytes {where} in {section} (file offsets {start:#x}-{end:#x}): "
                    f"a damaged container header?"
                )

    # -- a data section, searched --------------------------------------------------------

    def search(self, start: int, end: int, section: str) -> None:
        self.examine(start, end, section)
        buf = self.buf
        pos = mark = start
        while True:
            hit = self.magics.next(pos, end)  # CHUNK bytes at a time, handing back what was read
            if hit < 0:
                break
            if hit & 7 or hit + 16 > end:
                pos = hit + 1
                continue
            done = self.seen.get(hit)
            if done is not None:  # reached through a wrapper already
                pos = done
                continue
            _m, version, hsize, size = _CONTAINER.unpack_from(buf, hit)
            if version != 1 or hsize != 16 or hit + 16 + size > end:
                pos = hit + 4  # a coincidental match in ordinary data
                continue
            pos = self.container(hit, end, section)
            if pos - mark >= CHUNK:
                self.pages.release(mark, pos)
                mark = pos
        self.pages.release(mark, end)


def _compression(flags: int) -> str:
    """An entry's compression, from its header flags (LZ4 first, as ZLUDA's fatbin.rs tests them)."""
    return "lz4" if flags & FLAG_LZ4 else "zstd" if flags & FLAG_ZSTD else "none"


def _module_kind(buf: Buffer, relocatable: bool, ptx: int, debug_ptx: int,
                 cubins: list[tuple[int, int, bool]], other_code: bool) -> str:
    """What one container is as a module the CUDA runtime registers.

    "relocatable" (-rdc input, not a registered module), "ptx" (has PTX),
    "debug-ptx" (its only PTX was built with -G), "codeless" (empty, or
    SASS whose cubins hold no code section: nvlink's device-link stub),
    "compressed-sass" (SASS only, compressed: whether it holds code is
    decided with the wrappers, see _report), "sass" (SASS/LTO-IR with code
    and no PTX).
    """
    if relocatable:
        return "relocatable"
    if ptx:
        return "debug-ptx" if ptx == debug_ptx else "ptx"
    if other_code:
        return "sass"
    if not cubins:
        return "codeless"
    if any(compressed for _, _, compressed in cubins):
        return "compressed-sass"
    return "sass" if any(_cubin_has_code(buf, at, size) for at, size, _ in cubins) else "codeless"


def _cubin_has_code(buf: Buffer, at: int, size: int) -> bool:
    """Whether an uncompressed cubin (an ELF image) has a `.text.<kernel>`
    section. Only its section header table and section name table are read;
    anything that is not a well-formed ELF64 counts as code (the safe side)."""
    end = at + size
    if size < 64 or buf[at : at + 4] != b"\x7fELF" or buf[at + 4] != 2:
        return True
    shoff, = struct.unpack_from("<Q", buf, at + 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", buf, at + 0x3A)
    if shentsize < 64 or shnum > MAX_CUBIN_SECTIONS or shstrndx >= shnum or at + shoff + shnum * shentsize > end:
        return True
    str_off, str_size = struct.unpack_from("<QQ", buf, at + shoff + shstrndx * shentsize + 0x18)
    names_start = at + str_off
    if str_off + str_size > size:
        return True
    for i in range(shnum):
        (name,) = struct.unpack_from("<I", buf, at + shoff + i * shentsize)
        if name < str_size and buf[names_start + name : names_start + name + 6] == b".text.":
            return True
    return False


def _image_base(buf: Buffer, size: int) -> int:
    """PE ImageBase from the optional header (wrapper pointers are absolute VAs)."""
    if size < 0x40:
        raise MalformedBinary("PE file too short for its headers")
    (lfanew,) = struct.unpack_from("<I", buf, 0x3C)
    opt = lfanew + 24
    if opt + 32 > size:
        raise MalformedBinary(f"PE optional header at {opt:#x} lies beyond the end of the file")
    (magic,) = struct.unpack_from("<H", buf, opt)
    if magic == 0x20B:
        return struct.unpack_from("<Q", buf, opt + 24)[0]
    if magic == 0x10B:
        return struct.unpack_from("<I", buf, opt + 28)[0]
    raise MalformedBinary(f"unknown PE optional header magic {magic:#x}")


def _wrapper_format(buf: Buffer, info: BinaryInfo) -> tuple[str, int, struct.Struct, bytes]:
    """How the file's wrapper records are written: (byte order, what their pointers count from (PE:
    ImageBase, ELF: 0), the pointer's struct, the magic's bytes); MalformedBinary for a PE file whose
    optional header cannot be read."""
    size = len(buf)
    if info.format == "PE":
        endian, base = "<", _image_base(buf, size)
    else:
        endian, base = (">" if size > 5 and buf[5] == 2 else "<"), 0
    ptr = struct.Struct(endian + ("Q" if info.bits == 64 else "I"))
    return endian, base, ptr, struct.pack(endian + "I", WRAPPER_MAGIC)


def _wrapper_targets(buf: Buffer, info: BinaryInfo, section: Section, start: int, end: int) -> list[int]:
    """The file offsets in [start, end) of ``section`` that its wrapper records point at: where the
    containers the runtime registers start (``_follow_wrappers`` reads the same records with every check).
    Only where to ask for pages ahead (_Scan._ask_ahead), never trusted: anything odd is left out."""
    size = len(buf)
    if not section.virtual_address:
        return []
    try:
        _endian, base, ptr, wmagic = _wrapper_format(buf, info)
    except MalformedBinary:
        return []
    targets: list[int] = []
    for w in info.sections:
        if w.name not in WRAPPER_SECTIONS:
            continue
        pos, wend = _extent(w, size, strict=False)
        while len(targets) < MAX_WRAPPERS:
            hit = buf.find(wmagic, pos, wend)
            if hit < 0 or hit + 8 + ptr.size > wend:
                break
            pos = hit + 4
            offset = start + ptr.unpack_from(buf, hit + 8)[0] - base - section.virtual_address
            if start <= offset < end:
                targets.append(offset)
    return targets


def _follow_wrappers(scan: _Scan, info: BinaryInfo, extents: dict[int, tuple[int, int]],
                     unfollowed: Mapping[int, str] | None = None, lmap: LoadMap | None = None) -> set[int]:
    """Parse the containers the wrapper records point at, as the CUDA runtime is handed them.

    A pointer is mapped to file bytes through the sections whose headers agree with the loader
    (``extents``, less ``unfollowed``), exactly bounded by them; elsewhere through the loader's own
    map (``lmap``: ELF PT_LOAD segments, PE sections), bounded by the file data of that region.
    Returns the indexes of the ``unfollowed`` sections a pointer lands in (by the address their
    header claims)."""
    buf, size = scan.buf, scan.size
    wrappers = [s for s in info.sections if s.name in WRAPPER_SECTIONS]
    targets = _Targets(buf, info, _address_spans(info, size, extents, unfollowed), unfollowed or {}, lmap, wrappers)
    if not wrappers:
        return targets.reached
    endian, base, ptr, wmagic = _wrapper_format(buf, info)
    record = 8 + 2 * ptr.size
    count = 0
    for w in wrappers:
        wstart, wend = _extent(w, size, strict=False)
        scan.examine(wstart, wend, w.name)
        _check_wrapper_records(buf, wstart, wend, record, wmagic, w.name)
        pos = wstart
        while True:
            hit = buf.find(wmagic, pos, wend)
            if hit < 0 or hit + record > wend:
                break
            if (hit - wstart) & 3:
                pos = hit + 1
                continue
            pos = hit + record
            count += 1
            if count > MAX_WRAPPERS:
                raise MalformedBinary(f"more than {MAX_WRAPPERS} fat binary wrappers (hostile input?)")
            (version,) = struct.unpack_from(endian + "I", buf, hit + 4)
            (target,) = ptr.unpack_from(buf, hit + 8)
            if not target and info.format == "ELF" and w.virtual_address:
                target = targets.relocated(w.virtual_address + (hit - wstart) + 8)
            if not target:
                continue
            found = targets.resolve(target - base)
            if found is None:
                raise MalformedBinary(
                    f"fat binary wrapper at {hit:#x} in {w.name} points at {target:#x}, which no section of "
                    f"the file holds: the CUDA runtime would register no kernels from it")
            off, fend, name, walked = found
            if version == LINK_WRAPPER_VERSION:
                scan.link_targets.add(off)
            if walked and name in CONTAINER_SECTIONS:
                continue  # a section walked already
            scan.wrapped.add(off)
            if off in scan.seen:
                continue
            if off + 16 > fend or buf[off : off + 4] != MAGIC_BYTES:
                raise MalformedBinary(
                    f"fat binary wrapper at {hit:#x} in {w.name} points at {off:#x} in {name}, which holds no fat "
                    f"binary container (magic {bytes(buf[off:off + 4]).hex() or 'none'}, not "
                    f"{MAGIC_BYTES.hex()}): a damaged container header")
            scan.container(off, fend, name)
    return targets.reached


class _Targets:
    """Where a wrapper's pointer leads (_follow_wrappers): first the sections whose headers agree with
    the loader, else the loader's own map; ELF pointers left 0 in place read from their relocations."""

    def __init__(self, buf: Buffer, info: BinaryInfo, spans: dict[int, tuple[int, int, int, str]],
                 unfollowed: Mapping[int, str], lmap: LoadMap | None, wrappers: list[Section]) -> None:
        self.buf, self.info, self.spans, self.unfollowed, self.lmap = buf, info, spans, unfollowed, lmap
        self.starts = sorted(spans)
        self.wrappers = wrappers
        self.reached: set[int] = set()  # the unfollowed sections a pointer landed in
        self.addends: dict[int, int] | None = None  # read on first need

    def relocated(self, address: int) -> int:
        """What ld.so writes at ``address`` of a wrapper section (a RELATIVE relocation's addend), or 0."""
        if self.addends is None:
            self.addends = _relocated_pointers(self.buf, self.wrappers, len(self.buf))
        return self.addends.get(address, 0)

    def resolve(self, rva: int) -> tuple[int, int, str, bool] | None:
        """(file offset, end of the file data that bounds it, section or region name, whether it is in a
        section header that agrees with the loader) of ``rva``; None where no file bytes are mapped."""
        i = bisect_right(self.starts, rva) - 1
        if i >= 0:
            va0 = self.starts[i]
            va1, fstart, fend, name = self.spans[va0]
            if rva < va1:
                return fstart + (rva - va0), fend, name, True
        self.lmap = self.lmap or load_map(self.buf, self.info)  # no agreeing section header holds it
        found = _loader_target(self.info, self.unfollowed, self.lmap, rva, self.reached)
        return None if found is None else (*found, False)


def _relocated_pointers(buf: Buffer, wrappers: list[Section], size: int) -> dict[int, int]:
    """Address -> value ld.so writes there, for the RELATIVE relocations inside the wrapper sections."""
    out: dict[int, int] = {}
    for w in wrappers:
        start, end = _extent(w, size, strict=False)
        if w.virtual_address and end > start:
            out.update(relative_addends(buf, w.virtual_address, w.virtual_address + (end - start)))
    return out


def _loader_target(info: BinaryInfo, unfollowed: Mapping[int, str], lmap: LoadMap, rva: int,
                   reached: set[int]) -> tuple[int, int, str] | None:
    """Where the loader's map puts ``rva``: (file offset, end of its region's file data, the section it
    belongs to), the section being the ``unfollowed`` one whose header claims that address
    (added to ``reached``), else the region's name; None where no file bytes are mapped there."""
    found = lmap.find(rva)
    if found is None:
        return None
    off, fend, name = found
    for idx in unfollowed:
        s = info.sections[idx]
        if s.virtual_address <= rva < s.virtual_address + max(s.file_size, s.virtual_size):
            reached.add(idx)
            name = s.name
            break
    return off, fend, name


def _address_spans(info: BinaryInfo, size: int, extents: dict[int, tuple[int, int]],
                   skip: Mapping[int, str] | None = None) -> dict[int, tuple[int, int, int, str]]:
    """Address map over the sections with file data, less those in ``skip``: virtual address -> (end
    address, file start, file end, name); of sections at the same address the first wins."""
    spans: dict[int, tuple[int, int, int, str]] = {}
    for idx, s in enumerate(info.sections):
        if not s.virtual_address or s.file_size <= 0 or (skip and idx in skip):
            continue
        start, end = extents.get(idx) or _extent(s, size, strict=False)
        if end > start:
            spans.setdefault(s.virtual_address, (s.virtual_address + (end - start), start, end, s.name))
    return spans


def _check_wrapper_records(buf: Buffer, start: int, end: int, record: int, wmagic: bytes, section: str) -> None:
    """A wrapper section holds wrapper records (nvcc's __nv_fatbinwrapper:
    magic, version, data pointer, unused pointer) and zero padding before,
    between or after them: each object file's record is its own contribution
    to the section, placed at that contribution's alignment (PE/COFF
    IMAGE_SCN_ALIGN_*; a 24-byte record aligned to 16 leaves 8 zero bytes),
    and the runtime is handed each record's own address (nvcc's host stub:
    ``__cudaRegisterFatBinary((void*)&__fatDeviceText)``), never a walk of
    the section. A record starts at a 4-byte aligned offset (as
    _follow_wrappers reads them); anything else is a damaged wrapper, which
    the CUDA runtime refuses to register (__cudaRegisterFatBinary checks the
    magic)."""
    if (end - start) // record > MAX_WRAPPERS:
        raise MalformedBinary(f"more than {MAX_WRAPPERS} fat binary wrappers (hostile input?)")
    pos = start
    while pos <= end - record:
        head = bytes(buf[pos:pos + 4])
        if head == wmagic:
            pos += record
            continue
        window = bytes(buf[pos:pos + record])
        body = window.lstrip(b"\0")
        if not body:
            pos += record
            continue
        after = pos + len(window) - len(body)  # a record after zero padding, at an aligned offset
        if (after - start) & 3 == 0 and after + record <= end and buf[after:after + 4] == wmagic:
            pos = after
            continue
        raise MalformedBinary(
            f"fat binary wrapper at {pos:#x} in {section} has magic {head.hex()}, not {wmagic.hex()}: "
            f"a damaged wrapper; the CUDA runtime would not register its kernels")


def analyse_kernels(buf: Buffer | memoryview, info: BinaryInfo, *, deep: bool = False, magics: Magics | None = None,
                    ptx_registered: list[int] | None = None,
                    ptx_unregistered: list[tuple[int, str]] | None = None,
                    notes: list[str] | None = None) -> KernelReport:
    """Find and classify the fat binary entries of one PE/ELF file.

    ``buf``: the whole file (mmap, bytes or bytearray). ``info``: its
    :class:`BinaryInfo` (only ``format``, ``bits`` and ``sections`` are used).
    ``deep``: also search ``.data``/``.rdata``/``.rodata``/``.cask_re``.
    ``magics``: where the magic occurs, shared with another search of the same buffer.
    ``ptx_registered``: given, it receives the file offsets of the registered containers that carry
    PTX, for the PTX check (cuda4amd.scan.read.ptx.stage): those in REGISTERED_SECTIONS and those
    elsewhere that a wrapper record points at (``__cudaRegisterFatBinary`` is handed the wrapper).
    ``ptx_unregistered``: given, it receives (offset, section) of every other container that carries
    PTX, in file order: relocatable device code (RELOCATABLE_SECTIONS) and the data sections' containers of
    the deep search, which no wrapper registers (a library hands them to ``cuModuleLoadData`` or
    ``cuLibraryLoadData`` itself, if it loads them at all).
    ``notes``: given, it receives a sentence for each container section whose header the loader's map
    contradicts (its containers are then read where the wrapper records point: :func:`_follow_wrappers`).
    Raises :class:`MalformedBinary` for corrupt containers, and for such a section that no wrapper
    record points into (its kernels cannot be followed).
    """
    if isinstance(buf, memoryview):
        buf = buf.tobytes()
        magics = None  # its offsets are the same, but it searches the view
    scan = _Scan(buf, magics)
    size = scan.size
    extents: dict[int, tuple[int, int]] = {}
    #: container sections whose header the loader's map contradicts: index -> why (not walked)
    unfollowed: dict[int, str] = {}
    lmap = _walk_container_sections(scan, info, extents, unfollowed)
    reached = _follow_wrappers(scan, info, extents, unfollowed, lmap)
    for idx, why in unfollowed.items():
        name = info.sections[idx].name
        if idx not in reached:
            raise MalformedBinary(
                f"the {name} section header {why}, and no fat binary wrapper record points into it: where its "
                f"containers are cannot be told, so its kernels were not read")
        if notes is not None:
            notes.append(f"the {name} section header {why}; its kernels were read where the fat binary wrapper "
                         f"records point, as the CUDA runtime reaches them (__cudaRegisterFatBinary)")
    if deep:
        for s in info.sections:
            if s.name in DEEP_SECTIONS:
                start, end = _extent(s, size, strict=False)
                if end > start:
                    scan.search(start, end, s.name)
    if ptx_registered is not None or ptx_unregistered is not None:
        registered, unregistered = _ptx_containers(scan)
        if ptx_registered is not None:
            ptx_registered.extend(registered)
        if ptx_unregistered is not None:
            ptx_unregistered.extend(unregistered)
    return _report(scan)


def _walk_container_sections(scan: _Scan, info: BinaryInfo, extents: dict[int, tuple[int, int]],
                             unfollowed: dict[int, str]) -> LoadMap | None:
    """Walk each container section whose header agrees with the loader's map; put the file range of
    every container section in ``extents`` and why each other one's header is not followed in
    ``unfollowed``. Returns the loader's map, built only for a file with container sections."""
    buf, size = scan.buf, scan.size
    lmap: LoadMap | None = None
    for idx, s in enumerate(info.sections):
        if s.name in CONTAINER_SECTIONS:
            start, end = extents[idx] = _extent(s, size)
            if end > start:
                lmap = lmap or load_map(buf, info)
                why = disagreement(s, size, lmap)
                if why is not None:
                    unfollowed[idx] = why
                    continue
                scan.walk(start, end, s.name, partial(_wrapper_targets, buf, info, s, start, end))
    return lmap


def _ptx_containers(scan: _Scan) -> tuple[list[int], list[tuple[int, str]]]:
    """The offsets of the containers that carry PTX, (registered, never registered), each in file order.

    A relocatable container's PTX counts too (its module kind is "relocatable" whatever it carries):
    the entries say whether it has any."""
    with_ptx = {off for off, kind in scan.kinds.items() if kind in ("ptx", "debug-ptx")}
    with_ptx.update(_relocatable_with_ptx(scan))
    registered: list[int] = []
    unregistered: list[tuple[int, str]] = []
    for off in sorted(with_ptx):
        section = scan.section_of[off]
        if section in REGISTERED_SECTIONS or off in scan.wrapped:
            registered.append(off)
        else:
            unregistered.append((off, section))
    return registered, unregistered


def _relocatable_with_ptx(scan: _Scan) -> set[int]:
    """The relocatable containers (module kind "relocatable") whose entries include PTX."""
    buf = scan.buf
    out = set()
    for off, kind in scan.kinds.items():
        if kind != "relocatable":
            continue
        _magic, _version, hsize, size = _CONTAINER.unpack_from(buf, off)
        pos, stop = off + hsize, off + hsize + size
        while pos + MIN_ENTRY_HEADER <= stop:  # the walk checked these headers already
            kind_id, _v, ehs = struct.unpack_from("<HHI", buf, pos)
            if kind_id == 1:
                out.add(off)
                break
            (psize,) = struct.unpack_from("<Q", buf, pos + 8)
            pos += ehs + psize
    return out


def _report(scan: _Scan) -> KernelReport:
    entries = tuple(scan.entries)
    sass: set[str] = set()
    lto: set[str] = set()
    ptx: set[tuple[str, str]] = set()
    rel_ptx: set[tuple[str, str]] = set()
    compressed = False
    for e in entries:
        if e.compression != "none":
            compressed = True
        if e.kind == "sass":
            sass.add(e.arch)
        elif e.kind == "ptx":
            (rel_ptx if e.relocatable else ptx).add((e.arch, e.ptx_isa or "?"))
        elif e.kind == "lto-ir":
            lto.add(e.arch)
    rel_ptx -= ptx
    if not entries:
        state = "none"
    elif ptx:
        state = "ptx-available"
    elif rel_ptx:
        state = "relocatable-ptx-only"
    else:
        state = "sass-only"

    def pairs(items: set[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(items, key=lambda p: (arch_sort_key(p[0]), p[1])))

    # A compressed SASS-only container is nvlink's device-link stub when a
    # version-2 wrapper points at it and the file has no relocatable device
    # code: without -rdc the device link has nothing to link (checked on the
    # uncompressed fixtures: those stubs' cubins have no .text section).
    has_relocatable = any(kind == "relocatable" for kind in scan.kinds.values())
    modules = with_ptx = debug_only = codeless = 0
    for off, kind in scan.kinds.items():
        if kind == "compressed-sass":
            kind = "codeless" if off in scan.link_targets and not has_relocatable else "sass"
        if kind == "relocatable":
            continue
        if kind == "codeless":
            codeless += 1
            continue
        modules += 1
        if kind in ("ptx", "debug-ptx"):
            with_ptx += 1
            debug_only += kind == "debug-ptx"

    return KernelReport(
        entries=entries,
        containers=scan.containers,
        sections=tuple(scan.sections),
        sass_archs=tuple(sorted(sass, key=arch_sort_key)),
        ptx_archs=pairs(ptx),
        relocatable_ptx_archs=pairs(rel_ptx),
        lto_ir_archs=tuple(sorted(lto, key=arch_sort_key)),
        state=state,
        compressed=compressed,
        modules=modules,
        modules_with_ptx=with_ptx,
        modules_debug_ptx_only=debug_only,
        codeless_containers=codeless,
    )
