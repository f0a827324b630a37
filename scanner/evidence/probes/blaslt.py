"""cuBLASLt probe: cublasLtMatmul of a 3x4 by 4x2 float32 product (the
algorithm from cublasLtMatmulAlgoGetHeuristic) compared with Python's.

Calls, enums and the heuristic-result layout from cublasLt.h; every call is in
ZLUDA's implemented cuBLASLt functions (rules/zluda/*.toml
functions.blaslt.implemented).
"""
from __future__ import annotations

import argparse
import ctypes
from collections.abc import Sequence

from cuda4amd.evidence.probes.blas import NOT_SUPPORTED, STATUS, K, M, N, matrix, product
from cuda4amd.evidence.probes.common import Failed, Probe, close_enough, function, main_for, open_library

CUBLAS_COMPUTE_32F = 68  # cublasComputeType_t
CUDA_R_32F = 0  # cudaDataType_t
CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1  # cublasLtMatmulPreferenceAttributes_t
WORKSPACE = 1 << 20


class Heuristic(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t: algo (uint64_t data[8]), workspaceSize, state, wavesCount, reserved[4]."""

    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves_count", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def body(probe: Probe, args: argparse.Namespace) -> str:
    drv, lib, call = open_library(probe, args, "cuBLASLt", NOT_SUPPORTED, STATUS)

    try:
        handle = ctypes.c_void_p()
        call("cublasLtCreate", ctypes.byref(handle))
        probe.loaded = True
        version = getattr(lib, "cublasLtGetVersion", None)
        if version is not None:
            version.restype = ctypes.c_size_t
            probe.facts["version"] = version()
        desc = ctypes.c_void_p()
        call("cublasLtMatmulDescCreate", ctypes.byref(desc), CUBLAS_COMPUTE_32F, CUDA_R_32F)
        layouts = []
        for rows, cols in ((M, K), (K, N), (M, N)):
            layout = ctypes.c_void_p()
            call("cublasLtMatrixLayoutCreate", ctypes.byref(layout), CUDA_R_32F, ctypes.c_uint64(rows),
                 ctypes.c_uint64(cols), ctypes.c_int64(rows))
            layouts.append(layout)
        la, lb, lc = layouts
        pref = ctypes.c_void_p()
        call("cublasLtMatmulPreferenceCreate", ctypes.byref(pref))
        limit = ctypes.c_uint64(WORKSPACE)
        call("cublasLtMatmulPreferenceSetAttribute", pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
             ctypes.byref(limit), ctypes.c_size_t(ctypes.sizeof(limit)))
        found = Heuristic()
        returned = ctypes.c_int()
        call("cublasLtMatmulAlgoGetHeuristic", handle, desc, la, lb, lc, lc, pref, 1, ctypes.byref(found),
             ctypes.byref(returned))
        if returned.value < 1:
            raise Failed("cublasLtMatmulAlgoGetHeuristic returned no algorithm for a float32 product")
        a, b = matrix(M, K, 1.0), matrix(K, N, 2.0)
        da, db, dc = drv.upload(a), drv.upload(b), drv.upload([0.0] * (M * N))
        work = drv.alloc(WORKSPACE)
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        call("cublasLtMatmul", handle, desc, ctypes.byref(alpha), da, la, db, lb, ctypes.byref(beta), dc, lc, dc, lc,
             ctypes.byref(found, Heuristic.algo.offset), work, ctypes.c_size_t(WORKSPACE), None)
        got = drv.download(dc, M * N)
        for ptr in (da, db, dc, work):
            drv.free(ptr)
        function(lib, "cublasLtMatmulPreferenceDestroy")(pref)
        for layout in layouts:
            function(lib, "cublasLtMatrixLayoutDestroy")(layout)
        function(lib, "cublasLtMatmulDescDestroy")(desc)
        function(lib, "cublasLtDestroy")(handle)
    finally:
        drv.close()
    wrong = close_enough(got, product(a, b, M, K, N))
    if wrong:
        raise Failed(f"cublasLtMatmul {M}x{K} by {K}x{N}: {wrong}")
    return f"cublasLtMatmul {M}x{K} by {K}x{N} (float32, heuristic algorithm) matched Python's product"


def main(argv: Sequence[str] | None = None) -> int:
    return main_for("blaslt", "blaslt", body, argv)


if __name__ == "__main__":
    raise SystemExit(main())
