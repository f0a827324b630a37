"""Does the HIP runtime ZLUDA loads match the HIP SDK whose libraries it redirects to?

Windows: ZLUDA's driver loads ``amdhip64_7.dll`` from v6-preview on
(ext/hip_runtime-sys/build.rs:3 ``/DELAYLOAD:amdhip64_7.dll`` at v6,
v6-preview.69 and v7-preview.9) and ``amdhip64_6`` at v5 (build.rs:6).
The HIP SDK's libraries (rocBLAS, hipBLASLt, rocSPARSE, MIOpen) load the HIP
runtime of the SDK's major version. Two majors in one process break it:
ZLUDA's own comment, "First we load ROCm 7 runtime / Later on a performance
library (rocBLAS) loads ROCm 6 runtime / Things explode"
(zluda_windows/src/lib.rs:380-384 at v6), where it works around the case
by loading those libraries first when they are beside it or in HIP_PATH.
Linux: ZLUDA links the unversioned ``libamdhip64`` (build.rs:5 at v6), so the
runtime found first on the library path must be the one of the ROCm whose
libraries are used.
"""
from __future__ import annotations

import re

from cuda4amd.host.gaps import Check
from cuda4amd.host.report import HostReport

__all__ = ["RUNTIME_MAJOR_FOR_RELEASE", "version_checks"]

#: ZLUDA release -> the amdhip64_N.dll its Windows driver loads (build.rs, cited above)
RUNTIME_MAJOR_FOR_RELEASE = {"v5": 6, "v6-preview.69": 7, "v6": 7, "v7-preview.9": 7}


def _major(text: str | None) -> int | None:
    match = re.match(r"\s*(\d+)", text or "")
    return int(match.group(1)) if match else None


def _runtime_major(host: HostReport) -> int | None:
    rt = host.hip_runtime
    if rt is None:
        return None
    named = re.search(r"amdhip64_(\d+)\.dll", rt.library or "", re.I) or re.search(r"\.so\.(\d+)", rt.library or "")
    return int(named.group(1)) if named else _major(rt.version)


def version_checks(host: HostReport, releases: tuple[str, ...] = ()) -> list[Check]:
    rt, sdk = host.hip_runtime, host.sdk
    if rt is None or sdk is None:
        return []
    runtime, sdk_major = _runtime_major(host), _major(sdk.version)
    checks = []
    if runtime is not None and sdk_major is not None and runtime != sdk_major:
        if host.platform == "windows":
            checks.append(Check("hip-runtime", "warning",
                                f"the driver's HIP runtime is {rt.library} ({rt.version or 'version unknown'}), the "
                                f"HIP SDK is {sdk.version}: its libraries load HIP {sdk_major}, so one process would "
                                f"hold two HIP runtimes (ZLUDA v6 and newer load the SDK's libraries first to avoid "
                                f"it; older releases do not)",
                                f"install the HIP SDK {runtime}.x to match the driver, or the driver of HIP "
                                f"{sdk_major}"))
        else:
            checks.append(Check("hip-runtime", "warning",
                                f"the HIP runtime found first ({rt.path or rt.library}, {rt.version or '?'}) is not "
                                f"the one of ROCm {sdk.full_version or sdk.version} in {sdk.root}",
                                f"put {sdk.root}/lib first on LD_LIBRARY_PATH (or remove the other ROCm)"))
    if host.platform == "windows" and runtime is not None:
        for tag in releases:
            need = RUNTIME_MAJOR_FOR_RELEASE.get(tag)
            if need is not None and need != runtime:
                checks.append(Check("hip-runtime", "missing",
                                    f"ZLUDA {tag} loads amdhip64_{need}.dll; the driver provides {rt.library}",
                                    f"use a ZLUDA release built for HIP {runtime}, or a driver with HIP {need}"))
    return checks
