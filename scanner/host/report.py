"""The host report: what cuda4amd knows about a machine, as data.

``HostReport.to_dict()`` / ``HostReport.from_dict()`` round-trip through JSON
(schema ``cuda4amd.host/1``, documented in docs/host.md), so a report
recorded on one machine can judge an application for it elsewhere
(``cuda4amd scan --host FILE.json``). Paths in a report are already redacted
(no home folder, user or host name); ``from_dict`` validates strictly and
raises ``HostReportError``. The ``readiness`` object that ``doctor --format
json`` adds is accepted and ignored (it is derived: ``gaps.readiness``
recomputes it with the reader's GPU profiles).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cuda4amd.host.gpus import Gpu, ProbeRecord
from cuda4amd.host.sdk import KERNEL_LIBRARIES, LIBRARIES, HipSdk, KernelSet, LibraryState
from cuda4amd.host.zluda import ZludaInstall

__all__ = [
    "ENVIRONMENT_VARIABLES",
    "GPU_SOURCES",
    "PROBE_STATUSES",
    "SCHEMA",
    "HipRuntimeInfo",
    "HostReport",
    "HostReportError",
    "load_host_report",
]

SCHEMA = "cuda4amd.host/1"
PLATFORMS = ("windows", "linux")
GPU_SOURCES = ("hip-runtime", "hipinfo", "cim", "kfd", "rocminfo", "rocm_agent_enumerator")
PROBE_STATUSES = ("ok", "empty", "not-found", "error", "skipped")
#: environment variables a report records (values redacted); nothing else is kept
ENVIRONMENT_VARIABLES = ("HIP_PATH", "ROCM_PATH", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                         "CUDA_VISIBLE_DEVICES", "HSA_OVERRIDE_GFX_VERSION", "CUDA4AMD_ZLUDA")


class HostReportError(ValueError):
    """An invalid host report: `path` (may be None) and the problem."""

    def __init__(self, path: str | PathLike[str] | None, message: str) -> None:
        self.path = Path(path) if path is not None else None
        self.message = message
        super().__init__(f"{self.path}: {message}" if self.path else message)

    def __reduce__(self) -> tuple[type[HostReportError], tuple[Path | None, str]]:
        return (type(self), (self.path, self.message))


@dataclass(frozen=True)
class HipRuntimeInfo:
    """The HIP runtime ZLUDA's nvcuda loads: the driver's amdhip64_*.dll on
    Windows, ROCm's libamdhip64.so on Linux."""

    library: str
    source: str                       # "driver" | "rocm"
    path: str | None = None
    version: str | None = None
    error: str = ""


@dataclass(frozen=True)
class HostReport:
    platform: str
    os: str = ""
    gpus: tuple[Gpu, ...] = ()
    selected_gpu: int | None = None
    hip_runtime: HipRuntimeInfo | None = None
    sdks: tuple[HipSdk, ...] = ()
    selected_sdk: int | None = None
    zluda: tuple[ZludaInstall, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    probes: tuple[ProbeRecord, ...] = ()
    generated_by: str = ""
    schema: str = SCHEMA

    @property
    def gpu(self) -> Gpu | None:
        return self.gpus[self.selected_gpu] if self.selected_gpu is not None else None

    @property
    def sdk(self) -> HipSdk | None:
        return self.sdks[self.selected_sdk] if self.selected_sdk is not None else None

    # -- serialisation ----------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "generated_by": self.generated_by,
            "platform": self.platform,
            "os": self.os,
            "gpus": [_gpu_to_dict(g) for g in self.gpus],
            "selected_gpu": self.selected_gpu,
            "hip_runtime": None if self.hip_runtime is None else {
                "library": self.hip_runtime.library, "source": self.hip_runtime.source,
                "path": self.hip_runtime.path, "version": self.hip_runtime.version,
                "error": self.hip_runtime.error,
            },
            "hip_sdks": [_sdk_to_dict(s) for s in self.sdks],
            "selected_sdk": self.selected_sdk,
            "zluda": [{
                "path": z.path, "where": list(z.where), "files": list(z.files), "releases": list(z.releases),
                "matched": z.matched, "evidence": list(z.evidence),
            } for z in self.zluda],
            "environment": dict(sorted(self.environment.items())),
            "probes": [{"name": p.name, "status": p.status, "detail": p.detail} for p in self.probes],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any, path: str | PathLike[str] | None = None) -> HostReport:
        v = _Validator(path)
        d = v.table("report", data, required={"schema": str, "platform": str},
                    optional={"generated_by": str, "os": str, "gpus": list, "selected_gpu": (int, type(None)),
                              "hip_runtime": (dict, type(None)), "hip_sdks": list,
                              "selected_sdk": (int, type(None)), "zluda": list, "environment": dict,
                              "probes": list, "readiness": dict})
        if d["schema"] != SCHEMA:
            v.fail(f"schema must be {SCHEMA!r}, got {d['schema']!r}")
        platform = v.choice("platform", d["platform"], PLATFORMS)
        gpus = tuple(_gpu_from_dict(v, f"gpus[{i}]", g) for i, g in enumerate(d.get("gpus", [])))
        sdks = tuple(_sdk_from_dict(v, f"hip_sdks[{i}]", s, platform) for i, s in enumerate(d.get("hip_sdks", [])))
        sel_gpu = v.index("selected_gpu", d.get("selected_gpu"), len(gpus))
        sel_sdk = v.index("selected_sdk", d.get("selected_sdk"), len(sdks))
        rt = None
        if d.get("hip_runtime") is not None:
            r = v.table("hip_runtime", d["hip_runtime"], required={"library": str, "source": str},
                        optional={"path": (str, type(None)), "version": (str, type(None)), "error": str})
            rt = HipRuntimeInfo(r["library"], v.choice("hip_runtime.source", r["source"], ("driver", "rocm")),
                                r.get("path"), r.get("version"), r.get("error", ""))
        zl = []
        for i, z in enumerate(d.get("zluda", [])):
            z = v.table(f"zluda[{i}]", z, required={"path": str},
                        optional={"where": list, "files": list, "releases": list, "matched": str, "evidence": list})
            zl.append(ZludaInstall(z["path"], v.strings(f"zluda[{i}].where", z.get("where", [])),
                                   v.strings(f"zluda[{i}].files", z.get("files", [])),
                                   v.strings(f"zluda[{i}].releases", z.get("releases", [])),
                                   z.get("matched", ""), v.strings(f"zluda[{i}].evidence", z.get("evidence", []))))
        env = d.get("environment", {})
        for k, val in env.items():
            if k not in ENVIRONMENT_VARIABLES or not isinstance(val, str):
                v.fail(f"environment: {k!r} must be one of {', '.join(ENVIRONMENT_VARIABLES)} with a string value")
        probes = []
        for i, p in enumerate(d.get("probes", [])):
            p = v.table(f"probes[{i}]", p, required={"name": str, "status": str}, optional={"detail": str})
            probes.append(ProbeRecord(p["name"], v.choice(f"probes[{i}].status", p["status"], PROBE_STATUSES),
                                      p.get("detail", "")))
        return cls(platform=platform, os=d.get("os", ""), gpus=gpus, selected_gpu=sel_gpu, hip_runtime=rt,
                   sdks=sdks, selected_sdk=sel_sdk, zluda=tuple(zl), environment=MappingProxyType(dict(env)),
                   probes=tuple(probes), generated_by=d.get("generated_by", ""), schema=d["schema"])

    @classmethod
    def from_json(cls, text: str, path: str | PathLike[str] | None = None) -> HostReport:
        try:
            data = json.loads(text)
        except ValueError as e:
            raise HostReportError(path, f"not valid JSON: {e}") from None
        return cls.from_dict(data, path)


def load_host_report(path: str | PathLike[str]) -> HostReport:
    """Read a recorded host report (the JSON of `cuda4amd doctor --format json`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise HostReportError(path, f"cannot read: {e.strerror or e}") from None
    return HostReport.from_json(text, path)


# ---------------------------------------------------------------------------
# pieces
# ---------------------------------------------------------------------------

def _gpu_to_dict(g: Gpu) -> dict[str, Any]:
    return {"name": g.name, "gfx": g.gfx, "target": g.target, "source": g.source, "integrated": g.integrated,
            "hip_index": g.hip_index, "pci_id": g.pci_id, "memory_gb": g.memory_gb,
            "driver_version": g.driver_version}


def _gpu_from_dict(v: _Validator, where: str, data: Any) -> Gpu:
    g = v.table(where, data, required={"name": str, "source": str},
                optional={"gfx": (str, type(None)), "target": (str, type(None)), "integrated": (bool, type(None)),
                          "hip_index": (int, type(None)), "pci_id": (str, type(None)),
                          "memory_gb": (int, float, type(None)), "driver_version": (str, type(None))})
    gfx = g.get("gfx")
    if gfx is not None and not re.fullmatch(r"gfx[0-9a-f]{3,4}", gfx):
        v.fail(f"{where}.gfx must look like 'gfx1100', got {gfx!r}")
    pci = g.get("pci_id")
    if pci is not None and not re.fullmatch(r"[0-9A-F]{4}", pci):
        v.fail(f"{where}.pci_id must be 4 upper-case hex digits, got {pci!r}")
    mem = g.get("memory_gb")
    return Gpu(name=g["name"], gfx=gfx, source=v.choice(f"{where}.source", g["source"], GPU_SOURCES),
               integrated=g.get("integrated"), target=g.get("target"), hip_index=g.get("hip_index"),
               pci_id=pci, memory_gb=float(mem) if mem is not None else None,
               driver_version=g.get("driver_version"))


def _sdk_to_dict(s: HipSdk) -> dict[str, Any]:
    return {
        "path": s.root,
        "version": s.version,
        "full_version": s.full_version,
        "found_by": list(s.found_by),
        "libraries": {k: {"present": st.present, "file": st.file} for k, st in s.libraries.items()},
        "kernels": {k: {"dir": ks.dir, "archs": list(ks.archs),
                        "files": {g: list(names) for g, names in ks.files.items()}}
                    for k, ks in s.kernels.items()},
    }


def _sdk_from_dict(v: _Validator, where: str, data: Any, platform: str) -> HipSdk:
    s = v.table(where, data, required={"path": str, "libraries": dict},
                optional={"version": (str, type(None)), "full_version": (str, type(None)), "found_by": list,
                          "kernels": dict})
    libs = {}
    for k, st in s["libraries"].items():
        if k not in LIBRARIES:
            v.fail(f"{where}.libraries: unknown library {k!r} (known: {', '.join(LIBRARIES)})")
        st = v.table(f"{where}.libraries.{k}", st, required={"present": bool}, optional={"file": (str, type(None))})
        libs[k] = LibraryState(st["present"], st.get("file"))
    kernels = {}
    for k, ks in s.get("kernels", {}).items():
        if k not in KERNEL_LIBRARIES:
            v.fail(f"{where}.kernels: unknown library {k!r} (known: {', '.join(KERNEL_LIBRARIES)})")
        ks = v.table(f"{where}.kernels.{k}", ks, required={}, optional={"dir": (str, type(None)), "archs": list,
                                                                          "files": dict})
        files = {}
        for gfx, names in ks.get("files", {}).items():
            files[gfx] = v.strings(f"{where}.kernels.{k}.files.{gfx}", names)
        kernels[k] = KernelSet(ks.get("dir"), v.strings(f"{where}.kernels.{k}.archs", ks.get("archs", [])),
                               MappingProxyType(files))
    return HipSdk(root=s["path"], platform=platform, version=s.get("version"), full_version=s.get("full_version"),
                  found_by=v.strings(f"{where}.found_by", s.get("found_by", [])),
                  libraries=MappingProxyType(libs), kernels=MappingProxyType(kernels))


class _Validator:
    def __init__(self, path: str | PathLike[str] | None) -> None:
        self.path = path

    def fail(self, message: str) -> None:
        raise HostReportError(self.path, message)

    def table(self, where: str, obj: Any, required: Mapping[str, Any], optional: Mapping[str, Any]) -> dict:
        if not isinstance(obj, dict):
            self.fail(f"{where}: expected an object, got {type(obj).__name__}")
        for k in obj:
            if k not in required and k not in optional:
                self.fail(f"{where}: unknown key {k!r}")
        for k in required:
            if k not in obj:
                self.fail(f"{where}: missing key {k!r}")
        for k, val in obj.items():
            types = required.get(k) or optional[k]
            types = types if isinstance(types, tuple) else (types,)
            if isinstance(val, bool) and bool not in types:
                self.fail(f"{where}.{k}: wrong type bool")
            if not isinstance(val, types):
                self.fail(f"{where}.{k}: wrong type {type(val).__name__}")
        return obj

    def choice(self, where: str, value: str, allowed: tuple[str, ...]) -> str:
        if value not in allowed:
            self.fail(f"{where} must be one of {', '.join(allowed)}, got {value!r}")
        return value

    def index(self, where: str, value: int | None, length: int) -> int | None:
        if value is not None and not 0 <= value < length:
            self.fail(f"{where}: {value} is not an index of the {length} entries")
        return value

    def strings(self, where: str, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            self.fail(f"{where}: expected a list of strings")
        return tuple(value)
