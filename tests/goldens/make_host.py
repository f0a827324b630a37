"""Make tests/goldens/hosts/win-rx6700xt-hipsdk64.json, the recorded host of the golden reports.

    python tests/goldens/make_host.py

A Windows machine built from the recorded doubles of cuda4amd.host (see
fixtures/host/README.md): an RX 6700 XT (gfx1031, which AMD's rocBLAS has
no kernels for) seen by the driver's amdhip64_6.dll, HIP SDK 6.4 (real
rocBLAS file names, no MIOpen) and a ZLUDA v6-preview.69 folder on PATH.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "hosts" / "win-rx6700xt-hipsdk64.json"


def make() -> str:
    from cuda4amd.host import HipDevice, HipRuntimeResult, detect_host
    from cuda4amd.host.testing import build_tree, windows_probes
    from cuda4amd.rules.ruleset import load_rules

    rules = load_rules()
    host_fixtures = REPO / "fixtures" / "host"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        build_tree(tmp / "rocm" / "6.4", host_fixtures / "sdk" / "win-hipsdk-6.4.manifest")
        system32 = tmp / "windows" / "System32"
        system32.mkdir(parents=True)
        (system32 / "amdhip64_6.dll").write_bytes(b"MZ")
        zluda = tmp / "zluda"
        zluda.mkdir()
        driver = (host_fixtures / "zluda" / "nvcuda-zluda.stub").read_bytes()
        for f in rules.release("v6-preview.69").files:
            if f.platform == "windows" and "/" not in f.path:
                (zluda / f.path).write_bytes(driver if f.path == "nvcuda.dll" else b"MZ")
        sdk = "C:\\Program Files\\AMD\\ROCm\\6.4"
        probes = windows_probes(
            mounts={"C:\\Windows": tmp / "windows", "C:\\Program Files\\AMD\\ROCm": tmp / "rocm", "D:\\ZLUDA": zluda},
            env={"HIP_PATH": sdk + "\\", "HIP_PATH_64": sdk + "\\", "PATH": "D:\\ZLUDA"},
            hip=HipRuntimeResult(library="amdhip64_6.dll", version="6.2.41512",
                                 devices=(HipDevice("AMD Radeon RX 6700 XT", "gfx1031"),)),
        )
        return detect_host(probes, rules=rules).to_json()


if __name__ == "__main__":
    OUT.write_text(make(), encoding="utf-8")
    sys.stdout.write(f"wrote {OUT.relative_to(REPO)}\n")
