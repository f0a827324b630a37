"""CUDA driver functions a binary names for resolving at run time.

Libraries that load the driver themselves (NCCL, cuRAND, cuSOLVER, CuPy's
driver module, anything linking the CUDA runtime statically) never import
`cuMemCreate` and friends: they pass the names to `cuGetProcAddress` or
`dlsym`/`GetProcAddress`, so the names sit in their read-only data as
NUL-terminated strings.

    found = find_driver_names(buf, info)
    found.names          # ('cuCtxCreate', 'cuMemCreate', …): the binary's own
    found.runtime_table  # how many names belonged to the CUDA runtime's table

The CUDA runtime (cudart, shared or linked in statically) carries a table
of every driver entry point it wraps — about 490 names in cudart 12 —
which says nothing about what the binary calls. It is recognised by its
shape, not by file name: a run of driver names packed back to back (only
NUL padding between them) that includes per-thread-default-stream variants
(`…_ptds`, `…_ptsz`). cudart resolves both variants of every stream
function, for `--default-stream per-thread`; a library's own loader asks
for the plain name (cuGetProcAddress picks the variant through its flags).
Measured: cudart64_12.dll 12.9 (one run of 495, 69 of them _ptds/_ptsz),
curand64_10.dll 10.3.5 (485/66), ctranslate2.dll 4.8.5 (495/69), libnccl.so.2
2.19.3 (runs of 373/56 and 60/10, and NCCL's own cudawrap.cc table, 29
names without variants); CuPy's driver module names 25, none in a run with
variants.
"""
from __future__ import annotations

import re

from cuda4amd.model import BinaryInfo, DriverNames
from cuda4amd.scan.read.binview import Buffer
from cuda4amd.scan.read.pages import CHUNK, Pages

__all__ = ["DATA_SECTIONS", "DriverNames", "find_driver_names"]

#: where string literals live (PE, ELF)
DATA_SECTIONS = frozenset({".rdata", ".rodata", ".data.rel.ro", ".lrodata"})
#: a driver entry point: `cu` + capital + identifier, NUL-terminated, starting a string
#: (led by the literal "cu": sre skips to the next "cu" in C, and the lookbehind for the NUL before it
#: rejects the others there too; a NUL-led pattern started a match at every NUL, a third of an NVIDIA
#: library's read-only data, which took 0.34 of the 2.6 s that reading the device's venv took)
_NAME = re.compile(rb"cu(?<=\x00cu)[A-Z][A-Za-z0-9_]{1,95}\x00")
_FIRST = re.compile(rb"cu[A-Z][A-Za-z0-9_]{1,95}\x00")  # a name at the very start of a section
#: the longest name with the NUL before it
_LONGEST = 1 + 2 + 1 + 95 + 1
_THREAD_VARIANTS = (b"_ptds\x00", b"_ptsz\x00")
#: cap against hostile input: this many names per binary at most
MAX_NAMES = 200_000


def find_driver_names(buf: Buffer, info: BinaryInfo) -> DriverNames:
    """Driver function names in the read-only data of one binary (bounded; never raises for content)."""
    size = len(buf)
    pages = Pages(buf)
    own: set[str] = set()
    runtime = 0
    seen = 0
    for section in info.sections:
        if section.name not in DATA_SECTIONS:
            continue
        start = max(0, section.file_offset)
        length = section.file_size
        if section.virtual_size and section.virtual_size < length:
            length = section.virtual_size
        end = min(size, start + max(0, length))
        run: list[bytes] = []
        last_end = -1
        if start >= end:
            continue
        head = _FIRST.match(buf, start, end)
        if head is not None:
            run.append(head.group())
            last_end = head.end()
        pos = last_end - 1 if head is not None else start  # a closing NUL leads the next name
        mark = start
        while True:
            # at most CHUNK bytes a search, the pages read handed back behind it
            limit = min(end, pos + max(CHUNK, 2 * _LONGEST))
            match = _NAME.search(buf, pos + 1, limit)  # its NUL at pos or later
            if match is None:
                if limit >= end:
                    break
                pos = max(pos, limit - _LONGEST + 1)  # a name that starts in the last bytes and runs on
                pages.release(mark, pos)
                mark = pos
                continue
            seen += 1
            if seen > MAX_NAMES:
                break
            first = match.start()
            if run and buf[last_end:first].strip(b"\0"):
                runtime += _close(run, own)
                run = []
            run.append(match.group())
            last_end = match.end()
            pos = last_end - 1
            if pos - mark >= CHUNK:
                pages.release(mark, pos)
                mark = pos
        runtime += _close(run, own)
        if end - start > CHUNK:
            pages.release(mark, end)
    return DriverNames(tuple(sorted(own)), runtime)


def _close(run: list[bytes], own: set[str]) -> int:
    """Add a finished run's names to `own` unless it is the runtime's table; return how many were left out."""
    if any(name.endswith(_THREAD_VARIANTS) for name in run):
        return len(run)
    own.update(name[:-1].decode("ascii") for name in run)
    return 0
