"""AMD GPU profiles: what each ``gfx`` target means for ZLUDA (rules/gpus.toml).

    profiles = load_profiles()                 # the shipped rules/gpus.toml
    p = profiles.get("gfx1031")                # GpuProfile or None
    profiles.gfx_for_name("AMD Radeon RX 6700 XT")   # "gfx1031"
    profiles.gfx_for_pci_id("73DF")                  # "gfx1031"

Frozen dataclasses, no module state; invalid data raises
``cuda4amd.rules.RulesError(path, message)`` like every other rule file.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from cuda4amd.rules.validate import (
    Provenance,
    RulesError,
    check,
    check_platform,
    is_bool,
    is_nonempty_str,
    is_str,
    is_str_list,
    read_provenance,
    read_toml,
    rows,
    shipped_rules_dir,
    top_level,
)

__all__ = [
    "FAMILIES",
    "GPU_PROFILES_FILE",
    "PITFALL_IDS",
    "GpuProfile",
    "GpuProfiles",
    "base_gfx",
    "gfx_from_target_version",
    "gfx_major",
    "load_profiles",
    "normalize_model",
    "zluda_capable",
]

#: path of the shipped file, relative to the rules folder
GPU_PROFILES_FILE = Path("gpus.toml")
FAMILIES: tuple[str, ...] = ("rdna4", "rdna3", "rdna2", "rdna1", "gcn5", "gcn4")
#: platform pitfalls the host code refers to; the shipped file must define them
PITFALL_IDS: tuple[str, ...] = ("hsa-override-windows", "miopen-windows", "hip-path-windows",
                                 "miopen-install-windows", "miopen-install-linux")

_GFX_RE = re.compile(r"^gfx[0-9a-f]{3,4}$")
_PCI_RE = re.compile(r"^[0-9A-F]{4}$")
_VERSION_RE = re.compile(r"^\d+(\.\d+)*$")


@dataclass(frozen=True)
class GpuProfile:
    gfx: str
    generation: str
    family: str
    integrated: bool
    wave32: bool
    upstream_zluda: bool
    windows_hip_sdk: bool
    windows_hip_sdk_note: str = ""
    example_models: str = ""
    models: tuple[str, ...] = ()
    pci_ids: tuple[str, ...] = ()
    no_official_rocblas: tuple[str, ...] = ()
    linux_override: str = ""
    min_windows_hip_sdk: str = ""
    notes: str = ""
    pitfalls: tuple[str, ...] = ()

    @property
    def is_gcn(self) -> bool:
        return self.family.startswith("gcn")

    def official_rocblas(self, platform: str) -> bool:
        """False where AMD's official rocBLAS builds are known to carry no kernels."""
        return platform not in self.no_official_rocblas


@dataclass(frozen=True, eq=False)
class GpuProfiles:
    profiles: Mapping[str, GpuProfile]
    pitfalls: Mapping[str, tuple[str, str]]  # id -> (platform, text)
    provenance: Provenance | None = None
    #: the provenance of extra rules folders' gpus.toml files merged in
    extra: tuple[Provenance, ...] = ()
    _by_name: Mapping[str, str] = field(default_factory=dict, init=False, repr=False)
    _by_pci: Mapping[str, str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        by_name: dict[str, str] = {}
        by_pci: dict[str, str] = {}
        for p in self.profiles.values():
            for m in p.models:
                by_name.setdefault(normalize_model(m), p.gfx)
            for pid in p.pci_ids:
                by_pci.setdefault(pid, p.gfx)
        object.__setattr__(self, "_by_name", MappingProxyType(by_name))
        object.__setattr__(self, "_by_pci", MappingProxyType(by_pci))

    def get(self, gfx: str | None) -> GpuProfile | None:
        if not gfx:
            return None
        return self.profiles.get(base_gfx(gfx))

    def gfx_for_name(self, name: str) -> str | None:
        """The gfx of a marketing/adapter name ("AMD Radeon RX 7900 XTX"), exact
        after normalisation; None for generic names ("AMD Radeon(TM) Graphics")."""
        return self._by_name.get(normalize_model(name))

    def gfx_for_pci_id(self, device_id: str) -> str | None:
        return self._by_pci.get(device_id.upper().removeprefix("0X").zfill(4))

    def pitfall(self, pitfall_id: str) -> str:
        return self.pitfalls[pitfall_id][1]


_NOISE = re.compile(r"\((?:tm|r)\)|™|®|\b(?:amd|ati|series|graphics)\b")


def normalize_model(name: str) -> str:
    """'AMD Radeon(TM) RX 580 Series' -> 'radeon rx 580'."""
    s = _NOISE.sub(" ", name.lower())
    s = re.sub(r"[^a-z0-9]+", " ", s)
    return " ".join(s.split())


def base_gfx(target: str) -> str:
    """'gfx1030:sramecc-:xnack-' -> 'gfx1030'; 'gfx906-xnack-' -> 'gfx906'."""
    return re.split(r"[:\-]", target.strip(), maxsplit=1)[0].lower()


def gfx_major(gfx: str) -> int:
    """gfx1100 -> 11, gfx906 / gfx90a -> 9 (0 when it cannot be read)."""
    digits = base_gfx(gfx)[3:]
    return int(digits[:-2]) if len(digits) >= 3 and digits[:-2].isdigit() else 0


def zluda_capable(profiles: GpuProfiles, gfx: str | None) -> bool | None:
    """Whether upstream ZLUDA can target `gfx`: the profile says; without one,
    gfx10+ (RDNA, wave32) yes and gfx6-9 (GCN/CDNA, wave64) no; None if no gfx."""
    if not gfx:
        return None
    prof = profiles.get(gfx)
    if prof is not None:
        return prof.upstream_zluda
    return gfx_major(gfx) >= 10


def gfx_from_target_version(value: int) -> str | None:
    """KFD's gfx_target_version (major*10000 + minor*100 + stepping) -> 'gfx1100';
    90010 -> 'gfx90a'. None for 0 (CPU nodes) and nonsense."""
    if value <= 0:
        return None
    major, rest = divmod(value, 10000)
    minor, stepping = divmod(rest, 100)
    if major < 6 or minor > 15 or stepping > 15:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


_GPU_REQUIRED = {"gfx": is_nonempty_str, "generation": is_nonempty_str, "family": is_str,
                 "integrated": is_bool, "wave32": is_bool, "upstream_zluda": is_bool,
                 "windows_hip_sdk": is_bool}
_GPU_OPTIONAL = {"windows_hip_sdk_note": is_str, "example_models": is_str, "models": is_str_list,
                 "pci_ids": is_str_list, "no_official_rocblas": is_str_list, "linux_override": is_str,
                 "min_windows_hip_sdk": is_str, "notes": is_str, "pitfalls": is_str_list}
_PITFALL_REQUIRED = {"id": is_nonempty_str, "platform": is_str, "text": is_nonempty_str}


def load_profiles(path: str | os.PathLike[str] | None = None, *, base: GpuProfiles | None = None) -> GpuProfiles:
    """Parse and validate a GPU profiles file (default: the shipped one).

    With `base` (the profiles loaded so far), the file is an extra rules
    folder's `gpus.toml`: its [[gpu]] rows add profiles or replace the base's
    profile of the same gfx, its [[pitfall]] rows add or replace by id, and
    it needs neither (the shipped file must have both)."""
    path = Path(path) if path is not None else shipped_rules_dir() / GPU_PROFILES_FILE
    doc = read_toml(path)
    prov = read_provenance(path, doc)
    top_level(path, doc, ("provenance", "gpu", "pitfall"))
    profiles: dict[str, GpuProfile] = {}
    for i, row in enumerate(rows(path, doc, "gpu")):
        profile = _gpu_row(path, i, row)
        if profile.gfx in profiles:
            raise RulesError(path, f"duplicate gpu {profile.gfx!r}")
        profiles[profile.gfx] = profile
    pitfalls: dict[str, tuple[str, str]] = {}
    for i, row in enumerate(rows(path, doc, "pitfall")):
        where = f"pitfall #{i + 1}"
        check(path, where, row, _PITFALL_REQUIRED)
        check_platform(path, where, row["platform"])
        if row["id"] in pitfalls:
            raise RulesError(path, f"duplicate pitfall {row['id']!r}")
        pitfalls[row["id"]] = (row["platform"], row["text"])
    if base is not None:
        profiles = {**base.profiles, **profiles}
        pitfalls = {**base.pitfalls, **pitfalls}
    _check_unique_names(path, profiles)
    missing = [p for p in PITFALL_IDS if p not in pitfalls]
    if missing:
        raise RulesError(path, f"missing [[pitfall]] rows the host checks use: {', '.join(missing)}")
    if not profiles:
        raise RulesError(path, "no [[gpu]] rows")
    return GpuProfiles(MappingProxyType(profiles), MappingProxyType(pitfalls),
                       prov if base is None else base.provenance, (*(base.extra if base else ()), prov))


def _gpu_row(path: Path, i: int, row: object) -> GpuProfile:
    where = f"gpu #{i + 1}"
    if isinstance(row, dict) and isinstance(row.get("gfx"), str):
        where = f"gpu {row['gfx']!r}"
    fields = check(path, where, row, _GPU_REQUIRED, _GPU_OPTIONAL)
    gfx = fields["gfx"]
    if not _GFX_RE.match(gfx):
        raise RulesError(path, f"{where}: gfx must look like 'gfx1100', got {gfx!r}")
    if fields["family"] not in FAMILIES:
        raise RulesError(path, f"{where}: family must be one of {', '.join(FAMILIES)}, got {fields['family']!r}")
    if fields["upstream_zluda"] and not fields["wave32"]:
        raise RulesError(path, f"{where}: upstream_zluda needs wave32 (upstream ZLUDA compiles for wave32)")
    for m in fields.get("models", ()):
        if not normalize_model(m):
            raise RulesError(path, f"{where}: model {m!r} is empty after normalisation")
    for pid in fields.get("pci_ids", ()):
        if not _PCI_RE.match(pid):
            raise RulesError(path, f"{where}: pci id must be 4 upper-case hex digits, got {pid!r}")
    for plat in fields.get("no_official_rocblas", ()):
        check_platform(path, f"{where} no_official_rocblas", plat)
    for key in ("linux_override", "min_windows_hip_sdk"):
        if fields.get(key) and not _VERSION_RE.match(fields[key]):
            raise RulesError(path, f"{where}: {key} must be a version like '10.3.0', got {fields[key]!r}")
    return GpuProfile(
        gfx=gfx,
        generation=fields["generation"],
        family=fields["family"],
        integrated=fields["integrated"],
        wave32=fields["wave32"],
        upstream_zluda=fields["upstream_zluda"],
        windows_hip_sdk=fields["windows_hip_sdk"],
        windows_hip_sdk_note=fields.get("windows_hip_sdk_note", ""),
        example_models=fields.get("example_models", ""),
        models=tuple(fields.get("models", ())),
        pci_ids=tuple(fields.get("pci_ids", ())),
        no_official_rocblas=tuple(fields.get("no_official_rocblas", ())),
        linux_override=fields.get("linux_override", ""),
        min_windows_hip_sdk=fields.get("min_windows_hip_sdk", ""),
        notes=fields.get("notes", ""),
        pitfalls=tuple(fields.get("pitfalls", ())),
    )


def _check_unique_names(path: Path, profiles: Mapping[str, GpuProfile]) -> None:
    """A model name or PCI id names one gfx only (across every loaded file)."""
    names: dict[str, str] = {}
    pcis: dict[str, str] = {}
    for gfx, profile in profiles.items():
        where = f"gpu {gfx!r}"
        for m in profile.models:
            key = normalize_model(m)
            if names.get(key, gfx) != gfx:
                raise RulesError(path, f"{where}: model {m!r} is already a model of {names[key]}")
            names[key] = gfx
        for pid in profile.pci_ids:
            if pcis.get(pid, gfx) != gfx:
                raise RulesError(path, f"{where}: pci id {pid} is already an id of {pcis[pid]}")
            pcis[pid] = gfx
