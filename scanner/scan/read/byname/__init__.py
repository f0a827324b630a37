"""CUDA libraries a binary loads *by name* (LoadLibrary / dlopen / ctypes).

Most CUDA software does not import its CUDA libraries: the CUDA runtime
loads ``nvcuda.dll`` by name, frameworks load cuDNN, cuBLAS and NVRTC with
LoadLibrary/dlopen/ctypes. Their names are strings in the binary's data::

    refs = find_library_names(buf, info, rules)   # buf: the mmap/bytes read_path read
    # (NameReference(name='cudnn64_9.dll', encoding='ascii', template=False), ...)

The modules, in the order a search uses them:

    find       the search of one binary (find_library_names), start to end
    sections   where names are looked for: data sections, fat binary containers skipped, pieces
    names      the syntax of a name (suffix, templates) and which names are CUDA (expand_template)
    patterns   the compiled patterns of a RuleSet (NamePatterns) and the plan chosen per binary
    tries      regex tries and anchor covers for many whole strings at once
    strings    plain strings: names ending in .dll/.so, and the whole strings of assembled names
    cython     Cython's compressed string tables (zlib/bz2 through the standard library)
    lzss       Cython 3.3's own LZSS, which no standard codec decodes
    limits     the work limits per binary (hostile files)

What counts
-----------
ASCII and UTF-16LE strings ending in ``.dll`` (any case) or ``.so[.N...]``
that the rules classify as CUDA on the binary's platform (PE -> "windows",
ELF -> "linux"), and name templates (names.py). So ``libnvrtc.so`` inside a
Windows DLL's error message is not reported. Bare stems alone
(``ctypes.util.find_library("cudnn")``) are not reported; stems count only
as parts of names assembled at run time (below).

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

Errors, memory, speed
---------------------
Hostile files are bounded per binary (limits.py: suffix hits and whole
strings, occurrences of Cython's markers, candidate blobs, decompressed
bytes); going over raises :class:`~cuda4amd.scan.read.binview.MalformedBinary`.
Anything unexpected also surfaces as MalformedBinary, never another
exception type.

The buffer is searched in place (regex/find over the mmap, slices of at
most a few hundred bytes around each hit); Python allocations stay around
0.1 MB plus one decompressed table.

All names are searched at once, never a ``find`` per name (patterns.py,
tries.py); fat binary containers are found by memchr for the magic's last
byte. Measured with ``tools/byname_bench.py --against e42b906 --repeat 7
PATH...`` (min of 7 runs, interleaved with the previous version on a shared
2-core machine; identical results on all 625 binaries of the wheels below,
a Windows and a Linux site-packages and fixtures/), seconds before -> after:
libllvmlite.so (llvmlite 0.50.0) 0.807 -> 0.134, libtriton.so (triton 3.9.0)
0.587 -> 0.099, libjax_common.so (jaxlib 0.12.0.1) 0.259 -> 0.046,
xla_cuda_plugin.so (jax-cuda13-pjrt 0.12.0.1) 0.236 -> 0.055,
libtorch_cpu.so (torch 2.14.1) 0.209 -> 0.042, libtorch_cuda.so 0.033 ->
0.014, libcurand.so.10 (deep) 0.084 -> 0.046; all 625: 2.87 -> 0.96.
"""
from __future__ import annotations

from cuda4amd.model import NameReference
from cuda4amd.scan.read.byname.cython import LZSS_MARKER, ZLIB_MARKER
from cuda4amd.scan.read.byname.find import ENCODINGS, find_library_names, platform_of_info
from cuda4amd.scan.read.byname.names import expand_template
from cuda4amd.scan.read.byname.patterns import NamePatterns
from cuda4amd.scan.read.byname.sections import PE_SECTIONS

__all__ = [
    "ENCODINGS",
    "LZSS_MARKER",
    "PE_SECTIONS",
    "ZLIB_MARKER",
    "NamePatterns",
    "NameReference",
    "expand_template",
    "find_library_names",
    "platform_of_info",
]
