"""Exact expectations for the binary readers (fast engine; lief where noted).

Three sources of binaries:
  * fixtures/ (built by fixtures/build.sh) — asserted when present;
  * small PE/ELF files compiled here with mingw-w64 / gcc (skipped without
    the compilers);
  * ELF images written byte by byte by ``make_elf`` below (always available:
    ELF32/64, little and big endian, versioned symbols).

``make_elf``, ``build_samples`` and ``fixture_binaries`` are reused by
test_reader_agreement.py and test_reader_fuzz.py.
"""
from __future__ import annotations

import io
import shutil
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pytest

from cuda4amd.model import BinaryInfo, ImportedLibrary
from cuda4amd.scan.read.binview import MalformedBinary
from cuda4amd.scan.read.engine import SNIFF_BYTES, read_bytes, read_path, sniff, sniff_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

MINGW64 = shutil.which("x86_64-w64-mingw32-gcc")
MINGW32 = shutil.which("i686-w64-mingw32-gcc")
GCC = shutil.which("gcc")


# --------------------------------------------------------------------------------------
# helpers shared with the other reader tests
# --------------------------------------------------------------------------------------


def magic_of(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return sniff_file(f)
    except OSError:
        return None


def fixture_binaries(include_corrupt: bool = False) -> list[Path]:
    """Every PE/ELF file under fixtures/ (recursively, by magic, not by name)."""
    if not FIXTURES.is_dir():
        return []
    out = []
    for p in sorted(FIXTURES.rglob("*")):
        if not p.is_file() or p.is_symlink():
            continue
        if not include_corrupt and "corrupt" in p.relative_to(FIXTURES).parts:
            continue
        if magic_of(p):
            out.append(p)
    return out


def fixture(rel: str) -> Path:
    p = FIXTURES / rel
    if not p.is_file():
        pytest.skip(f"fixture {rel} not built (run fixtures/build.sh)")
    return p


def make_elf(*, bits=64, little=True, machine=62, e_type=3, interp=False, needed=(), soname=None,
             runpath=None, rpath=None, flags=0, flags_1=0, bind_now=False, symbols=(), verneed=()):
    """A small, well-formed dynamic ELF image written byte by byte.

    symbols: (name, defined (True, False or "abs"), bind (0 local, 1 global,
    2 weak), type (0 notype, 1 object, 2 func), versym index). verneed: (file, [(version, index)]).
    One PT_LOAD maps the whole file at vaddr == file offset.
    """
    E = "<" if little else ">"
    strs = bytearray(b"\0")

    def s(name: str) -> int:
        off = len(strs)
        strs.extend(name.encode() + b"\0")
        return off

    dyn = _asked_dynamic(s, needed=needed, soname=soname, rpath=rpath, runpath=runpath, bind_now=bind_now,
                         flags=flags, flags_1=flags_1)
    # Locals first, as the ELF spec wants (sh_info = first non-local).
    symbols = sorted(symbols, key=lambda x: x[2] != 0)
    sym_names = [s(x[0]) for x in symbols]
    vn = [(s(f), [(s(vname), idx) for vname, idx in vers]) for f, vers in verneed]
    interp_str = b"/lib/ld-test.so\0"
    ehsize, phent, shent, symsz = (64, 56, 64, 24) if bits == 64 else (52, 32, 40, 16)
    nph = 3 if interp else 2
    out = bytearray(ehsize + phent * nph)

    def align(n: int) -> None:
        out.extend(b"\0" * (-len(out) % n))

    interp_off = len(out)
    out += interp_str
    dynstr_off = len(out)
    out += strs
    align(8)
    dynsym_off = len(out)
    out += b"\0" * symsz
    out += _symbol_entries(E, bits, symbols, sym_names)
    versym_off = len(out)
    out += struct.pack(E + "H", 0) + b"".join(struct.pack(E + "H", x[4]) for x in symbols)
    align(8)
    verneed_off = len(out)
    out += _verneed_entries(E, vn)
    align(8)
    dyn += [(5, dynstr_off), (10, len(strs)), (6, dynsym_off), (11, symsz)]
    if vn:
        dyn += [(0x6FFFFFFE, verneed_off), (0x6FFFFFFF, len(vn)), (0x6FFFFFF0, versym_off)]
    dyn.append((0, 0))
    dynamic_off = len(out)
    for tag, val in dyn:
        out += struct.pack(E + ("qQ" if bits == 64 else "iI"), tag, val)
    shstr = bytearray(b"\0")
    names = []
    for n in (".interp", ".dynstr", ".dynsym", ".gnu.version", ".gnu.version_r", ".dynamic",
              ".shstrtab", ".bss"):
        names.append(len(shstr))
        shstr.extend(n.encode() + b"\0")
    shstr_off = len(out)
    out += shstr
    align(8)
    shoff = len(out)
    first_global = 1 + sum(1 for x in symbols if x[2] == 0)
    secs = [
        (0,) * 10,
        (names[0], 1, 2, interp_off, interp_off, len(interp_str), 0, 0, 1, 0),
        (names[1], 3, 2, dynstr_off, dynstr_off, len(strs), 0, 0, 1, 0),
        (names[2], 11, 2, dynsym_off, dynsym_off, versym_off - dynsym_off, 2, first_global, 8, symsz),
        (names[3], 0x6FFFFFFF, 2, versym_off, versym_off, 2 * (len(symbols) + 1), 3, 0, 2, 2),
        (names[4], 0x6FFFFFFE, 2, verneed_off, verneed_off, dynamic_off - verneed_off, 2, len(vn), 8, 0),
        (names[5], 6, 3, dynamic_off, dynamic_off, shstr_off - dynamic_off, 2, 0, 8, 16 if bits == 64 else 8),
        (names[6], 3, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0),
        (names[7], 8, 3, 0x100000, shoff, 0x40, 0, 0, 8, 0),
    ]
    for x in secs:
        out += struct.pack(E + ("IIQQQQIIQQ" if bits == 64 else "IIIIIIIIII"), *x)
    total = len(out)
    phs = [(1, 0, 0, total, total), (2, dynamic_off, dynamic_off, shstr_off - dynamic_off, shstr_off - dynamic_off)]
    if interp:
        phs.insert(0, (3, interp_off, interp_off, len(interp_str), len(interp_str)))
    ph = _program_headers(E, bits, phs)
    out[ehsize : ehsize + len(ph)] = ph
    ident = b"\x7fELF" + bytes([1 if bits == 32 else 2, 1 if little else 2, 1]) + b"\0" * 9
    out[:ehsize] = ident + struct.pack(
        E + ("HHIQQQIHHHHHH" if bits == 64 else "HHIIIIIHHHHHH"),
        e_type, machine, 1, 0, ehsize, shoff, 0, ehsize, phent, len(phs), shent, len(secs), 7)
    return bytes(out)


def _asked_dynamic(s: Callable[[str], int], *, needed: Iterable[str], soname: str | None, rpath: str | None,
                   runpath: str | None, bind_now: bool, flags: int, flags_1: int) -> list[tuple[int, int]]:
    """The (tag, value) entries of .dynamic that the caller asked for, names added to the string table by `s`."""
    dyn = [(1, s(n)) for n in needed]  # DT_NEEDED
    if soname:
        dyn.append((14, s(soname)))  # DT_SONAME
    if rpath:
        dyn.append((15, s(rpath)))  # DT_RPATH
    if runpath:
        dyn.append((29, s(runpath)))  # DT_RUNPATH
    if bind_now:
        dyn.append((24, 0))  # DT_BIND_NOW
    if flags:
        dyn.append((30, flags))  # DT_FLAGS
    if flags_1:
        dyn.append((0x6FFFFFFB, flags_1))  # DT_FLAGS_1
    return dyn


def _symbol_entries(E: str, bits: int, symbols: Sequence[tuple], name_offsets: Sequence[int]) -> bytes:
    """The .dynsym entries after the null one: symbols as make_elf takes them, each name at its string offset."""
    out = bytearray()
    for (_name, defined, bind, typ, _ver), no in zip(symbols, name_offsets, strict=True):
        info, shndx, value, size = (bind << 4) | typ, (2 if defined else 0), (0x100 if defined else 0), 8
        if defined == "abs":  # a version-definition marker: ABS, value 0, size 0
            shndx, value, size = 0xFFF1, 0, 0
        if bits == 64:
            out += struct.pack(E + "IBBHQQ", no, info, 0, shndx, value, size)
        else:
            out += struct.pack(E + "IIIBBH", no, value, size, info, 0, shndx)
    return bytes(out)


def _verneed_entries(E: str, vn: Sequence[tuple[int, Sequence[tuple[int, int]]]]) -> bytes:
    """.gnu.version_r: one Verneed per (file offset, [(version offset, index)]), each followed by its Vernaux."""
    out = bytearray()
    for i, (fo, vers) in enumerate(vn):
        nxt = 16 + 16 * len(vers) if i < len(vn) - 1 else 0
        out += struct.pack(E + "HHIII", 1, len(vers), fo, 16, nxt)
        for j, (vo, idx) in enumerate(vers):
            out += struct.pack(E + "IHHII", 0, 0, idx, vo, 16 if j < len(vers) - 1 else 0)
    return bytes(out)


def _program_headers(E: str, bits: int, phs: Iterable[tuple[int, int, int, int, int]]) -> bytearray:
    """The program header table: (type, offset, vaddr, file size, memory size) each, flags R+X, align 8."""
    ph = bytearray()
    for typ, off, va, fs, ms in phs:
        if bits == 64:
            ph += struct.pack(E + "IIQQQQQQ", typ, 5, off, va, va, fs, ms, 8)
        else:
            ph += struct.pack(E + "IIIIIIII", typ, off, va, va, fs, ms, 5, 8)
    return ph


CUDA_ELF = {
    "needed": ["libcuda.so.1", "libfoo.so", "libc.so.6"],
    "soname": "libx.so.2",
    "runpath": "$ORIGIN:/opt/a",
    "rpath": "/r1::/r2",
    "symbols": [
        ("cuInit", False, 1, 2, 2),
        ("cuMemAlloc_v2", False, 1, 2, 2),
        ("foo_call", False, 1, 2, 3),
        ("plain_unversioned", False, 1, 2, 1),
        ("weak_ref", False, 2, 0, 1),
        ("local_undef", False, 0, 2, 1),
        ("my_export", True, 1, 2, 1),
        ("my_data", True, 2, 1, 1),
        ("LIBX_2", "abs", 1, 1, 1),  # version-definition marker: not an export
    ],
    "verneed": [("libcuda.so.1", [("CUDA_1", 2)]), ("libfoo.so", [("FOO_2", 3)])],
}


def set_delay_directory(path: Path, nm: str) -> None:
    """GNU ld does not fill data directory 13 for dlltool delay-import
    libraries (the delay helper finds the descriptor itself); point it at
    the descriptors so the image looks like an MSVC-linked one."""
    out = subprocess.run([nm, str(path)], capture_output=True, text=True, check=True).stdout
    vas = [int(line.split()[0], 16) for line in out.splitlines() if "__DELAY_IMPORT_DESCRIPTOR_" in line]
    data = bytearray(path.read_bytes())
    opt = struct.unpack_from("<I", data, 0x3C)[0] + 24
    if struct.unpack_from("<H", data, opt)[0] == 0x20B:
        base, dd = struct.unpack_from("<Q", data, opt + 24)[0], opt + 112
    else:
        base, dd = struct.unpack_from("<I", data, opt + 28)[0], opt + 96
    struct.pack_into("<II", data, dd + 13 * 8, min(vas) - base, 32 * len(vas))
    path.write_bytes(bytes(data))


SAMPLE_C = textwrap.dedent(
    """
    extern int vendor_named(void);
    extern int vendor_byord(void);
    extern int delayed_fn(void);
    extern int delayed_ord(void);
    __declspec(dllexport) int zeta(void) { return vendor_named() + vendor_byord() + delayed_fn() + delayed_ord(); }
    __declspec(dllexport) int alpha(void) { return 1; }
    __declspec(dllexport) int Mid_Export(void) { return 3; }
    __attribute__((section(".nv_fatbin_long"), used)) const char blob[16] = "x";
    """
)
VENDOR_DEF = "LIBRARY vendor.dll\nEXPORTS\n  vendor_named\n  vendor_byord @7 NONAME\n"
DELAYED_DEF = "LIBRARY delayed.dll\nEXPORTS\n  delayed_fn\n  delayed_ord @3 NONAME\n"

ELF_LIB_C = textwrap.dedent(
    """
    #include <math.h>
    #include <stdio.h>
    extern int helper_unversioned(int);
    int exported_fn(double x) { printf("%f", cos(x)); return helper_unversioned(1); }
    int exported_obj = 3;
    __attribute__((weak)) int weak_fn(void) { return 1; }
    static int local_fn(void) { return 0; }
    int use_local(void) { return local_fn(); }
    """
)


def _run(cmd, cwd):
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)


def build_samples(workdir: Path) -> dict[str, Path]:
    """Compile the sample binaries that the tools on this machine allow."""
    out: dict[str, Path] = {}
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "sample.c").write_text(SAMPLE_C)
    (workdir / "vendor.def").write_text(VENDOR_DEF)
    (workdir / "delayed.def").write_text(DELAYED_DEF)
    for tag, gcc in (("pe64", MINGW64), ("pe32", MINGW32)):
        if not gcc:
            continue
        prefix = gcc[: -len("gcc")]
        dlltool, nm = prefix + "dlltool", prefix + "nm"
        if not (shutil.which(dlltool) and shutil.which(nm)):
            continue
        _run([dlltool, "-d", "vendor.def", "-l", f"libvendor_{tag}.a"], workdir)
        _run([dlltool, "-d", "delayed.def", "-y", f"libdelayed_{tag}.a"], workdir)
        dll = workdir / f"sample_{tag}.dll"
        # -g keeps .debug_* sections, whose names are COFF long names (/N).
        _run([gcc, "-g", "-shared", "sample.c", "-o", dll.name, "-L.", f"-lvendor_{tag}", f"-ldelayed_{tag}"], workdir)
        set_delay_directory(dll, nm)
        out[tag] = dll
        (workdir / "main.c").write_text("int main(void) { return 0; }\n")
        exe = workdir / f"main_{tag}.exe"
        _run([gcc, "-s", "main.c", "-o", exe.name], workdir)
        out[f"{tag}_exe"] = exe
    if GCC:
        (workdir / "helper.c").write_text("int helper_unversioned(int x) { return x; }\n")
        (workdir / "lib.c").write_text(ELF_LIB_C)
        try:
            _run([GCC, "-shared", "-fPIC", "helper.c", "-o", "libhelper.so"], workdir)
            _run([GCC, "-shared", "-fPIC", "lib.c", "-o", "libsample_rpath.so", "-Wl,-soname,libsample.so.1",
                  "-L.", "-lhelper", "-lm", "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN/../lib:/opt/x",
                  "-Wl,-z,now"], workdir)
            _run([GCC, "-shared", "-fPIC", "lib.c", "-o", "libsample_runpath.so", "-L.", "-lhelper", "-lm",
                  "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN"], workdir)
            (workdir / "main.c").write_text("int main(void) { return 0; }\n")
            _run([GCC, "-pie", "-fPIE", "main.c", "-o", "pie_exe"], workdir)
            _run([GCC, "-no-pie", "main.c", "-o", "nopie_exe"], workdir)
            _run([GCC, "-c", "lib.c", "-o", "rel.o"], workdir)
        except subprocess.CalledProcessError:
            pass
        else:
            for name in ("libsample_rpath.so", "libsample_runpath.so", "pie_exe", "nopie_exe", "rel.o"):
                out[name] = workdir / name
        try:  # ELF32 without a 32-bit libc: -nostdlib
            (workdir / "s32.c").write_text("int f32(void) { return 32; }\n")
            _run([GCC, "-m32", "-nostdlib", "-shared", "-fPIC", "s32.c", "-o", "lib32.so",
                  "-Wl,-soname,lib32.so"], workdir)
            out["lib32.so"] = workdir / "lib32.so"
        except (subprocess.CalledProcessError, OSError):
            pass
    for bits in (32, 64):
        for little in (True, False):
            tag = f"elf{bits}{'le' if little else 'be'}"
            p = workdir / f"{tag}.so"
            # Big endian with a big-endian machine: lief trusts e_machine over
            # EI_DATA for x86 and would misread an x86 "big-endian" file.
            machine = {(64, True): 62, (32, True): 3, (64, False): 21, (32, False): 20}[bits, little]
            p.write_bytes(make_elf(bits=bits, little=little, machine=machine, **CUDA_ELF))
            out[tag] = p
    return out


@pytest.fixture(scope="session")
def samples(tmp_path_factory) -> dict[str, Path]:
    return build_samples(tmp_path_factory.mktemp("reader_samples"))


def need(samples: dict[str, Path], key: str) -> Path:
    if key not in samples:
        pytest.skip(f"sample {key} could not be built here (compiler missing)")
    return samples[key]


def lib(info: BinaryInfo, name: str) -> ImportedLibrary:
    (found,) = [i for i in info.imports if i.name.lower() == name.lower()]
    return found


# --------------------------------------------------------------------------------------
# sniffing and the reader contract
# --------------------------------------------------------------------------------------


def test_sniff_magic():
    assert sniff(b"\x7fELF\x02\x01") == "ELF"
    assert sniff(b"") is None
    assert sniff(b"MZ") is None  # too short to hold e_lfanew
    pe = bytearray(0x80)
    pe[:2] = b"MZ"
    struct.pack_into("<I", pe, 0x3C, 0x40)
    assert sniff(bytes(pe)) is None  # MZ without "PE\0\0": a DOS program
    pe[0x40:0x44] = b"PE\0\0"
    assert sniff(bytes(pe)) == "PE"
    assert SNIFF_BYTES >= 0x400


def test_sniff_file_follows_far_lfanew():
    pe = bytearray(0x3000)
    pe[:2] = b"MZ"
    struct.pack_into("<I", pe, 0x3C, 0x2000)  # beyond SNIFF_BYTES
    pe[0x2000:0x2004] = b"PE\0\0"
    f = io.BytesIO(bytes(pe))
    f.seek(5)
    assert sniff_file(f) == "PE"
    assert f.tell() == 5  # position restored
    assert sniff(bytes(pe[:SNIFF_BYTES])) is None  # not enough bytes to tell


def test_sniff_file_counts_truncated_mz_files_as_pe():
    # a truncated DLL must become a read error, not silently vanish from the scan
    assert sniff_file(io.BytesIO(b"MZ" + bytes(20))) == "PE"
    head = bytearray(0x40)
    head[:2] = b"MZ"
    struct.pack_into("<I", head, 0x3C, 0x1000)  # e_lfanew beyond the end of the file
    assert sniff_file(io.BytesIO(bytes(head))) == "PE"
    for name in ("truncated_header.dll", "bad_lfanew.dll"):
        with open(FIXTURES / "corrupt" / name, "rb") as f:
            assert sniff_file(f) == "PE"


def test_unknown_engine():
    with pytest.raises(ValueError, match="engine"):
        read_bytes(b"\x7fELF", engine="nope")


def test_import_does_not_load_lief_or_pefile():
    code = "import sys, cuda4amd.scan.read.engine; print('lief' in sys.modules, 'pefile' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize("data", [b"", b"hello world", b"MZ", b"\x7fELF", b"\x7fELF\x02\x01\x01" + b"\0" * 9])
@pytest.mark.parametrize("engine", ["fast", "lief"])
def test_garbage_raises_malformed(data, engine):
    with pytest.raises(MalformedBinary) as exc:
        read_bytes(data, engine=engine)
    assert str(exc.value)


def test_malformed_is_value_error():
    assert issubclass(MalformedBinary, ValueError)


def test_read_path_memory_does_not_grow_with_file_size(samples, tmp_path):
    """A 3 GB (sparse) image: fast read_path touches only its headers."""
    src = need(samples, "pe64")
    big = tmp_path / "huge.dll"
    shutil.copyfile(src, big)
    with open(big, "r+b") as f:
        f.truncate(3 * 1024**3)  # overlay of zeros, sparse on disk
    code = textwrap.dedent(
        f"""
        import resource, sys
        from cuda4amd.scan.read.engine import read_path
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        info = read_path({str(big)!r})
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(len(info.imports), (after - before) // 1024)
        """
    )
    if sys.platform == "win32":
        pytest.skip("uses the resource module")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    n_imports, grown_mb = map(int, out.split())
    assert n_imports >= 3
    assert grown_mb < 50


# --------------------------------------------------------------------------------------
# PE: compiled samples
# --------------------------------------------------------------------------------------


def test_pe64_sample(samples):
    info = read_path(need(samples, "pe64"))
    assert (info.format, info.machine, info.bits, info.kind) == ("PE", "x86_64", 64, "dll")
    vendor = lib(info, "vendor.dll")
    assert vendor == ImportedLibrary("vendor.dll", "static", ("vendor_named",), (7,))
    delayed = lib(info, "delayed.dll")
    assert delayed == ImportedLibrary("delayed.dll", "delay", ("delayed_fn",), (3,))
    # delay imports come after every static import, each DLL its own entry
    assert [i.load for i in info.imports][-1] == "delay"
    assert all(i.load == "static" for i in info.imports[:-1])
    assert "GetProcAddress" in lib(info, "KERNEL32.dll").symbols  # the delay-load helper
    # export names in name-pointer-table order (sorted by byte value)
    assert info.exports == ("Mid_Export", "alpha", "zeta")
    assert info.soname is None and info.undefined_symbols == () and not info.bind_now


def test_pe_long_section_names(samples):
    path = need(samples, "pe64")
    info = read_path(path)
    names = [s.name for s in info.sections]
    assert ".nv_fatbin_long" in names  # 15 characters: stored as "/N" in the header
    assert ".debug_info" in names
    assert not any(n.startswith("/") for n in names)
    text = next(s for s in info.sections if s.name == ".text")
    assert text.virtual_address == 0x1000 and text.file_size > 0 and text.file_offset > 0
    bss = next(s for s in info.sections if s.name == ".bss")
    assert bss.file_size == 0 and bss.virtual_size > 0


def test_pe_long_section_names_without_string_table(samples):
    """With PointerToSymbolTable zeroed the "/N" names cannot be resolved: keep them raw."""
    data = bytearray(need(samples, "pe64").read_bytes())
    pe = struct.unpack_from("<I", data, 0x3C)[0]
    struct.pack_into("<II", data, pe + 4 + 8, 0, 0)
    info = read_bytes(bytes(data))
    long_names = [s.name for s in info.sections if s.name.startswith("/")]
    assert long_names and all(n[1:].isdigit() for n in long_names)
    assert info == read_bytes(bytes(data), engine="lief")


def test_pe32_sample(samples):
    info = read_path(need(samples, "pe32"))
    assert (info.machine, info.bits, info.kind) == ("x86", 32, "dll")
    assert lib(info, "vendor.dll") == ImportedLibrary("vendor.dll", "static", ("vendor_named",), (7,))
    assert lib(info, "delayed.dll") == ImportedLibrary("delayed.dll", "delay", ("delayed_fn",), (3,))
    assert info.exports == ("Mid_Export", "alpha", "zeta")
    assert ".nv_fatbin_long" in [s.name for s in info.sections]


def test_pe32_old_va_based_delay_descriptor(samples):
    """Pre-VC7 delay descriptors (attribute bit 0 clear) hold VAs, not RVAs."""
    path = need(samples, "pe32")
    data = bytearray(path.read_bytes())
    pe = struct.unpack_from("<I", data, 0x3C)[0]
    opt = pe + 24
    base = struct.unpack_from("<I", data, opt + 28)[0]
    drva = struct.unpack_from("<I", data, opt + 96 + 13 * 8)[0]
    nsec = struct.unpack_from("<H", data, pe + 6)[0]
    secs = [struct.unpack_from("<IIII", data, opt + 224 + 40 * i + 8) for i in range(nsec)]

    def off(rva):
        (off,) = [ptr + rva - va for vs, va, rs, ptr in secs if va <= rva < va + rs]
        return off

    d = off(drva)
    attrs, name, hmod, iat, int_, biat, uiat, ts = struct.unpack_from("<8I", data, d)
    assert attrs & 1
    # Rewrite the INT entries (hint/name RVAs) as VAs, then the descriptor itself.
    t = off(int_)
    while (val := struct.unpack_from("<I", data, t)[0]) != 0:
        if not val & 0x80000000:
            struct.pack_into("<I", data, t, val + base)
        t += 4
    vals = [0, name + base, hmod + base, iat + base, int_ + base, biat + base if biat else 0,
            uiat + base if uiat else 0, ts]
    struct.pack_into("<8I", data, d, *vals)
    info = read_bytes(bytes(data))
    assert lib(info, "delayed.dll") == ImportedLibrary("delayed.dll", "delay", ("delayed_fn",), (3,))


def test_pe_exe_kind(samples):
    info = read_path(need(samples, "pe64_exe"))
    assert (info.kind, info.bits) == ("exe", 64)
    info = read_path(need(samples, "pe32_exe"))
    assert (info.kind, info.bits, info.machine) == ("exe", 32, "x86")


def test_pe_unknown_machine(samples):
    data = bytearray(need(samples, "pe64").read_bytes())
    pe = struct.unpack_from("<I", data, 0x3C)[0]
    struct.pack_into("<H", data, pe + 4, 0x5064)  # RISC-V 64
    assert read_bytes(bytes(data)).machine == "unknown(0x5064)"


def test_read_bytes_equals_read_path(samples):
    for p in samples.values():
        assert read_bytes(p.read_bytes()) == read_path(p)


# --------------------------------------------------------------------------------------
# PE: project fixtures
# --------------------------------------------------------------------------------------


def test_fixture_blas_mixed():
    info = read_path(fixture("pe/blas_mixed.dll"))
    assert (info.machine, info.bits, info.kind) == ("x86_64", 64, "dll")
    assert [i.name for i in info.imports] == ["cublas64_12.dll", "KERNEL32.dll", "msvcrt.dll"]
    cublas = info.imports[0]
    assert cublas.load == "static" and cublas.ordinals == ()
    assert sorted(cublas.symbols) == [
        "cublasCreate_v2", "cublasDestroy_v2", "cublasDgemm_v2", "cublasSaxpy_v2", "cublasSgemm_v2"]
    assert info.exports == ("blas_mixed_run",)


def test_fixture_delay_solver_keeps_delay_imports_apart():
    info = read_path(fixture("pe/delay_solver.dll"))
    loads = {i.name: i.load for i in info.imports}
    assert loads["nvcuda.dll"] == "static"
    assert loads["cusolver64_11.dll"] == "delay"
    assert lib(info, "cusolver64_11.dll").symbols == ("cusolverDnCreate",)
    assert lib(info, "nvcuda.dll").symbols == ("cuInit",)
    assert info.imports[-1].name == "cusolver64_11.dll"


def test_fixture_ordinal_user():
    info = read_path(fixture("pe/ordinal_user.dll"))
    assert lib(info, "cublas64_12.dll") == ImportedLibrary(
        "cublas64_12.dll", "static", ("cublasCreate_v2",), (5,))


def test_fixture_plain_long_section_name():
    info = read_path(fixture("pe/plain.dll"))
    assert ".cuda4amd_long" in [s.name for s in info.sections]
    assert info.exports == ("plain_add", "plain_mul")
    assert [i.name for i in info.imports] == ["KERNEL32.dll"]


def test_fixture_chain_app_keeps_import_name_case():
    info = read_path(fixture("pe/chain/chain_app.exe"))
    names = [i.name for i in info.imports]
    assert "CHAIN_UTIL.dll" in names and "chain_helper.dll" in names
    assert "api-ms-win-crt-runtime-l1-1-0.dll" in names
    assert info.kind == "exe"


# --------------------------------------------------------------------------------------
# ELF
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("little", [True, False])
def test_elf_handmade_all_classes_and_byte_orders(bits, little):
    data = make_elf(bits=bits, little=little, machine=21 if bits == 64 else 20, **CUDA_ELF)
    info = read_bytes(data)
    assert (info.format, info.bits, info.kind) == ("ELF", bits, "shared-library")
    expected_machine = {(64, True): "ppc64le", (64, False): "ppc64"}.get((bits, little), "ppc")
    assert info.machine == expected_machine
    assert info.imports == (
        ImportedLibrary("libcuda.so.1", "static", ("cuInit", "cuMemAlloc_v2")),
        ImportedLibrary("libfoo.so", "static", ("foo_call",)),
        ImportedLibrary("libc.so.6", "static", ()),
    )
    # unversioned undefined symbols are only in undefined_symbols; locals are not there
    assert info.undefined_symbols == ("cuInit", "cuMemAlloc_v2", "foo_call", "plain_unversioned", "weak_ref")
    assert info.exports == ("my_data", "my_export")
    assert info.soname == "libx.so.2"
    assert info.runpath == ("$ORIGIN", "/opt/a")
    assert info.rpath == ("/r1", "/r2")
    assert not info.bind_now
    assert ".gnu.version_r" in [s.name for s in info.sections]
    bss = next(s for s in info.sections if s.name == ".bss")
    assert bss.file_size == 0 and bss.virtual_size == 0x40
    assert info == read_bytes(data, engine="lief")


@pytest.mark.parametrize(
    "kw, expected",
    [
        ({"bind_now": True}, True),
        ({"flags": 0x8}, True),  # DF_BIND_NOW
        ({"flags": 0x2}, False),  # DF_SYMBOLIC
        ({"flags_1": 0x1}, True),  # DF_1_NOW
        ({"flags_1": 0x8000000}, False),  # DF_1_PIE
    ],
)
def test_elf_bind_now_variants(kw, expected):
    assert read_bytes(make_elf(needed=["libc.so.6"], **kw)).bind_now is expected


@pytest.mark.parametrize(
    "e_type, interp, kind",
    [(3, True, "executable"), (3, False, "shared-library"), (2, True, "executable"),
     (1, False, "relocatable"), (4, False, "core"), (0xFE00, False, "other")],
)
def test_elf_kind(e_type, interp, kind):
    assert read_bytes(make_elf(e_type=e_type, interp=interp)).kind == kind


@pytest.mark.parametrize(
    "machine, bits, little, name",
    [(62, 64, True, "x86_64"), (3, 32, True, "x86"), (183, 64, True, "arm64"), (40, 32, True, "arm"),
     (21, 64, True, "ppc64le"), (22, 64, False, "s390x"), (243, 64, True, "riscv64"), (0x1234, 64, True, "unknown(0x1234)")],
)
def test_elf_machines(machine, bits, little, name):
    assert read_bytes(make_elf(machine=machine, bits=bits, little=little)).machine == name


def test_elf_gcc_rpath_soname_versioned(samples):
    info = read_path(need(samples, "libsample_rpath.so"))
    assert (info.machine, info.bits, info.kind) == ("x86_64", 64, "shared-library")
    assert [i.name for i in info.imports] == ["libhelper.so", "libm.so.6", "libc.so.6"]
    assert info.soname == "libsample.so.1"
    assert info.rpath == ("$ORIGIN/../lib", "/opt/x") and info.runpath == ()
    assert info.bind_now
    assert lib(info, "libhelper.so").symbols == ()  # libhelper has no version script
    assert "helper_unversioned" in info.undefined_symbols
    assert lib(info, "libm.so.6").symbols == ("cos",)
    assert "printf" in lib(info, "libc.so.6").symbols
    assert set(info.exports) >= {"exported_fn", "exported_obj", "weak_fn", "use_local"}
    assert "local_fn" not in info.exports
    assert list(info.undefined_symbols) == sorted(set(info.undefined_symbols))


def test_elf_gcc_runpath(samples):
    info = read_path(need(samples, "libsample_runpath.so"))
    assert info.runpath == ("$ORIGIN",) and info.rpath == () and info.soname is None
    assert not info.bind_now


def test_elf_gcc_kinds(samples):
    assert read_path(need(samples, "pie_exe")).kind == "executable"
    assert read_path(need(samples, "nopie_exe")).kind == "executable"
    rel = read_path(need(samples, "rel.o"))
    assert rel.kind == "relocatable" and rel.imports == ()
    assert ".text" in [s.name for s in rel.sections]


def test_elf32_gcc(samples):
    info = read_path(need(samples, "lib32.so"))
    assert (info.machine, info.bits, info.soname) == ("x86", 32, "lib32.so")
    assert "f32" in info.exports


def test_elf_without_section_headers(samples):
    """sstrip-style files: symbols found through DT_SYMTAB + DT_GNU_HASH/DT_HASH."""
    src = need(samples, "libsample_rpath.so")
    objcopy = shutil.which("llvm-objcopy")
    if not objcopy:
        pytest.skip("llvm-objcopy not installed")
    dst = src.with_name("nosections.so")
    subprocess.run([objcopy, "--strip-sections", str(src), str(dst)], check=True)
    full, stripped = read_path(src), read_path(dst)
    assert stripped.sections == ()
    assert stripped.imports == full.imports
    assert stripped.undefined_symbols == full.undefined_symbols
    assert stripped.exports == full.exports
    assert stripped == read_path(dst, engine="lief")


def test_fixture_elf_user_blas():
    info = read_path(fixture("elf/libuser_blas.so"))
    cublas = lib(info, "libcublas.so.12")
    assert {"cublasCreate_v2", "cublasSgemm_v2", "cublasDgemm_v2", "cublasSgemm"} <= set(cublas.symbols)
    assert list(cublas.symbols) == sorted(cublas.symbols)
    assert info.runpath == ("$ORIGIN",)
    assert info.kind == "shared-library"


def test_fixture_elf_user_rpath_unversioned():
    info = read_path(fixture("elf/libuser_rpath.so"))
    assert info.rpath == ("$ORIGIN/../lib",) and info.runpath == ()
    assert lib(info, "libcusolver.so.11").symbols == ()
    assert "cusolverDnCreate" in info.undefined_symbols


def test_fixture_elf_app_driver():
    info = read_path(fixture("elf/app_driver"))
    assert info.kind == "executable" and info.bind_now
    assert next(i.name for i in info.imports) == "libcuda.so.1"
    assert {"cuInit", "cuDeviceGet", "cuMemAlloc_v2", "cuCtxSetCacheConfig"} <= set(info.undefined_symbols)


def test_fixture_elf_libcublas():
    info = read_path(fixture("elf/libcublas.so.12"))
    assert info.soname == "libcublas.so.12"
    assert {"cublasCreate_v2", "cublasDestroy_v2", "cublasSgemm_v2", "cublasDgemm_v2", "cublasSgemm"} <= set(
        info.exports)
    assert "libcublas.so.12" not in info.exports  # the version-definition marker symbol


# --------------------------------------------------------------------------------------
# corrupt input
# --------------------------------------------------------------------------------------

CORRUPT = sorted((FIXTURES / "corrupt").glob("*")) if (FIXTURES / "corrupt").is_dir() else []


@pytest.mark.skipif(not CORRUPT, reason="fixtures/corrupt not built")
@pytest.mark.parametrize("path", CORRUPT, ids=lambda p: p.name)
def test_corrupt_fixture_raises_malformed(path):
    with pytest.raises(MalformedBinary) as exc:
        read_path(path)
    assert len(str(exc.value)) > 10
    with pytest.raises(MalformedBinary):
        read_bytes(path.read_bytes())


def test_corrupt_dos_only_is_not_pe():
    data = fixture("corrupt/dos_only.exe").read_bytes()
    assert data[:2] == b"MZ"
    assert sniff(data) is None
    with open(FIXTURES / "corrupt/dos_only.exe", "rb") as f:
        assert sniff_file(f) is None


def test_corrupt_bad_import_rva_message():
    with pytest.raises(MalformedBinary, match=r"import directory RVA 0x7ffffff0 is outside every section"):
        read_path(fixture("corrupt/bad_import_rva.dll"))


def test_corrupt_import_loop_message():
    with pytest.raises(MalformedBinary, match="overlaps the import descriptor table"):
        read_path(fixture("corrupt/import_loop.dll"))


def test_truncations_of_sample_always_malformed_or_parsed(samples):
    data = need(samples, "pe64").read_bytes()
    for cut in (2, 0x3C, 0x40, 0x80, 0x100, 0x180, 0x400, 0x1000):
        with pytest.raises(MalformedBinary):
            read_bytes(data[:cut])


def test_hostile_export_count(samples):
    """NumberOfNames = 0xFFFFFFFF must fail fast, not allocate or loop."""
    data = bytearray(need(samples, "pe64").read_bytes())
    info = read_bytes(bytes(data))
    assert info.exports
    pe = struct.unpack_from("<I", data, 0x3C)[0]
    opt = pe + 24
    erva = struct.unpack_from("<I", data, opt + 112)[0]
    nsec = struct.unpack_from("<H", data, pe + 6)[0]
    sec0 = opt + struct.unpack_from("<H", data, pe + 20)[0]
    for i in range(nsec):
        _vs, va, rs, ptr = struct.unpack_from("<IIII", data, sec0 + 40 * i + 8)
        if va <= erva < va + rs:
            struct.pack_into("<I", data, ptr + erva - va + 24, 0xFFFFFFFF)
    with pytest.raises(MalformedBinary, match="names"):
        read_bytes(bytes(data))


def test_hostile_elf_section_count():
    data = bytearray(make_elf())
    struct.pack_into("<H", data, 0x3C, 0)  # e_shnum = 0 -> real count in section 0's sh_size
    # section 0's sh_size := 2**40
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    struct.pack_into("<Q", data, shoff + 32, 1 << 40)
    with pytest.raises(MalformedBinary, match="sections"):
        read_bytes(bytes(data))
