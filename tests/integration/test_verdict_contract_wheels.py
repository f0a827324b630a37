"""The real-wheel (acceptance) tests of tests/unit/test_verdict_contract.py: CUDA wheels from PyPI, downloaded on demand."""
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
