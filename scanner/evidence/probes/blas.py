"""cuBLAS probe: cublasSgemm_v2 of a 3x4 by 4x2 product (column-major, as
cuBLAS stores matrices) compared with the same product in Python.

Calls and enums from cublas_api.h; cublasCreate_v2, cublasSgemm_v2 and
cublasDestroy_v2 are in ZLUDA's implemented cuBLAS functions
(rules/zluda/*.toml functions.blas.implemented).
"""
from __future__ import annotations

import argparse
import ctypes
from collections.abc import Sequence

from cuda4amd.evidence.probes.common import Failed, Probe, close_enough, function, main_for, open_library

#: cublasStatus_t (cublas_api.h); ZLUDA's unimplemented functions return NOT_SUPPORTED (zluda_blas/src/impl.rs)
STATUS = {1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
          8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
          14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR"}
NOT_SUPPORTED = 15
CUBLAS_OP_N = 0
M, K, N = 3, 4, 2


def matrix(rows: int, cols: int, seed: float) -> list[float]:
    """Column-major values that are exact in float32."""
    return [float((i * 7 + j * 3) % 11) * 0.5 - seed for j in range(cols) for i in range(rows)]


def product(a: list[float], b: list[float], m: int, k: int, n: int) -> list[float]:
    return [sum(a[i + p * m] * b[p + j * k] for p in range(k)) for j in range(n) for i in range(m)]


def body(probe: Probe, args: argparse.Namespace) -> str:
    drv, lib, call = open_library(probe, args, "cuBLAS", NOT_SUPPORTED, STATUS)
    try:
        handle = ctypes.c_void_p()
        call("cublasCreate_v2", ctypes.byref(handle))
        probe.loaded = True
        a, b = matrix(M, K, 1.0), matrix(K, N, 2.0)
        da, db, dc = drv.upload(a), drv.upload(b), drv.upload([0.0] * (M * N))
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        call("cublasSgemm_v2", handle, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, ctypes.byref(alpha),
             da, M, db, K, ctypes.byref(beta), dc, M)
        got = drv.download(dc, M * N)
        function(lib, "cublasDestroy_v2")(handle)
        for ptr in (da, db, dc):
            drv.free(ptr)
    finally:
        drv.close()
    wrong = close_enough(got, product(a, b, M, K, N))
    if wrong:
        raise Failed(f"cublasSgemm_v2 {M}x{K} by {K}x{N}: {wrong}")
    return f"cublasSgemm_v2 {M}x{K} by {K}x{N} matched Python's product"


def main(argv: Sequence[str] | None = None) -> int:
    return main_for("blas", "blas", body, argv)


if __name__ == "__main__":
    raise SystemExit(main())
