"""The host in the verdict: recorded host reports turn redirected routes into reasons."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, by_path

from cuda4amd.cli import main
from cuda4amd.host import HipDevice, HipRuntimeResult, detect_host
from cuda4amd.host.testing import build_tree, windows_probes

ROCM = "C:\\Program Files\\AMD\\ROCm"
HIP_ENV = {"HIP_PATH": ROCM + "\\6.4\\", "HIP_PATH_64": ROCM + "\\6.4\\"}

#: where the host gap of cuDNN says to get MIOpen on Windows (rules/gpus.toml [[pitfall]] miopen-install-windows)
MIOPEN_WINDOWS = ("install MIOpen from a HIP SDK build that ships MIOpen.dll (the official AMD HIP SDK does not): "
                  "ZLUDA's docs name TheRock's ROCm SDK nightly tarballs (therock-dist-windows-gfx<arch> from "
                  "therock-nightly-tarball.s3.amazonaws.com), unpacked with HIP_PATH set to that folder "
                  "(vosen/ZLUDA docs/src/hip_sdk.md)")


def recorded_host(tmp_path, name: str, gfx: str) -> str:
    """A Windows machine with HIP SDK 6.4 (real rocBLAS file names), as `doctor --format json` saves it."""
    build_tree(tmp_path / "rocm" / "6.4", FIXTURES / "host" / "sdk" / "win-hipsdk-6.4.manifest")
    windir = tmp_path / "windows"
    (windir / "System32").mkdir(parents=True)
    (windir / "System32" / "amdhip64_6.dll").write_bytes(b"MZ")
    hip = HipRuntimeResult(library="amdhip64_6.dll", version="6.2.41512", devices=(HipDevice(name, gfx),))
    probes = windows_probes(mounts={"C:\\Windows": windir, ROCM: tmp_path / "rocm"}, env=HIP_ENV, hip=hip)
    path = tmp_path / f"{gfx}.json"
    path.write_text(detect_host(probes).to_json())
    return str(path)


def scan_json(*args) -> dict:
    result = CliRunner().invoke(main, ["scan", *map(str, args), "--format", "json"])
    assert result.exit_code in (0, 3, 4, 9), result.output
    return json.loads(result.output)


def test_gfx1031_has_no_rocblas_kernels(tmp_path):
    report = scan_json(FIXTURES / "demo" / "Tool", "--host", recorded_host(tmp_path, "AMD Radeon RX 6700 XT", "gfx1031"))
    binaries = by_path(report)
    assert report["basis"] == "judged for the recorded host gfx1031.json (AMD Radeon RX 6700 XT, gfx1031, HIP SDK 6.4)"
    assert report["host"]["gpus"][0]["gfx"] == "gfx1031"
    render = binaries["render.dll"]
    assert render["verdict"] == "blocked"
    assert render["reasons"][0] == "this host: cuBLAS calls go to rocBLAS, which has no kernels for gfx1031 (AMD ships none for this GPU)" \
        ": add third-party Tensile kernels for gfx1031 to the SDK's bin\\rocblas\\library"
    assert binaries["tool.exe"]["verdict"] == "blocked"  # it needs render.dll
    denoise = binaries["plugins/denoise.dll"]
    assert denoise["reasons"] == ["this host: cuDNN calls go to MIOpen, which this HIP SDK (6.4, Windows) does not "
                                  "include: " + MIOPEN_WINDOWS]
    assert report["verdict"] == "blocked"


def test_rx7900xtx_serves_cublas_but_not_cudnn(tmp_path):
    report = scan_json(FIXTURES / "demo" / "Tool", "--host", recorded_host(tmp_path, "AMD Radeon RX 7900 XTX", "gfx1100"))
    verdicts = {path: b["verdict"] for path, b in by_path(report).items()}
    assert verdicts == {
        "plugins/denoise.dll": "blocked",
        "plugins/trt_export.dll": "blocked",
        "render.dll": "degraded",
        "tool.exe": "degraded",
    }


def test_no_host_is_software_only(tmp_path):
    report = scan_json(FIXTURES / "demo" / "Tool", "--host", "none")
    assert report["host"] is None
    assert report["basis"].startswith("software-only")


def test_this_machine_without_amd_gpu_gives_a_software_only_verdict():
    report = scan_json(FIXTURES / "demo" / "Tool")
    if report["host"]["gpus"]:
        pytest.skip("this machine has an AMD GPU")
    assert report["basis"].startswith("software-only: no AMD GPU or HIP SDK was found on this machine")
    assert report["verdict"] == "partial"


def test_a_bad_host_report_is_an_input_error(tmp_path):
    bad = tmp_path / "host.json"
    bad.write_text('{"schema": "something else"}')
    result = CliRunner().invoke(main, ["scan", str(FIXTURES / "demo" / "Tool"), "--host", str(bad)])
    assert result.exit_code == 2
    assert "host.json" in result.output
