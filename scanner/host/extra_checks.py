"""The host checks added for the evidence work (docs/evidence.md), appended to
doctor's readiness: which GPU ZLUDA uses (zluda_device), HIP runtime vs HIP SDK
(hip_versions), ZLUDA's files since the fix (integrity)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from cuda4amd.host.gaps import Readiness
from cuda4amd.host.hip_versions import version_checks
from cuda4amd.host.integrity import zluda_file_checks
from cuda4amd.host.report import HostReport
from cuda4amd.host.zluda_device import device_checks

__all__ = ["with_extra_checks"]


def with_extra_checks(host: HostReport, ready: Readiness, target: str | None = None) -> Readiness:
    releases = tuple(dict.fromkeys(r for z in host.zluda for r in z.releases))
    extra = device_checks(host) + version_checks(host, releases)
    if target:
        root = Path(target)
        extra += zluda_file_checks(root.parent if root.is_file() else root)
    return dataclasses.replace(ready, checks=tuple(ready.checks) + tuple(extra)) if extra else ready
