"""The real-wheel (acceptance) tests of tests/unit/test_fatbin.py: CUDA wheels from PyPI, downloaded on demand."""
from __future__ import annotations

import pytest
from test_fatbin import (
    CTRANSLATE2,
    CUBLAS,
    CUBLAS_SASS,
    CUBLASLT_CASK_SASS,
    CUBLASLT_SASS,
    CUPY,
    CUPY_SASS,
    analyse_file,
    tree,
)

from cuda4amd.scan.read import fatbin


@pytest.mark.acceptance
@pytest.mark.parametrize("member", [
    "cupy/cuda/cub.cp312-win_amd64.pyd",
    "cupy/cuda/thrust.cp312-win_amd64.pyd",
    "cupy/random/_generator_api.cp312-win_amd64.pyd",
])
def test_cupy_extensions_carry_ptx(member):
    report, _ = analyse_file(tree(CUPY) / member)
    assert report.state == "ptx-available"
    assert report.containers == 1 and report.sections == (".nv_fatb",)
    assert len(report.entries) == 13
    assert report.sass_archs == CUPY_SASS
    assert report.ptx_archs == (("sm_100", "8.8"),)
    assert report.compressed


@pytest.mark.acceptance
def test_ctranslate2_kernels_carry_ptx():
    report, _ = analyse_file(tree(CTRANSLATE2) / "ctranslate2" / "ctranslate2.dll")
    assert report.state == "ptx-available"
    assert (report.containers, len(report.entries)) == (34, 272)
    assert report.sass_archs == ("sm_53", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86")
    assert report.ptx_archs == (("sm_86", "8.7"),)


@pytest.mark.acceptance
def test_cublas_dlls():
    bin_dir = tree(CUBLAS) / "nvidia" / "cublas" / "bin"
    cublas, _ = analyse_file(bin_dir / "cublas64_12.dll", deep=True)
    assert (cublas.containers, len(cublas.entries), cublas.sections) == (198, 1780, (".nv_fatb",))
    assert cublas.sass_archs == CUBLAS_SASS
    assert cublas.ptx_archs == (("sm_120", "8.7"),)

    cheap, t_cheap = analyse_file(bin_dir / "cublasLt64_12.dll")
    assert (cheap.containers, len(cheap.entries)) == (3015, 5967)
    assert cheap.sass_archs == CUBLASLT_SASS
    assert cheap.ptx_archs == (("sm_52", "8.8"), ("sm_120", "8.7"), ("sm_120", "8.8"))

    deep, t_deep = analyse_file(bin_dir / "cublasLt64_12.dll", deep=True)
    assert deep.sections == (".nv_fatb", ".cask_re")
    assert (deep.containers, len(deep.entries)) == (3015 + 469, 5967 + 469)
    cask = [e for e in deep.entries if e.section == ".cask_re"]
    assert {e.kind for e in cask} == {"sass"}
    assert tuple(sorted({e.arch for e in cask}, key=fatbin.arch_sort_key)) == CUBLASLT_CASK_SASS
    assert deep.ptx_archs == cheap.ptx_archs
    print(f"cublasLt64_12.dll: cheap {t_cheap * 1000:.0f} ms, deep {t_deep * 1000:.0f} ms")
