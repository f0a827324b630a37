"""HIP SDK / ROCm: where it is, its version, and the libraries ZLUDA redirects to.

Windows: ``HIP_PATH``, every ``HIP_PATH_xx`` (the installer sets
``HIP_PATH_64`` for 6.4, ``HIP_PATH_71`` for 7.1), and
``%ProgramFiles%\\AMD\\ROCm\\<version>``; the version comes from
``bin\\.hipVersion`` (else the folder name); libraries are DLLs in ``bin``
and the per-arch kernels in ``bin\\rocblas\\library`` / ``bin\\hipblaslt\\library``.
ZLUDA looks for the libraries next to itself, then in ``%HIP_PATH%\\bin``, so
the SDK ``HIP_PATH`` names is the one that counts.

Linux: ``ROCM_PATH``, ``HIP_PATH``, ``/opt/rocm`` and ``/opt/rocm-*``; the
version from ``.info/version``; libraries in ``lib`` (``lib64``) and kernels in
``lib/rocblas/library`` / ``lib/hipblaslt/library``.

Per-arch kernel files are the ones rocBLAS/hipBLASLt load for a GPU:
``TensileLibrary*_<gfx>*`` (lazy ``.dat``, ``.co``, ``.hsaco``) and
``Kernels.so-000-<gfx>*.hsaco``. An arch "has kernels" when a
``TensileLibrary`` file names it.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from cuda4amd.host.gpus import ProbeRecord
from cuda4amd.host.probes import Probes, pathmod

__all__ = [
    "KERNEL_LIBRARIES",
    "LIBRARIES",
    "HipSdk",
    "KernelSet",
    "LibraryState",
    "files_for_arch",
    "find_sdks",
    "kernel_archs",
    "parse_hip_version_file",
    "select_sdk",
    "version_key",
]

#: library key -> (human name, Windows file names, Linux file-name regex)
LIBRARIES: Mapping[str, tuple[str, tuple[str, ...], str]] = MappingProxyType({
    "rocblas": ("rocBLAS", ("rocblas.dll",), r"^librocblas\.so(\.\d+)*$"),
    "hipblaslt": ("hipBLASLt", ("hipblaslt.dll",), r"^libhipblaslt\.so(\.\d+)*$"),
    "rocsparse": ("rocSPARSE", ("rocsparse.dll",), r"^librocsparse\.so(\.\d+)*$"),
    "miopen": ("MIOpen", ("MIOpen.dll",), r"^libMIOpen\.so(\.\d+)*$"),
    "hip": ("HIP runtime", ("amdhip64_7.dll", "amdhip64_6.dll"), r"^libamdhip64\.so(\.\d+)*$"),
})
#: libraries whose GPU code is in per-arch files next to them: key -> sub-folder
KERNEL_LIBRARIES: Mapping[str, str] = MappingProxyType({"rocblas": "rocblas/library",
                                                         "hipblaslt": "hipblaslt/library"})

_TENSILE_ARCH = re.compile(r"^TensileLibrary.*?_(gfx[0-9a-f]{3,4})(?=[-_.:]|$)")
_KERNELS_ARCH = re.compile(r"^Kernels\.so-\d+-(gfx[0-9a-f]{3,4})(?=[-_.:]|$)")
_HIP_PATH_VAR = re.compile(r"^HIP_PATH_(\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class LibraryState:
    present: bool
    file: str | None = None      # path relative to the SDK root, e.g. "bin\\rocblas.dll"


@dataclass(frozen=True)
class KernelSet:
    """Per-arch files of one library: `archs` that have TensileLibrary files,
    and for the GPUs asked about, the file names for their gfx."""

    dir: str | None                              # relative to the SDK root; None: folder absent
    archs: tuple[str, ...] = ()
    files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def has(self, gfx: str) -> bool:
        return gfx in self.archs


@dataclass(frozen=True)
class HipSdk:
    root: str                                    # not yet redacted (detect redacts for the report)
    platform: str
    version: str | None                          # "6.4"
    full_version: str | None                     # "6.4.50101" / "6.4.1-83"
    found_by: tuple[str, ...]
    libraries: Mapping[str, LibraryState]
    kernels: Mapping[str, KernelSet]

    def has(self, library: str) -> bool:
        st = self.libraries.get(library)
        return bool(st and st.present)

    @property
    def label(self) -> str:
        plat = "Windows" if self.platform == "windows" else "Linux"
        return f"{self.version or 'unknown version'}, {plat}"


def parse_hip_version_file(text: str) -> tuple[str | None, str | None]:
    """bin/.hipVersion ('HIP_VERSION_MAJOR=5' ...) -> ('5.7', '5.7.32000')."""
    vals = dict(re.findall(r"^\s*(HIP_VERSION_(?:MAJOR|MINOR|PATCH))\s*=\s*(\S+)", text, re.MULTILINE))
    major, minor = vals.get("HIP_VERSION_MAJOR"), vals.get("HIP_VERSION_MINOR")
    if not (major and minor and major.isdigit() and minor.isdigit()):
        return None, None
    short = f"{int(major)}.{int(minor)}"
    patch = vals.get("HIP_VERSION_PATCH")
    return short, f"{short}.{patch}" if patch else short


def version_key(version: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version or "")[:3]) or (-1,)


def kernel_archs(names: Sequence[str]) -> dict[str, list[str]]:
    """gfx -> file names, from a rocblas/hipblaslt 'library' folder listing."""
    out: dict[str, list[str]] = {}
    for n in names:
        m = _TENSILE_ARCH.match(n) or _KERNELS_ARCH.match(n)
        if m:
            out.setdefault(m.group(1), []).append(n)
    return out


def files_for_arch(names: Sequence[str], gfx: str) -> tuple[str, ...]:
    return tuple(sorted(kernel_archs(names).get(gfx, [])))


def _tensile_archs(names: Sequence[str]) -> tuple[str, ...]:
    archs = {m.group(1) for n in names if (m := _TENSILE_ARCH.match(n))}
    return tuple(sorted(archs, key=lambda g: (len(g), g)))


@dataclass(frozen=True)
class _Candidate:
    root: str
    found_by: list[str]


def _windows_candidates(probes: Probes) -> list[_Candidate]:
    pm = pathmod("windows")
    env = probes.env
    cands: dict[str, _Candidate] = {}

    def add(path: str, how: str) -> None:
        path = path.strip().strip('"').rstrip("\\/")
        if not path:
            return
        key = pm.normcase(pm.normpath(path))
        c = cands.setdefault(key, _Candidate(pm.normpath(path), []))
        if how not in c.found_by:
            c.found_by.append(how)

    if env.get("HIP_PATH"):
        add(env.get("HIP_PATH") or "", "HIP_PATH")
    for name in env.names():
        if _HIP_PATH_VAR.match(name):
            add(env.get(name) or "", name.upper())
    pf = env.get("ProgramFiles") or "C:\\Program Files"
    base = pm.join(pf, "AMD", "ROCm")
    for d in probes.fs.listdir(base):
        if re.match(r"^\d+\.\d+", d):
            add(pm.join(base, d), "%ProgramFiles%\\AMD\\ROCm")
    return list(cands.values())


def _linux_candidates(probes: Probes) -> list[_Candidate]:
    pm = pathmod("linux")
    cands: dict[str, _Candidate] = {}

    def add(path: str, how: str) -> None:
        path = path.strip().rstrip("/") or "/"
        key = pm.normpath(path)
        c = cands.setdefault(key, _Candidate(key, []))
        if how not in c.found_by:
            c.found_by.append(how)

    for var in ("ROCM_PATH", "HIP_PATH"):
        if probes.env.get(var):
            add(probes.env.get(var) or "", var)
    if probes.fs.is_dir("/opt/rocm"):
        add("/opt/rocm", "/opt/rocm")
    for d in probes.fs.listdir("/opt"):
        if re.match(r"^rocm-\d", d):
            add(f"/opt/{d}", "/opt/rocm-*")
    return list(cands.values())


def _lib_dirs(probes: Probes, root: str) -> list[str]:
    pm = pathmod(probes.platform)
    if probes.platform == "windows":
        return [pm.join(root, "bin")]
    return [d for d in (pm.join(root, "lib"), pm.join(root, "lib64")) if probes.fs.is_dir(d)]


def _sdk_version(probes: Probes, root: str) -> tuple[str | None, str | None]:
    """(major.minor, the full version) of the SDK at `root`: from its version file (Windows
    bin/.hipVersion, Linux .info/version), else from the folder's name (`ROCm/6.4`, `rocm-6.4.1`)."""
    pm = pathmod(probes.platform)
    fs = probes.fs
    version = full = None
    if probes.platform == "windows":
        text = fs.read_text(pm.join(root, "bin", ".hipVersion"), limit=4096)
        if text:
            version, full = parse_hip_version_file(text)
    else:
        text = fs.read_text(pm.join(root, ".info", "version"), limit=256)
        if text and re.match(r"^\d+\.\d+", text.strip()):
            full = text.strip().splitlines()[0]
            version = ".".join(re.findall(r"\d+", full)[:2])
    if version is None:
        m = re.search(r"(\d+\.\d+)(\.\d+)?$", pm.basename(root))
        if m:
            version, full = m.group(1), m.group(0)
    return version, full


def _inspect(probes: Probes, cand: _Candidate, gfx_targets: Sequence[str]) -> HipSdk | None:
    pm = pathmod(probes.platform)
    fs = probes.fs
    root = cand.root
    if not fs.is_dir(root):
        return None
    lib_dirs = _lib_dirs(probes, root)
    if not lib_dirs or not any(fs.is_dir(d) for d in lib_dirs):
        return None
    version, full = _sdk_version(probes, root)
    listing = {d: fs.listdir(d) for d in lib_dirs}
    libraries: dict[str, LibraryState] = {}
    for key, (_, win_names, linux_re) in LIBRARIES.items():
        state = LibraryState(False)
        for d, names in listing.items():
            if probes.platform == "windows":
                lower = {n.lower(): n for n in names}
                hit = next((lower[w.lower()] for w in win_names if w.lower() in lower), None)
            else:
                rx = re.compile(linux_re)
                hits = sorted((n for n in names if rx.match(n)), key=len)
                hit = hits[0] if hits else None
            if hit:
                state = LibraryState(True, pm.relpath(pm.join(d, hit), root))
                break
        libraries[key] = state
    kernels: dict[str, KernelSet] = {}
    for key, sub in KERNEL_LIBRARIES.items():
        ks = KernelSet(None)
        for d in lib_dirs:
            kdir = pm.join(d, *sub.split("/"))
            if fs.is_dir(kdir):
                names = fs.listdir(kdir)
                ks = KernelSet(pm.relpath(kdir, root), _tensile_archs(names),
                               MappingProxyType({g: files_for_arch(names, g) for g in dict.fromkeys(gfx_targets)}))
                break
        kernels[key] = ks
    if not any(st.present for st in libraries.values()) and not any(k.dir for k in kernels.values()):
        return None
    return HipSdk(root=root, platform=probes.platform, version=version, full_version=full,
                  found_by=tuple(cand.found_by), libraries=MappingProxyType(libraries),
                  kernels=MappingProxyType(kernels))


def find_sdks(probes: Probes, gfx_targets: Sequence[str] = ()) -> tuple[list[HipSdk], ProbeRecord]:
    """Every HIP SDK / ROCm installation found, with per-arch files for `gfx_targets`."""
    cands = _windows_candidates(probes) if probes.platform == "windows" else _linux_candidates(probes)
    sdks = [s for s in (_inspect(probes, c, gfx_targets) for c in cands) if s is not None]
    if sdks:
        detail = "; ".join(f"{s.version or '?'} via {', '.join(s.found_by)}" for s in sdks)
        return sdks, ProbeRecord("hip-sdk", "ok", detail)
    where = ("HIP_PATH, HIP_PATH_xx, %ProgramFiles%\\AMD\\ROCm" if probes.platform == "windows"
             else "ROCM_PATH, HIP_PATH, /opt/rocm, /opt/rocm-*")
    looked = [c.root for c in cands]
    detail = f"looked in {where}" + (f" ({len(looked)} candidate folder(s) without HIP libraries)" if looked else "")
    return [], ProbeRecord("hip-sdk", "not-found", detail)


def select_sdk(probes: Probes, sdks: Sequence[HipSdk]) -> int | None:
    """The SDK ZLUDA would use: HIP_PATH's on Windows, ROCM_PATH's (else
    /opt/rocm) on Linux; otherwise the newest."""
    if not sdks:
        return None
    prefer = ("HIP_PATH",) if probes.platform == "windows" else ("ROCM_PATH", "/opt/rocm", "HIP_PATH")
    for how in prefer:
        for i, s in enumerate(sdks):
            if how in s.found_by:
                return i
    return max(range(len(sdks)), key=lambda i: version_key(sdks[i].full_version or sdks[i].version))
