"""Is ZLUDA already on this machine? In the scanned target, on PATH, or configured.

The rules carry no per-file hashes of ZLUDA releases (ZLUDA publishes none,
and only the archive of v6-preview.69 is pinned), so a folder is recognised
by what it holds:

* a file only ZLUDA ships (``zluda.exe``, ``zluda_redirect.dll``,
  ``zluda_with.exe``, ``libzluda_ld.so``, ``zluda_ld``, ...), or
* ZLUDA's driver library (``nvcuda.dll`` / ``libcuda.so.1``) whose bytes
  contain ``zluda`` — ZLUDA's DLLs name their own crates — and not NVIDIA's
  version resource.

The release is then guessed from the release tables (``cuda4amd.rules``):
every release whose top-level files include all the ZLUDA file names present
is named (v6-preview.69 and v6 have the same names, so both appear); when
none does, the closest ones are named and the match says so.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cuda4amd.host.gpus import ProbeRecord
from cuda4amd.host.probes import Probes, pathmod, split_path_list, unique

__all__ = ["CONFIG_VARIABLE", "DRIVER_FILES", "SIGNATURE_FILES", "ZludaInstall", "find_zluda"]

#: files only a ZLUDA release has, per platform
SIGNATURE_FILES = {
    "windows": ("zluda.exe", "zluda_with.exe", "zluda_redirect.dll", "zluda_trace.dll", "zluda64_server.exe",
                "zluda_precompile.exe"),
    "linux": ("libzluda_ld.so", "zluda_ld", "libzluda_trace.so", "zluda_precompile"),
}
#: ZLUDA's driver library (the one a CUDA app loads)
DRIVER_FILES = {"windows": ("nvcuda.dll",), "linux": ("libcuda.so.1", "libcuda.so", "libnvcuda.so")}
#: cuda4amd's own setting: a folder holding ZLUDA
CONFIG_VARIABLE = "CUDA4AMD_ZLUDA"
ZLUDA_MARKER = b"zluda"
NVIDIA_MARKERS = (b"NVIDIA Corporation", "NVIDIA Corporation".encode("utf-16-le"))


@dataclass(frozen=True)
class ZludaInstall:
    path: str                              # folder (redacted in a report)
    where: tuple[str, ...]                 # "target", "PATH", "CUDA4AMD_ZLUDA", "LD_LIBRARY_PATH", "LD_AUDIT"
    files: tuple[str, ...]                 # ZLUDA file names present (top level of the folder)
    releases: tuple[str, ...] = ()         # best-matching release tags (empty: none matches)
    matched: str = ""                      # e.g. "all 12 ZLUDA file names present are in v6-preview.69 / v6"
    evidence: tuple[str, ...] = ()


def _release_files(rules: Any, platform: str) -> dict[str, set[str]]:
    out = {}
    for tag in rules.release_tags:
        rel = rules.release(tag)
        names = {f.path.lower() if platform == "windows" else f.path
                 for f in rel.files if f.platform == platform and "/" not in f.path}
        if names:
            out[tag] = names
    return out


def _inspect(probes: Probes, folder: str, release_files: Callable[[], dict[str, set[str]]]) -> ZludaInstall | None:
    fs = probes.fs
    pm = pathmod(probes.platform)
    if not fs.is_dir(folder):
        return None
    plat = probes.platform
    names = fs.listdir(folder)
    key = (lambda n: n.lower()) if plat == "windows" else (lambda n: n)
    present = {key(n): n for n in names}
    evidence = [f"{present[key(s)]} present" for s in SIGNATURE_FILES[plat] if key(s) in present]
    driver = next((present[key(d)] for d in DRIVER_FILES[plat] if key(d) in present), None)
    if not evidence:
        if driver is None:
            return None
        path = pm.join(folder, driver)
        size = fs.size(path)
        # NVIDIA's driver (tens of MB) names its maker in its first kilobyte (byte 616 of
        # libcuda.so.580.159.04 and of the CUDA 13 compat libcuda.so.580.95.05 on the device
        # machine) and never ZLUDA: each NVIDIA marker is looked for on its own, the read ending
        # where it is found, and only a file with neither is read through for ZLUDA's (where a
        # ZLUDA marker first read NVIDIA's 92 MB through, twice: 0.25 s of every scan there)
        if any(fs.find_markers(path, (marker,)) for marker in NVIDIA_MARKERS) or not fs.find_markers(
                path, (ZLUDA_MARKER,)):
            return None
        mb = f"{size / 2**20:.1f} MB, " if size is not None else ""
        evidence.append(f"{driver} ({mb}names ZLUDA in its bytes, not NVIDIA's version resource)")
    tables = release_files()
    zluda_names = set().union(*tables.values()) if tables else set()
    files = tuple(sorted((present[k] for k in present if k in zluda_names), key=str.lower))
    releases: tuple[str, ...] = ()
    matched = ""
    zp = set(present) & zluda_names
    if tables and zp:
        consistent = [t for t, ns in tables.items() if zp <= ns]
        if consistent:
            releases = tuple(consistent)
            matched = f"all {len(zp)} ZLUDA file names present are in {' / '.join(releases)}"
        else:
            best = max(len(zp & ns) for ns in tables.values())
            releases = tuple(t for t, ns in tables.items() if len(zp & ns) == best)
            matched = f"{best} of the {len(zp)} ZLUDA file names present are in {' / '.join(releases)} (closest)"
    evidence.append("identified by file names and content: the rules carry no per-file hashes of ZLUDA releases")
    return ZludaInstall(path=folder, where=(), files=files, releases=releases, matched=matched,
                        evidence=tuple(evidence))


def find_zluda(probes: Probes, rules: Any = None, target: str | None = None) -> tuple[list[ZludaInstall], ProbeRecord]:
    """ZLUDA folders: the scan `target` (its folder and a `zluda` sub-folder),
    cuda4amd's CUDA4AMD_ZLUDA setting, PATH, and on Linux LD_LIBRARY_PATH and
    LD_AUDIT. `rules` is a cuda4amd RuleSet (loaded on first need)."""
    pm = pathmod(probes.platform)
    env = probes.env
    places: list[tuple[str, str]] = []
    if target:
        folder = target if probes.fs.is_dir(target) else pm.dirname(target)
        places += [(folder, "target"), (pm.join(folder, "zluda"), "target")]
    if env.get(CONFIG_VARIABLE):
        places.append((env.get(CONFIG_VARIABLE) or "", CONFIG_VARIABLE))
    if probes.platform == "linux":
        audit = env.get("LD_AUDIT") or ""
        for item in split_path_list(audit, "linux"):
            if "zluda" in pm.basename(item):
                places.append((pm.dirname(item), "LD_AUDIT"))
        places += [(p, "LD_LIBRARY_PATH") for p in split_path_list(env.get("LD_LIBRARY_PATH"), "linux")]
    places += [(p, "PATH") for p in split_path_list(env.get("PATH"), probes.platform)]

    cache: dict[str, dict[str, set[str]]] = {}

    def release_files() -> dict[str, set[str]]:
        if "t" not in cache:
            nonlocal rules
            if rules is None:
                from cuda4amd.rules.ruleset import load_rules

                rules = load_rules()
            cache["t"] = _release_files(rules, probes.platform)
        return cache["t"]

    found: dict[str, ZludaInstall] = {}
    order: list[str] = []
    for folder in unique([p for p, _ in places], probes.platform):
        hows = tuple(dict.fromkeys(h for p, h in places
                                   if pm.normcase(pm.normpath(p)) == pm.normcase(pm.normpath(folder))))
        z = _inspect(probes, folder, release_files)
        if z is not None:
            key = pm.normcase(pm.normpath(folder))
            found[key] = ZludaInstall(z.path, hows, z.files, z.releases, z.matched, z.evidence)
            order.append(key)
    installs = [found[k] for k in order]
    where = "the target, " if target else ""
    where += f"{CONFIG_VARIABLE}, PATH" + (", LD_LIBRARY_PATH, LD_AUDIT" if probes.platform == "linux" else "")
    if installs:
        return installs, ProbeRecord("zluda", "ok", f"{len(installs)} ZLUDA folder(s)")
    return installs, ProbeRecord("zluda", "not-found", f"looked in {where}")
