"""Which GPU ZLUDA will use, and how to choose another.

ZLUDA's CUDA device N is HIP device N: ``cuDeviceGet`` calls
``hipDeviceGet(device, ordinal)`` and ``cuDeviceGetCount`` calls
``hipGetDeviceCount`` (vosen/ZLUDA v6, zluda/src/impl/device.rs:13-14 and
461-462), and ZLUDA documents no device switch of its own (docs/src at v6:
none). Most CUDA programs take device 0, so ZLUDA uses the HIP runtime's
first visible device. HIP's GPU isolation variables choose it: on Windows
``HIP_VISIBLE_DEVICES``, on Linux ``ROCR_VISIBLE_DEVICES`` (AMD's
recommendation; ``HIP_VISIBLE_DEVICES`` works there too) — ROCm
documentation, "HIP environment variables", GPU isolation
(rocm.docs.amd.com/projects/HIP/en/latest/reference/env_variables.html).
"""
from __future__ import annotations

from cuda4amd.host.gaps import Check
from cuda4amd.host.report import HostReport

__all__ = ["device_checks", "isolation_variable"]


def isolation_variable(platform: str) -> str:
    return "HIP_VISIBLE_DEVICES" if platform == "windows" else "ROCR_VISIBLE_DEVICES"


def _first_visible(host: HostReport) -> int | None:
    """Index into host.gpus of HIP device 0 after the isolation variables, when the HIP indices are known."""
    indexed = [(g.hip_index, i) for i, g in enumerate(host.gpus) if g.hip_index is not None]
    if not indexed:
        return None
    for var in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        value = host.environment.get(var)
        if value:
            first = value.split(",")[0].strip()
            if first.isdigit():
                return next((i for hip, i in indexed if hip == int(first)), None)
    return min(indexed)[1]


def device_checks(host: HostReport) -> list[Check]:
    """One check when the machine has several GPUs: which one ZLUDA will use."""
    if len(host.gpus) < 2:
        return []
    var = isolation_variable(host.platform)
    used = _first_visible(host)
    if used is None:
        return [Check("gpu", "warning", f"{len(host.gpus)} GPUs: ZLUDA uses HIP device 0, and which one that is "
                      "could not be told (no HIP device numbers)",
                      f"list the HIP devices (hipInfo / rocminfo), then set {var} to the one you want")]
    gpu = host.gpus[used]
    kind = "integrated" if gpu.integrated else "discrete" if gpu.integrated is False else "GPU"
    discrete = [(i, g) for i, g in enumerate(host.gpus) if g.integrated is False and i != used]
    if gpu.integrated and discrete:
        _, other = discrete[0]
        step = f"set {var}={other.hip_index}" if other.hip_index is not None else f"set {var} to its HIP number"
        return [Check("gpu", "warning", f"ZLUDA will use the integrated {gpu.name} ({gpu.gfx or '?'}), HIP device "
                      f"{gpu.hip_index}, not the discrete {other.name}", f"{step} before starting the program")]
    return [Check("gpu", "info", f"ZLUDA will use {gpu.name} ({gpu.gfx or '?'}, {kind}), HIP device "
                  f"{gpu.hip_index}; {var} chooses another")]
