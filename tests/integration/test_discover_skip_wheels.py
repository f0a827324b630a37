"""The real-wheel (acceptance) tests of tests/unit/test_discover_skip.py: CUDA wheels from PyPI, downloaded on demand."""
from __future__ import annotations

import pytest
from test_discover_skip import same_with_and_without_skip


@pytest.mark.acceptance
@pytest.mark.parametrize("spec", ["cupy-cuda12x==14.2.0", "ctranslate2==4.8.5", "nvidia-cuda-runtime-cu12==12.9.79",
                                  "nvidia-cufft-cu12==11.4.1.4"])
def test_real_wheel_reports_do_not_depend_on_the_skip(spec, monkeypatch):
    from wheelcache import Unavailable, unpacked, wheel

    try:
        same_with_and_without_skip(unpacked(spec), monkeypatch)
        same_with_and_without_skip(wheel(spec), monkeypatch)
    except Unavailable as exc:
        pytest.skip(str(exc))
