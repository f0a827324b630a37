"""Fast PE/COFF image reader: headers, section table, import, delay-import and
export directories — nothing else is touched.

Works over a :class:`~cuda4amd.binview.BinView` (mmap or bytes); every
structure is bounds checked and every loop is capped, so hostile input ends in
:class:`~cuda4amd.binview.MalformedBinary`, never a hang or huge allocation.
"""
from __future__ import annotations

import contextlib
import struct
from bisect import bisect_right
from collections.abc import Iterable

from cuda4amd.model import BinaryInfo, ImportedLibrary, Section
from cuda4amd.scan.read.binview import MAX_STRING, BinView, MalformedBinary, decode

PE_MACHINES = {
    0x8664: "x86_64",
    0x14C: "x86",
    0xAA64: "arm64",
    0x1C4: "arm",  # ARMNT (Thumb-2)
    0x1C0: "arm",
}

IMAGE_FILE_DLL = 0x2000
DIR_EXPORT, DIR_IMPORT, DIR_DELAY_IMPORT = 0, 1, 13

#: Caps against hostile input.
MAX_DESCRIPTORS = 65536  # import / delay-import descriptors
MAX_THUNKS_PER_DLL = 100_000
MAX_THUNKS_TOTAL = 1_000_000
MAX_EXPORT_NAMES = 1_000_000


def machine_name(machine: int) -> str:
    return PE_MACHINES.get(machine, f"unknown({machine:#x})")


class PEImage:
    """Headers of one PE image plus RVA → file-offset mapping."""

    def __init__(self, v: BinView) -> None:
        self.v = v
        if v.size < 0x40 or v.read(0, 2) != b"MZ":
            raise MalformedBinary("not a PE file: no MZ header")
        e_lfanew = v.u32(0x3C, "e_lfanew")
        if e_lfanew + 24 > v.size or v.read(e_lfanew, 4, "PE signature") != b"PE\0\0":
            raise MalformedBinary(
                f"not a PE file: no 'PE\\0\\0' signature at e_lfanew {e_lfanew:#x} (DOS-only executable?)"
            )
        coff = e_lfanew + 4
        (self.machine, nsections, _ts, self.symtab_ptr, self.nsymbols,
         opt_size, self.characteristics) = v.unpack("HHIIIHH", coff, "COFF file header")
        opt = coff + 20
        if opt_size < 2:
            raise MalformedBinary(f"optional header size {opt_size} is too small for an image")
        magic = v.u16(opt, "optional header magic")
        if magic == 0x10B:
            self.bits = 32
            self.image_base = v.u32(opt + 28, "ImageBase")
            dd_count_off = opt + 92
        elif magic == 0x20B:
            self.bits = 64
            self.image_base = v.u64(opt + 24, "ImageBase")
            dd_count_off = opt + 108
        else:
            raise MalformedBinary(f"unknown optional header magic {magic:#x} (expected 0x10b or 0x20b)")
        self.size_of_headers = v.u32(opt + 60, "SizeOfHeaders") if opt_size >= 64 else 0
        # Data directories: bounded by NumberOfRvaAndSizes and by the optional header size.
        ndirs = v.u32(dd_count_off, "NumberOfRvaAndSizes") if dd_count_off + 4 <= opt + opt_size else 0
        room = max(0, (opt + opt_size - (dd_count_off + 4)) // 8)
        ndirs = min(ndirs, 16, room)
        self.dirs = [
            v.unpack("II", dd_count_off + 4 + 8 * i, "data directory") for i in range(ndirs)
        ]
        sec_off = opt + opt_size
        self.raw_sections = []
        for i in range(nsections):
            o = sec_off + 40 * i
            raw_name = v.read(o, 8, "section header")
            vsize, va, rsize, rptr = v.unpack("IIII", o + 8, "section header")
            if rsize and rptr + rsize > v.size:
                # Windows' loader maps each section's raw data from the file and refuses an image whose
                # data runs past its end (STATUS_INVALID_IMAGE_FORMAT, 0xC000007B); the PE format's
                # SizeOfRawData / PointerToRawData (Microsoft, "PE Format", Section Table) place it
                raise MalformedBinary(
                    f"section {i + 1}'s raw data ({rsize:#x} bytes at {rptr:#x}) runs past the end of the file "
                    f"({v.size:#x} bytes): Windows refuses to load it (STATUS_INVALID_IMAGE_FORMAT)")
            self.raw_sections.append((raw_name, vsize, va, rsize, rptr))
        # RVA lookup: sections sorted by VA, each covering [VA, VA + SizeOfRawData)
        # clipped at the next section's VA (the loader rejects overlapping
        # sections, so valid images are unaffected); bisect keeps lookups
        # O(log n) even for 65535 hostile sections.
        by_va: dict[int, tuple[int, int]] = {}
        for _n, _vs, va, rsize, rptr in self.raw_sections:
            by_va.setdefault(va, (rsize, rptr))  # the first of equal VAs wins
        starts = sorted(by_va)
        self._starts = starts
        self._ends = []
        self._deltas = []
        for i, va in enumerate(starts):
            rsize, rptr = by_va[va]
            end = va + rsize
            if i + 1 < len(starts):
                end = min(end, starts[i + 1])
            self._ends.append(end)
            self._deltas.append(rptr - va)
        self._first_va = starts[0] if starts else 0

    def dir(self, index: int) -> tuple[int, int]:
        return self.dirs[index] if index < len(self.dirs) else (0, 0)

    def _locate(self, rva: int) -> int:
        """Index into the sorted section arrays of the section holding ``rva``, or -1."""
        i = bisect_right(self._starts, rva) - 1
        if i >= 0 and rva < self._ends[i]:
            return i
        return -1

    def rva_to_offset(self, rva: int, what: str) -> int:
        i = self._locate(rva)
        if i >= 0:
            return rva + self._deltas[i]
        # The headers are mapped at RVA 0, up to the first section.
        hdr_end = self.size_of_headers
        if self._first_va:
            hdr_end = min(hdr_end, self._first_va) if hdr_end else self._first_va
        if 0 <= rva < hdr_end:
            return rva
        i = bisect_right(self._starts, rva) - 1
        if i >= 0:
            for _n, vsize, va, _rs, _rp in self.raw_sections:
                if va == self._starts[i] and rva < va + vsize:
                    raise MalformedBinary(
                        f"{what} RVA {rva:#x} points into the uninitialised part of a section "
                        f"(no data for it in the file)"
                    )
        raise MalformedBinary(f"{what} RVA {rva:#x} is outside every section")

    def cstr_at_rva(self, rva: int, what: str) -> str:
        return self.v.cstr(self.rva_to_offset(rva, what), what)

    # -- sections -----------------------------------------------------------------

    def sections(self) -> tuple[Section, ...]:
        strtab = None  # file offset of the COFF string table, if present and in file
        if self.symtab_ptr:
            st = self.symtab_ptr + self.nsymbols * 18
            if st + 4 <= self.v.size:
                strtab = st
        out = []
        for raw_name, vsize, va, rsize, rptr in self.raw_sections:
            raw = raw_name.split(b"\0", 1)[0]
            name = decode(raw)
            if raw[:1] == b"/" and strtab is not None and raw[1:].isdigit():
                idx = int(raw[1:])
                with contextlib.suppress(MalformedBinary):  # keep the raw "/N" when the string table is broken
                    name = self.v.cstr(strtab + idx, "long section name")
            out.append(Section(name, va, vsize, rptr, rsize))
        return tuple(out)

    # -- imports ------------------------------------------------------------------

    def _thunks(self, rva: int, what: str, base: int, budget: list[int],
                forbid: tuple[int, int, str]) -> tuple[list[str], list[int]]:
        """Names and ordinals from a thunk array at ``rva``, in table order.

        ``base`` is the image base for old VA-based delay-import tables (the
        hint/name pointers are then VAs), else 0. ``forbid`` is the file range
        of the descriptor table, which a sane thunk array never overlaps.
        """
        v = self.v
        fmt = ("<I" if self.bits == 32 else "<Q")
        step = self.bits // 8
        flag = 1 << (self.bits - 1)
        hint_rvas: list[int] = []
        ordinals: list[int] = []
        off = start = self.rva_to_offset(rva, what)
        count = 0
        while True:
            # Read the array in chunks; it ends at a zero entry.
            chunk = bytes(v.buf[off : off + step * 512])
            if len(chunk) < step:
                raise MalformedBinary(f"{what} at file offset {off:#x} runs past the end of the file")
            chunk = chunk[: len(chunk) - len(chunk) % step]
            for (val,) in struct.iter_unpack(fmt, chunk):
                if val == 0:
                    end = start + step * (count + 1)
                    if start < forbid[1] and forbid[0] < end:
                        raise MalformedBinary(
                            f"{what} (file offset {start:#x}) overlaps the {forbid[2]} table itself"
                        )
                    budget[0] -= count
                    if budget[0] < 0:
                        raise MalformedBinary(f"more than {MAX_THUNKS_TOTAL} imported functions in total")
                    names = self._names_at(hint_rvas, 2, f"imported function name ({what})")
                    return names, ordinals
                count += 1
                if count > MAX_THUNKS_PER_DLL:
                    raise MalformedBinary(f"{what} has more than {MAX_THUNKS_PER_DLL} entries")
                if val & flag:
                    ordinals.append(val & 0xFFFF)
                elif base:
                    if val < base:
                        raise MalformedBinary(f"{what}: entry VA {val:#x} is below the image base")
                    hint_rvas.append(val - base)
                else:
                    hint_rvas.append(val & 0x7FFFFFFF)
            off += len(chunk)

    def imports(self, budget: list[int]) -> list[ImportedLibrary]:
        rva, _size = self.dir(DIR_IMPORT)
        if rva == 0:
            return []
        off = self.rva_to_offset(rva, "import directory")
        descriptors = []
        for i in range(MAX_DESCRIPTORS + 1):
            if i == MAX_DESCRIPTORS:
                raise MalformedBinary(f"import directory has more than {MAX_DESCRIPTORS} descriptors")
            ilt, _ts, _fwd, name_rva, iat = self.v.unpack("IIIII", off + 20 * i, "import descriptor")
            if name_rva == 0 or iat == 0:
                # The Windows loader stops at the first descriptor without a name or IAT.
                break
            descriptors.append((ilt, name_rva, iat))
        forbid = (off, off + 20 * (len(descriptors) + 1), "import descriptor")
        out = []
        for ilt, name_rva, iat in descriptors:
            dll = self.cstr_at_rva(name_rva, "imported DLL name")
            # OriginalFirstThunk (the lookup table) keeps the names even in
            # bound images; old linkers leave it 0 and the IAT has them.
            names, ordinals = self._thunks(ilt or iat, f"import lookup table of {dll}", 0, budget, forbid)
            out.append(ImportedLibrary(dll, "static", tuple(names), tuple(ordinals)))
        return out

    def delay_imports(self, budget: list[int]) -> list[ImportedLibrary]:
        rva, size = self.dir(DIR_DELAY_IMPORT)
        if rva == 0:
            return []
        off = self.rva_to_offset(rva, "delay-import directory")
        # The table normally ends with an all-zero descriptor; GNU ld output
        # has none, so the directory size (when given) bounds it as well.
        limit = min(size // 32 if size >= 32 else MAX_DESCRIPTORS, MAX_DESCRIPTORS)
        descriptors = []
        for i in range(limit + 1):
            if i == limit:
                if limit == MAX_DESCRIPTORS:
                    raise MalformedBinary(
                        f"delay-import directory has more than {MAX_DESCRIPTORS} descriptors")
                break
            attrs, name, _hmod, _iat, int_, _biat, _uiat, _ts = self.v.unpack(
                "8I", off + 32 * i, "delay-import descriptor"
            )
            if name == 0:
                break
            descriptors.append((attrs, name, int_))
        forbid = (off, off + 32 * len(descriptors), "delay-import descriptor")
        out = []
        for attrs, name, int_ in descriptors:
            # Attribute bit 0 (dlattrRva): fields are RVAs; otherwise (old VC6
            # descriptors) they are VAs and the image base must be subtracted.
            base = 0 if attrs & 1 else self.image_base
            if name < base:
                raise MalformedBinary(f"delay-import DLL name VA {name:#x} is below the image base")
            dll = self.cstr_at_rva(name - base, "delay-imported DLL name")
            names: list[str] = []
            ordinals: list[int] = []
            if int_:
                if int_ < base:
                    raise MalformedBinary(f"delay-import name table VA {int_:#x} is below the image base")
                names, ordinals = self._thunks(
                    int_ - base, f"delay-import name table of {dll}", base, budget, forbid)
            out.append(ImportedLibrary(dll, "delay", tuple(names), tuple(ordinals)))
        return out

    # -- exports ------------------------------------------------------------------

    def exports(self) -> tuple[str, ...]:
        rva, _size = self.dir(DIR_EXPORT)
        if rva == 0:
            return ()
        off = self.rva_to_offset(rva, "export directory")
        (_ch, _ts, _maj, _min, _name, _base, _nfuncs, nnames, _funcs,
         names_rva) = self.v.unpack("IIHHIIIIII", off, "export directory")[:10]
        if nnames == 0:
            return ()
        if nnames > MAX_EXPORT_NAMES:
            raise MalformedBinary(f"export directory claims {nnames} names (more than {MAX_EXPORT_NAMES})")
        tab = self.rva_to_offset(names_rva, "export name pointer table")
        v = self.v
        v.check(tab, 4 * nnames, "export name pointer table")
        return tuple(self._names_at(
            (r for (r,) in v.iter_unpack("I", tab, nnames, "export name pointer table")),
            0, "exported name"))

    def _names_at(self, rvas: Iterable[int], skip: int, what: str) -> list[str]:
        """C strings at each RVA (+``skip`` bytes): the hot loop, kept lean.

        Same checks as ``rva_to_offset`` + ``BinView.cstr``, with the section
        of the previous hit tried first (name tables are contiguous).
        """
        v = self.v
        buf, size = v.buf, v.size
        out = []
        lo = hi = delta = 0  # current section's RVA range [lo, hi) and offset - rva
        for rva in rvas:
            rva += skip
            if not lo <= rva < hi:
                i = self._locate(rva)
                if i < 0:
                    out.append(v.cstr(self.rva_to_offset(rva, what), what))  # headers, or raises
                    lo = hi = 0
                    continue
                lo, hi, delta = self._starts[i], self._ends[i], self._deltas[i]
            o = rva + delta
            if o >= size:
                out.append(self.v.cstr(o, what))  # raises with the usual message
                continue
            nul = buf.find(b"\0", o, o + MAX_STRING + 1)
            if nul < 0:
                out.append(self.v.cstr(o, what))  # raises with the usual message
                continue
            if nul == o:
                raise MalformedBinary(f"{what} at file offset {o:#x} is empty")
            raw = buf[o:nul]
            v.string_budget -= nul - o
            if v.string_budget < 0:
                v.charge(0)  # raises
            try:
                out.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(decode(raw))
        return out


def read_pe(v: BinView, exports: bool = True) -> BinaryInfo:
    """``exports=False``: the export directory is not read (BinaryInfo.exports stays empty)."""
    img = PEImage(v)
    budget = [MAX_THUNKS_TOTAL]
    imports = img.imports(budget) + img.delay_imports(budget)
    return BinaryInfo(
        format="PE",
        machine=machine_name(img.machine),
        bits=img.bits,
        kind="dll" if img.characteristics & IMAGE_FILE_DLL else "exe",
        imports=tuple(imports),
        exports=img.exports() if exports else (),
        sections=img.sections(),
    )
