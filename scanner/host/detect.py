"""detect_host: run the probes and assemble a (redacted) HostReport."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from cuda4amd import __version__
from cuda4amd.host.gpus import ProbeRecord, detect_gpus, select_gpu
from cuda4amd.host.probes import HipRuntimeResult, Probes, pathmod
from cuda4amd.host.report import ENVIRONMENT_VARIABLES, HipRuntimeInfo, HostReport
from cuda4amd.host.sdk import LIBRARIES, HipSdk, find_sdks, select_sdk
from cuda4amd.host.zluda import find_zluda
from cuda4amd.rules.gpus import GpuProfiles, load_profiles

__all__ = ["detect_host", "override_gfx"]


def override_gfx(value: str | None) -> str | None:
    """HSA_OVERRIDE_GFX_VERSION '10.3.0' -> 'gfx1030' ('9.0.10' -> 'gfx90a')."""
    if not value:
        return None
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", value)
    if not m:
        return None
    major, minor, step = (int(x) for x in m.groups())
    if minor > 15 or step > 15:
        return None
    return f"gfx{major}{minor:x}{step:x}"


def detect_host(probes: Probes | None = None, target: str | None = None, *,
                profiles: GpuProfiles | None = None, rules: Any = None) -> HostReport:
    """Probe the machine (real probes by default) and return its host report.

    `target` (a scanned folder or file) is also searched for ZLUDA. `rules`
    (a cuda4amd RuleSet) gives the GPU profiles (unless `profiles` does) and
    names the release of a ZLUDA folder that is found; without it the
    shipped profiles are used and the rules are loaded only if ZLUDA is found. Never raises for a missing
    GPU, SDK or tool: those are findings, recorded in `HostReport.probes`."""
    probes = probes or Probes.real()
    if profiles is None:
        profiles = rules.gpus if rules is not None else load_profiles()
    platform = probes.platform
    pm = pathmod(platform)
    from cuda4amd.report.redact import Redactor  # not at import: the pipeline imports this module for every scan

    red = Redactor.for_host_report(platform, probes.env.private_strings())
    records: list[ProbeRecord] = []

    hip = probes.hip.probe() if platform == "windows" else None
    sdks, sdk_record = find_sdks(probes)
    sdk_bins = [pm.join(s.root, "bin") for s in sdks]
    detection = detect_gpus(probes, profiles, hip, sdk_bins)
    records += detection.records
    gpus = detection.gpus
    selected = select_gpu(gpus, profiles, probes.env.get("HIP_VISIBLE_DEVICES"))

    targets = [g.gfx for g in gpus if g.gfx]
    if platform == "linux":
        eff = override_gfx(probes.env.get("HSA_OVERRIDE_GFX_VERSION"))
        if eff:
            targets.append(eff)
    if targets:
        sdks, sdk_record = find_sdks(probes, targets)
    records.append(sdk_record)
    sel_sdk = select_sdk(probes, sdks)

    runtime = _hip_runtime(probes, hip, sdks[sel_sdk] if sel_sdk is not None else None)

    zluda, zrecord = find_zluda(probes, rules, target)
    records.append(zrecord)

    env = {k: red.text(v) for k in ENVIRONMENT_VARIABLES if (v := probes.env.get(k))}
    return HostReport(
        platform=platform,
        os=probes.env.os_description,
        gpus=tuple(gpus),
        selected_gpu=selected,
        hip_runtime=None if runtime is None else replace(runtime, path=red.resolved(runtime.path),
                                                          error=red.text(runtime.error)),
        sdks=tuple(replace(s, root=red.text(s.root)) for s in sdks),
        selected_sdk=sel_sdk,
        zluda=tuple(replace(z, path=red.text(z.path)) for z in zluda),
        environment=env,
        probes=tuple(ProbeRecord(r.name, r.status, red.text(r.detail)) for r in records),
        generated_by=f"cuda4amd {__version__}",
    )


def _hip_runtime(probes: Probes, hip: HipRuntimeResult | None, sdk: HipSdk | None) -> HipRuntimeInfo | None:
    pm = pathmod(probes.platform)
    if probes.platform == "windows":
        system32 = pm.join(probes.env.get("SystemRoot") or "C:\\Windows", "System32")
        on_disk = [n for n in LIBRARIES["hip"][1] if probes.fs.is_file(pm.join(system32, n))]
        if hip is not None and hip.library:
            path = pm.join(system32, hip.library) if hip.library in on_disk else None
            return HipRuntimeInfo(hip.library, "driver", path, hip.version, hip.error)
        if on_disk:
            err = hip.error if hip is not None else ""
            return HipRuntimeInfo(on_disk[0], "driver", pm.join(system32, on_disk[0]), None,
                                  err or "present but could not be loaded")
        return None
    if sdk is not None and sdk.has("hip"):
        file = sdk.libraries["hip"].file or ""
        return HipRuntimeInfo(pm.basename(file), "rocm", pm.join(sdk.root, file), sdk.full_version or sdk.version)
    return None
