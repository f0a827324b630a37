"""The real-wheel (acceptance) tests of issue 30 items 7 and 9 (tests/unit/test_sublibraries.py,
tests/unit/test_triton_backend.py): wheels from PyPI, downloaded on demand into the wheel cache."""
from __future__ import annotations

import zipfile

import pytest
from conftest import by_path

CUDNN = "nvidia-cudnn-cu12==9.28.0.42"
TRITON = "triton==3.9.0"


def cached(spec: str, platform: str):
    """The cached wheel of `spec` for "windows" (win_amd64) or "linux" (manylinux), or a skip naming it."""
    from wheelcache import LINUX, WINDOWS, Unavailable, wheel

    try:
        return wheel(spec, WINDOWS if platform == "windows" else LINUX)
    except Unavailable as exc:
        pytest.skip(f"{spec} ({'win_amd64' if platform == 'windows' else 'manylinux'}) could not be fetched: {exc}")


@pytest.mark.acceptance
@pytest.mark.parametrize("platform", ["windows", "linux"])
def test_cudnn_wheel_is_not_partial_because_of_its_sub_libraries(scan, platform):
    """cuDNN 9's sub-libraries are loaded by NVIDIA's front-end (cudnn64_9.dll / libcudnn.so.9), which ZLUDA
    replaces: the wheel is ready, not `partial / disable cuDNN`."""
    source = cached(CUDNN, platform)
    report = scan(source)
    binaries = by_path(report)
    subs = {path: b for path, b in binaries.items() if "cudnn_" in path.rsplit("/", 1)[-1]}
    assert len(subs) >= 8
    for path, b in subs.items():
        assert b["verdict"] == "ready", (path, b["reasons"])
        assert b["reasons"][0].startswith("cuDNN 9 sub-library loaded only by NVIDIA's"), path
    assert report["packages"][0]["verdict"] == "ready"
    assert report["verdict"] == "ready"
    assert not any("disable cuDNN" in r for p in report["packages"] for r in p["reasons"] + p["advice"])


@pytest.mark.acceptance
def test_cudnn_wheel_on_a_host_without_miopen_is_not_ready(scan, tmp_path):
    """ZLUDA's cuDNN goes to MIOpen: on a recorded Windows host whose HIP SDK lacks MIOpen.dll the wheel is
    blocked, and the reason says where to get MIOpen; with MIOpen.dll it is ready."""
    from test_sublibraries import recorded_host

    source = cached(CUDNN, "windows")
    without = scan(source, host=recorded_host(tmp_path / "a", miopen=False))
    assert without["packages"][0]["verdict"] == "blocked" and without["verdict"] == "blocked"
    front = by_path(without)["nvidia/cudnn/bin/cudnn64_9.dll"]
    assert front["reasons"][0].startswith("this host: cuDNN calls go to MIOpen")
    assert "install MIOpen from" in front["reasons"][0]
    assert scan(source, host=recorded_host(tmp_path / "b", miopen=True))["verdict"] == "ready"


@pytest.mark.acceptance
def test_triton_wheel_ships_the_amd_backend_beside_the_nvidia_one(scan):
    """PyPI's triton ships both backends: under ZLUDA's CUDA build of PyTorch it takes the NVIDIA one
    (emits SASS), and the report says why its AMD backend does not help."""
    source = cached(TRITON, "linux")
    names = set(zipfile.ZipFile(source).namelist())
    assert {"triton/backends/amd/driver.py", "triton/backends/nvidia/driver.py"} <= names
    report = scan(source)
    (triton,) = [p for p in report["packages"] if p["name"] == "triton"]
    (generator,) = triton["generators"]
    assert generator["backend"] == {"id": "amd", "taken": False, "emits": "hsaco", "confidence": "unverified"}
    assert triton["verdict"] == "blocked"
    sass = next(r for r in triton["reasons"] if r.startswith("Triton generates GPU code at run time as SASS"))
    assert "it ships its AMD backend too, but Triton takes it only with a ROCm build of PyTorch" in sass
