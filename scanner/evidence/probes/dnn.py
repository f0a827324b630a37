"""cuDNN probe: cudnnConvolutionForward of a 1x1x4x4 input with a 1x1x2x2
filter (cross-correlation, no padding, implicit-GEMM algorithm), compared with
the same convolution in Python.

Calls and enums from cudnn_cnn.h / cudnn_ops.h (cuDNN 8 and 9); every call is
in ZLUDA's implemented cuDNN functions (rules/zluda/*.toml functions.dnn8 /
functions.dnn9 .implemented).
"""
from __future__ import annotations

import argparse
import ctypes
from collections.abc import Sequence

from cuda4amd.evidence.probes.common import Driver, Failed, Probe, Refused, close_enough, function, load, main_for

CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, CUDNN_CROSS_CORRELATION = 0, 0, 1
CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0
H = W = 4
FH = FW = 2
IMAGE = [float((i * 3) % 7) - 2.0 for i in range(H * W)]
FILTER = [1.0, -1.0, 0.5, 2.0]


def refusal(code: int, version: int) -> bool:
    """cudnnStatus_t: NOT_SUPPORTED is 9 before cuDNN 9; from 9 on it is 3000 and its sub-codes 3001-3999."""
    return code == 9 if version < 90000 else 3000 <= code < 4000


def body(probe: Probe, args: argparse.Namespace) -> str:
    drv = Driver(probe, args.driver)
    lib, name = load(args.library, "cuDNN")
    probe.facts["library"] = name
    get_version = function(lib, "cudnnGetVersion", ctypes.c_size_t)
    probe.step("cudnnGetVersion")
    version = int(get_version())
    probe.facts["version"] = version
    drv.open()

    def call(fn: str, *fargs: object) -> None:
        probe.step(fn)
        code = function(lib, fn)(*fargs)
        if code == 0:
            return
        errstr = getattr(lib, "cudnnGetErrorString", None)
        text = f"{fn} returned {code}"
        if errstr is not None:
            errstr.restype = ctypes.c_char_p
            text += f" ({(errstr(code) or b'').decode('ascii', 'replace')})"
        raise Refused(text) if refusal(code, version) else Failed(text)

    try:
        handle = ctypes.c_void_p()
        call("cudnnCreate", ctypes.byref(handle))
        probe.loaded = True
        x_desc, y_desc, w_desc, conv = (ctypes.c_void_p() for _ in range(4))
        call("cudnnCreateTensorDescriptor", ctypes.byref(x_desc))
        call("cudnnCreateTensorDescriptor", ctypes.byref(y_desc))
        call("cudnnCreateFilterDescriptor", ctypes.byref(w_desc))
        call("cudnnCreateConvolutionDescriptor", ctypes.byref(conv))
        oh, ow = H - FH + 1, W - FW + 1
        call("cudnnSetTensor4dDescriptor", x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, H, W)
        call("cudnnSetTensor4dDescriptor", y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, oh, ow)
        call("cudnnSetFilter4dDescriptor", w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 1, 1, FH, FW)
        call("cudnnSetConvolution2dDescriptor", conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)
        size = ctypes.c_size_t()
        algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM
        call("cudnnGetConvolutionForwardWorkspaceSize", handle, x_desc, w_desc, conv, y_desc, algo, ctypes.byref(size))
        dx, dw, dy = drv.upload(IMAGE), drv.upload(FILTER), drv.upload([0.0] * (oh * ow))
        work = drv.alloc(max(size.value, 16))
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        call("cudnnConvolutionForward", handle, ctypes.byref(alpha), x_desc, dx, w_desc, dw, conv, algo, work,
             ctypes.c_size_t(size.value), ctypes.byref(beta), y_desc, dy)
        got = drv.download(dy, oh * ow)
        for ptr in (dx, dw, dy, work):
            drv.free(ptr)
        function(lib, "cudnnDestroy")(handle)
    finally:
        drv.close()
    want = [sum(IMAGE[(i + a) * W + (j + b)] * FILTER[a * FW + b] for a in range(FH) for b in range(FW))
            for i in range(oh) for j in range(ow)]
    wrong = close_enough(got, want)
    if wrong:
        raise Failed(f"cudnnConvolutionForward {H}x{W} by {FH}x{FW}: {wrong}")
    return f"cudnnConvolutionForward {H}x{W} by {FH}x{FW} (cuDNN {version}) matched Python's convolution"


def main(argv: Sequence[str] | None = None) -> int:
    return main_for("dnn", "dnn", body, argv)


if __name__ == "__main__":
    raise SystemExit(main())
