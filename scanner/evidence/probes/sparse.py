"""cuSPARSE probe: a sparse matrix times a vector (y = A·x, A 4x4 with 6
non-zeros in COO form), compared with Python's.

The product goes through cusparseSpMM with a one-column dense matrix: ZLUDA's
cuSPARSE implements cusparseCreateConstCoo, cusparseCreateDnMat and
cusparseSpMM but not cusparseSpMV or the CSR/vector descriptors
(rules/zluda/*.toml functions.sparse.implemented), and an SpMM with one column
is the same product. Calls and enums from cusparse.h (CUDA 12).
"""
from __future__ import annotations

import argparse
import ctypes
from collections.abc import Sequence

from cuda4amd.evidence.probes.common import Failed, Probe, close_enough, function, main_for, open_library

#: cusparseStatus_t (cusparse.h); ZLUDA's unimplemented functions return NOT_SUPPORTED (zluda_sparse/src/impl.rs)
STATUS = {1: "CUSPARSE_STATUS_NOT_INITIALIZED", 2: "CUSPARSE_STATUS_ALLOC_FAILED", 3: "CUSPARSE_STATUS_INVALID_VALUE",
          4: "CUSPARSE_STATUS_ARCH_MISMATCH", 6: "CUSPARSE_STATUS_EXECUTION_FAILED",
          7: "CUSPARSE_STATUS_INTERNAL_ERROR", 10: "CUSPARSE_STATUS_NOT_SUPPORTED",
          11: "CUSPARSE_STATUS_INSUFFICIENT_RESOURCES"}
NOT_SUPPORTED = 10
CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_ORDER_COL = 2, 0, 1
CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_SPMM_ALG_DEFAULT, CUDA_R_32F = 0, 0, 0
ROWS = [0, 0, 1, 2, 3, 3]
COLS = [0, 2, 1, 3, 0, 3]
VALUES = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
SIZE = 4
X = [1.0, -2.0, 0.5, 4.0]


def body(probe: Probe, args: argparse.Namespace) -> str:
    drv, lib, call = open_library(probe, args, "cuSPARSE", NOT_SUPPORTED, STATUS)

    try:
        handle = ctypes.c_void_p()
        call("cusparseCreate", ctypes.byref(handle))
        probe.loaded = True
        version = ctypes.c_int()
        if hasattr(lib, "cusparseGetVersion") and lib.cusparseGetVersion(handle, ctypes.byref(version)) == 0:
            probe.facts["version"] = version.value
        rows, cols, vals = drv.upload(ROWS, ctypes.c_int32), drv.upload(COLS, ctypes.c_int32), drv.upload(VALUES)
        dx, dy = drv.upload(X), drv.upload([0.0] * SIZE)
        matrix = ctypes.c_void_p()
        create = "cusparseCreateConstCoo" if hasattr(lib, "cusparseCreateConstCoo") else "cusparseCreateCoo"
        call(create, ctypes.byref(matrix), ctypes.c_int64(SIZE), ctypes.c_int64(SIZE), ctypes.c_int64(len(VALUES)),
             rows, cols, vals, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F)
        vx, vy = ctypes.c_void_p(), ctypes.c_void_p()
        for desc, ptr in ((vx, dx), (vy, dy)):
            call("cusparseCreateDnMat", ctypes.byref(desc), ctypes.c_int64(SIZE), ctypes.c_int64(1),
                 ctypes.c_int64(SIZE), ptr, CUDA_R_32F, CUSPARSE_ORDER_COL)
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        size = ctypes.c_size_t()
        op = CUSPARSE_OPERATION_NON_TRANSPOSE
        call("cusparseSpMM_bufferSize", handle, op, op, ctypes.byref(alpha), matrix, vx, ctypes.byref(beta), vy,
             CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, ctypes.byref(size))
        buffer = drv.alloc(max(size.value, 16))
        call("cusparseSpMM", handle, op, op, ctypes.byref(alpha), matrix, vx, ctypes.byref(beta), vy, CUDA_R_32F,
             CUSPARSE_SPMM_ALG_DEFAULT, buffer)
        got = drv.download(dy, SIZE)
        function(lib, "cusparseDestroySpMat")(matrix)
        for desc in (vx, vy):
            function(lib, "cusparseDestroyDnMat")(desc)
        function(lib, "cusparseDestroy")(handle)
        for ptr in (rows, cols, vals, dx, dy, buffer):
            drv.free(ptr)
    finally:
        drv.close()
    want = [0.0] * SIZE
    for r, c, v in zip(ROWS, COLS, VALUES, strict=True):
        want[r] += v * X[c]
    wrong = close_enough(got, want)
    if wrong:
        raise Failed(f"sparse {SIZE}x{SIZE} (COO, {len(VALUES)} non-zeros) times a vector: {wrong}")
    return f"sparse {SIZE}x{SIZE} COO matrix times a vector (cusparseSpMM, one column) matched Python's"


def main(argv: Sequence[str] | None = None) -> int:
    return main_for("sparse", "sparse", body, argv)


if __name__ == "__main__":
    raise SystemExit(main())
