"""The host side: what this machine has for ZLUDA (docs/host.md).

    from cuda4amd.host import detect_host, load_host_report, host_gaps, readiness

    host = detect_host()                       # real probes; detect_host(probes) for doubles
    host_gaps(host, {"blas", "dnn"})           # {"blas": [...reasons...], "dnn": [...]}
    readiness(host).headline                   # "READY: ..." / "PARTLY READY: ..." / "NOT READY: ..."
    host.to_dict(); load_host_report("host.json")

Importing this package is free: its names load on first use (PEP 562), so
``from cuda4amd.host import HostReport`` costs nothing until it is used.
"""
from __future__ import annotations

import importlib
from typing import Any

#: public name -> submodule that defines it (or the full name of a module elsewhere)
_EXPORTS = {
    "detect_host": "detect",
    "REDIRECTED_FAMILIES": "gaps", "Check": "gaps", "Readiness": "gaps", "host_gaps": "gaps", "readiness": "gaps",
    "Gpu": "gpus", "ProbeRecord": "gpus",
    "CommandResult": "probes", "CtypesHipRuntime": "probes", "HipDevice": "probes", "HipRuntimeResult": "probes",
    "LocalFileSystem": "probes", "MountedFileSystem": "probes", "OsEnvironment": "probes",
    "PrivateStrings": "probes", "Probes": "probes", "RecordedCommands": "probes", "RecordedEnvironment": "probes",
    "RecordedHipRuntime": "probes", "SystemCommands": "probes",
    "GpuProfile": "cuda4amd.rules.gpus", "GpuProfiles": "cuda4amd.rules.gpus", "load_profiles": "cuda4amd.rules.gpus",
    "SCHEMA": "report", "HipRuntimeInfo": "report", "HostReport": "report", "HostReportError": "report",
    "load_host_report": "report",
    "HipSdk": "sdk", "KernelSet": "sdk", "LibraryState": "sdk",
    "ZludaInstall": "zluda",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module if "." in module else f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
