"""The real-wheel (acceptance) tests of tests/unit/test_pages_ahead.py: CUDA wheels from PyPI, downloaded on demand."""
from __future__ import annotations

import pytest
from test_pages_ahead import CUBLAS, recorded

from cuda4amd.scan.read import fatbin, pages
from cuda4amd.scan.read.engine import read_buffer
from cuda4amd.scan.read.fatbin import analyse_kernels


@pytest.mark.acceptance
@pytest.mark.parametrize("platform, member", [("win_amd64", "nvidia/cublas/bin/cublasLt64_12.dll"),
                                              ("linux", "nvidia/cublas/lib/libcublasLt.so.12")])
def test_cublaslt_walked_with_its_headers_asked_ahead_reports_the_same(platform, member, monkeypatch):
    """cuBLASLt's 3,015 containers, walked as from a cold disk: the same report, every header asked for."""
    from wheelcache import LINUX, Unavailable, unpacked

    try:
        path = unpacked(CUBLAS, LINUX if platform == "linux" else platform) / member
    except Unavailable as exc:
        pytest.skip(f"{CUBLAS} ({platform}) is not in the wheel cache and could not be fetched: {exc}")
    buf = recorded(path)
    info = read_buffer(buf, exports=False)
    as_it_came = analyse_kernels(buf, info, deep=True)  # asked ahead or not, as the page cache had it
    asked: list[tuple[int, int]] = []
    ask = pages.Pages.ask
    monkeypatch.setattr(pages.Pages, "ask", lambda self, ranges: (asked.extend(ranges), ask(self, ranges))[1])
    faults = iter(range(1_000_000_000))
    monkeypatch.setattr(fatbin, "disk_faults", lambda: next(faults))
    assert analyse_kernels(buf, info, deep=True) == as_it_came
    assert as_it_came.containers > 3000 and len({start for start, _ in asked}) >= len(as_it_came.entries) * 0.9
    buf.close()
