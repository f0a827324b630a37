"""The real-wheel (acceptance) tests of tests/unit/test_verdict_contract.py: CUDA wheels from PyPI, downloaded on
demand."""
from __future__ import annotations

import pytest
from conftest import by_path


@pytest.mark.acceptance
def test_nvrtc_13_wheel_is_nvrtc(scan):
    from wheelcache import Unavailable, wheel

    try:
        source = wheel("nvidia-cuda-nvrtc==13.1.115")
    except Unavailable as exc:
        pytest.skip(str(exc))
    report = scan(source)
    library = by_path(report)["nvidia/cu13/bin/x86_64/nvrtc64_130_0.dll"]
    assert library["nvidia_library"]["family"] == "nvrtc"
    assert report["verdict"] == report["packages"][0]["verdict"]


ORT = "onnxruntime-gpu==1.31.1"  # the release seen on Linux and on Windows (issue 30)


@pytest.mark.acceptance
def test_onnxruntime_gpu_linux_wheel_is_blocked(scan):
    """docs/exit-status.md rules 5 and 6 on the real Linux wheel: its CPU core (libonnxruntime.so, which only
    loads the driver by name) is ready, both execution providers are blocked (the CUDA provider's 609 kernel
    modules are SASS-only, the TensorRT provider links TensorRT): the package, and the wheel, are blocked,
    and no advice points at the CUDA provider or at a Windows package."""
    from wheelcache import LINUX, Unavailable, wheel

    try:
        source = wheel(ORT, LINUX)
    except Unavailable as exc:
        pytest.skip(f"the onnxruntime-gpu 1.31.1 manylinux_2_28_x86_64 wheel: {exc}")
    report = scan(source)
    binaries = by_path(report)
    assert binaries["onnxruntime/capi/libonnxruntime.so.1.31.1"]["verdict"] == "ready"
    assert binaries["onnxruntime/capi/libonnxruntime_providers_cuda.so"]["verdict"] == "blocked"
    assert binaries["onnxruntime/capi/libonnxruntime_providers_tensorrt.so"]["verdict"] == "blocked"
    (package,) = report["packages"]
    assert package["verdict"] == report["verdict"] == "blocked"
    assert package["counts"] == {"basis": "binaries", "ready": 0, "degraded": 0, "blocked": 2, "cpu_only": 1}
    assert package["advice"], "a replacement that runs on AMD GPUs"
    for line in package["advice"]:
        assert "CUDAExecutionProvider" not in line and "CUDA execution provider" not in line
        assert "directml" not in line and "only]" not in line  # a Linux wheel: Linux advice, unmarked
    assert "MIGraphXExecutionProvider" in package["advice"][0]
    assert len(package["advice"]) == len(set(package["advice"]))
    tensorrt = binaries["onnxruntime/capi/libonnxruntime_providers_tensorrt.so"]["reasons"]
    assert sum("use the app's non-TensorRT backend" in r for r in tensorrt) == 1  # the family's advice once
    assert not any("ONNX Runtime CUDA provider" in r for r in tensorrt)


@pytest.mark.acceptance
def test_onnxruntime_gpu_windows_cuda_provider_is_mostly_sass_only(scan):
    """The Windows CUDA provider carries PTX in 38 of its 607 kernel modules: blocked with the share said,
    not "can run, degraded"; the Windows wheel gets the Windows replacement, once."""
    from wheelcache import Unavailable, wheel

    try:
        source = wheel(ORT)
    except Unavailable as exc:
        pytest.skip(f"the onnxruntime-gpu 1.31.1 win_amd64 wheel: {exc}")
    report = scan(source)
    provider = by_path(report)["onnxruntime/capi/onnxruntime_providers_cuda.dll"]
    assert provider["verdict"] == "blocked"
    assert provider["reasons"][0] == (
        "PTX in only 38 of its 607 kernel modules: the kernels of the other 569 (94 %) carry no PTX that ZLUDA "
        "can use (it runs only PTX), so most of its GPU code cannot run under ZLUDA")
    (package,) = report["packages"]
    assert package["verdict"] == report["verdict"] == "blocked"
    assert package["advice"] == [
        'ONNX Runtime: install onnxruntime-directml instead of onnxruntime-gpu and use '
        'providers=["DmlExecutionProvider"], which runs on AMD GPUs without ZLUDA']
