"""cuFFT probe: a forward complex-to-complex FFT of 8 points, compared with a
DFT in Python — or a safe refusal.

ZLUDA's cuFFT implements no function: each returns CUFFT_NOT_SUPPORTED (16)
(zluda_fft/src/lib.rs `unimplemented!` macro and zluda_fft/src/impl.rs, release
builds; rules/zluda/*.toml functions.fft.implemented is empty). That answer
is an "unsupported" outcome, never a pass (ZLUDA's own cuda_check counts it as
success). Calls and enums from cufft.h.
"""
from __future__ import annotations

import argparse
import cmath
import ctypes
from collections.abc import Sequence

from cuda4amd.evidence.probes.common import Failed, Probe, close_enough, function, main_for, open_library

#: cufftResult (cufft.h)
STATUS = {1: "CUFFT_INVALID_PLAN", 2: "CUFFT_ALLOC_FAILED", 4: "CUFFT_INVALID_VALUE", 5: "CUFFT_INTERNAL_ERROR",
          6: "CUFFT_EXEC_FAILED", 7: "CUFFT_SETUP_FAILED", 8: "CUFFT_INVALID_SIZE", 16: "CUFFT_NOT_SUPPORTED"}
NOT_SUPPORTED = 16
CUFFT_C2C, CUFFT_FORWARD = 0x29, -1
POINTS = 8
SIGNAL = [complex(i % 3, (i * 5) % 4 - 1.5) for i in range(POINTS)]


def body(probe: Probe, args: argparse.Namespace) -> str:
    drv, lib, call = open_library(probe, args, "cuFFT", NOT_SUPPORTED, STATUS)

    try:
        version = ctypes.c_int()
        if hasattr(lib, "cufftGetVersion") and lib.cufftGetVersion(ctypes.byref(version)) == 0:
            probe.facts["version"] = version.value
        plan = ctypes.c_int()
        probe.loaded = True
        call("cufftPlan1d", ctypes.byref(plan), POINTS, CUFFT_C2C, 1)
        flat = [x for z in SIGNAL for x in (z.real, z.imag)]
        data = drv.upload(flat)
        call("cufftExecC2C", plan, data, data, CUFFT_FORWARD)
        got = drv.download(data, 2 * POINTS)
        function(lib, "cufftDestroy")(plan)
        drv.free(data)
    finally:
        drv.close()
    want = [sum(x * cmath.exp(-2j * cmath.pi * k * n / POINTS) for n, x in enumerate(SIGNAL)) for k in range(POINTS)]
    wrong = close_enough(got, [x for z in want for x in (z.real, z.imag)], rel=1e-4, abs_=1e-4)
    if wrong:
        raise Failed(f"cufftExecC2C of {POINTS} points: {wrong}")
    return f"cufftExecC2C forward of {POINTS} points matched Python's DFT"


def main(argv: Sequence[str] | None = None) -> int:
    return main_for("fft", "fft", body, argv)


if __name__ == "__main__":
    raise SystemExit(main())
