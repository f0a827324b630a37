"""`cuda4amd doctor --run`: the smoke probes on this machine, through the ZLUDA that
doctor found (the first of the host report's ZLUDA folders), else through whatever
the system's loader finds (NVIDIA's libraries on an NVIDIA machine).

Through ZLUDA the probes start the way ZLUDA's README says a program is run:
Windows ``zluda.exe -- program`` when the folder has zluda.exe, else the folder
first on PATH; Linux the folder first on LD_LIBRARY_PATH (README.md, "Usage",
vosen/ZLUDA@v6). Each library is tried as that folder's file first, then by name.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cuda4amd.evidence.probes.common import DEFAULT_NAMES
from cuda4amd.evidence.runner import ORDER, Outcome, run_probes

if TYPE_CHECKING:
    from cuda4amd.host.report import HostReport

__all__ = ["machine_probes"]


def machine_probes(report: HostReport, *, limit: float = 60.0, progress: Callable[[Outcome], None] | None = None,
                   families: Sequence[str] = ORDER) -> tuple[str, dict | None, list[Outcome]]:
    """(through, zluda folder record or None, outcomes)."""
    platform = "windows" if os.name == "nt" else "linux"
    zluda = next((z for z in report.zluda if Path(z.path).is_dir()), None)
    env = dict(os.environ)
    prefix: list[str] = []
    names: dict[str, list[str]] = {}
    if zluda is None:
        outcomes = run_probes(families, limit=limit, progress=progress)
        return "default loader", None, outcomes
    folder = Path(zluda.path)
    for family in families:
        names[family] = [str(folder / n) for n in DEFAULT_NAMES[platform][family] if (folder / n).exists()] + \
            list(DEFAULT_NAMES[platform][family])
    if platform == "windows":
        launcher = folder / "zluda.exe"
        if launcher.is_file():
            prefix = [str(launcher), "--"]
        env["PATH"] = os.pathsep.join([str(folder), env.get("PATH", "")])
    else:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(folder), env.get("LD_LIBRARY_PATH", "")) if p)
    outcomes = run_probes(families, names=names, prefix=prefix, env=env, limit=limit, progress=progress)
    return "zluda", {"path": zluda.path, "releases": list(zluda.releases)}, outcomes
