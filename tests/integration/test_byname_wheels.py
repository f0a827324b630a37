"""The real-wheel (acceptance) tests of tests/unit/test_byname.py: CUDA wheels from PyPI, downloaded on demand."""
from __future__ import annotations

import pytest
from test_byname import CTRANSLATE2, CUDART, CUFFT, CUPY, refs, tree, triples

from cuda4amd.scan.read.engine import read_path


@pytest.mark.acceptance
@pytest.mark.parametrize("spec, path, expected", [
    # strings(1) shows both in .rdata; ctranslate2.dll imports neither (cuBLAS is
    # loaded by name, nvcuda.dll by the statically linked CUDA runtime)
    (CTRANSLATE2, "ctranslate2/ctranslate2.dll", ["cublas64_12.dll", "nvcuda.dll"]),
    # the cuDNN 9 front loads its sub-libraries; its own name (export directory) is not a load
    (CTRANSLATE2, "ctranslate2/cudnn64_9.dll",
     ["cudnn_adv64_9.dll", "cudnn_cnn64_9.dll", "cudnn_graph64_9.dll", "cudnn_ops64_9.dll"]),
    (CUDART, "nvidia/cuda_runtime/bin/cudart64_12.dll", ["nvcuda.dll"]),
    # "libnvrtc.so"/"libnvjitlink.so" in its messages are Linux names: not for a DLL
    (CUFFT, "nvidia/cufft/bin/cufft64_11.dll", ["nvJitLink_120_0.dll", "nvcuda.dll", "nvrtc64_120_0.dll"]),
    # "cufft64_11.dll" in its .rdata is its static import's name
    (CUFFT, "nvidia/cufft/bin/cufftw64_11.dll", ["nvcuda.dll"]),
    # cudart_static inside these Cython modules loads nvcuda.dll by name
    (CUPY, "cupy_backends/cuda/api/runtime.cp312-win_amd64.pyd", ["nvcuda.dll"]),
    (CUPY, "cupy/cuda/jitify.cp312-win_amd64.pyd", ["nvcuda.dll"]),  # nvrtc64_120_0.dll: static import
    (CUPY, "cupy_backends/cuda/libs/cublas.cp312-win_amd64.pyd", []),  # cublas64_12.dll: static import
])
def test_real_ascii_names(rules, spec, path, expected):
    found = refs(tree(spec) / path, rules)
    assert [(r.name, r.encoding) for r in found] == [(n, "ascii") for n in expected]


@pytest.mark.acceptance
def test_real_cupy_cython_zlib_tables(rules):
    """cupy 14.2.0 is built with Cython 3.2.4: zlib-compressed string tables.
    driver.pyx's table holds "libcuda.so.1" and "nvcuda.dll" glued together
    ("...driver.pyxlibcuda.so.1nvcuda.dll..."), found only by inflating it."""
    from cuda4amd.scan.read.byname.cython import cython_tables
    from cuda4amd.scan.read.byname.sections import PE_CONST_SECTIONS, ranges

    root = tree(CUPY)
    path = root / "cupy_backends/cuda/api/driver.cp312-win_amd64.pyd"
    data = path.read_bytes()
    assert b"_cython_3_2_4" in data and b"nvcuda.dll" not in data
    tables = list(cython_tables(data, ranges(read_path(path), PE_CONST_SECTIONS, len(data))))
    assert [encoding for encoding, _ in tables] == ["cython-zlib"]
    assert b"libcuda.so.1nvcuda.dll" in tables[0][1]
    assert triples(refs(path, rules)) == [("nvcuda.dll", "cython-zlib", False)]
    # every Cython module of the wheel has exactly one compressed table, except
    # the two enum-only modules whose tables are too small to compress
    without = []
    for pyd in sorted(root.rglob("*.pyd")):
        blob = pyd.read_bytes()
        found = list(cython_tables(blob, ranges(read_path(pyd), PE_CONST_SECTIONS, len(blob))))
        assert len(found) <= 1
        if not found:
            without.append(pyd.name)
    assert sorted(without) == ["_driver_enum.cp312-win_amd64.pyd", "_runtime_enum.cp312-win_amd64.pyd",
                               "numpy_allocator.cp312-win_amd64.pyd"]


@pytest.mark.acceptance
def test_real_cupy_names(rules):
    root = tree(CUPY)
    found = {}
    for pyd in sorted(root.rglob("*.pyd")):
        for r in refs(pyd, rules):
            found.setdefault((r.name, r.encoding), []).append(pyd.relative_to(root).as_posix())
    assert sorted(found) == [("nvcuda.dll", "ascii"), ("nvcuda.dll", "cython-zlib")]
    assert found[("nvcuda.dll", "cython-zlib")] == ["cupy_backends/cuda/api/driver.cp312-win_amd64.pyd"]
    assert sorted(found[("nvcuda.dll", "ascii")]) == [
        "cupy/cuda/cub.cp312-win_amd64.pyd",
        "cupy/cuda/jitify.cp312-win_amd64.pyd",
        "cupy/cuda/thrust.cp312-win_amd64.pyd",
        "cupy/random/_generator_api.cp312-win_amd64.pyd",
        "cupy_backends/cuda/api/runtime.cp312-win_amd64.pyd",
    ]
