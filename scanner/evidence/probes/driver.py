"""Driver API probe: cuInit, the device's name and compute capability, a
context, cuModuleLoadData of a hand-written PTX kernel (vector_add.ptx),
a launch, the copy back, and the sums compared with Python's.

Function names and argument lists follow cuda.h (CUDA 12/13); every one of them
is in ZLUDA's implemented driver functions (rules/zluda/*.toml,
functions.driver.implemented).
"""
from __future__ import annotations

import argparse
import ctypes
from collections.abc import Sequence
from pathlib import Path

from cuda4amd.evidence.probes.common import Driver, Failed, Probe, close_enough, main_for

PTX = Path(__file__).with_name("vector_add.ptx")
#: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR (cuda.h CUdevice_attribute)
CC_MAJOR, CC_MINOR = 75, 76
N = 1000
THREADS = 128


def body(probe: Probe, args: argparse.Namespace) -> str:
    drv = Driver(probe, args.driver)
    probe.facts["library"] = drv.name
    version = ctypes.c_int()
    getter = getattr(drv.lib, "cuDriverGetVersion", None)
    if getter is not None and getter(ctypes.byref(version)) == 0:
        probe.facts["driver_version"] = version.value
    drv.open()
    try:
        name = ctypes.create_string_buffer(256)
        drv.call("cuDeviceGetName", name, 256, drv.device)
        probe.facts["device"] = name.value.decode("utf-8", "replace")
        major, minor = ctypes.c_int(), ctypes.c_int()
        drv.call("cuDeviceGetAttribute", ctypes.byref(major), CC_MAJOR, drv.device)
        drv.call("cuDeviceGetAttribute", ctypes.byref(minor), CC_MINOR, drv.device)
        probe.facts["compute_capability"] = f"{major.value}.{minor.value}"
        module = ctypes.c_void_p()
        image = PTX.read_bytes() + b"\0"
        drv.call("cuModuleLoadData", ctypes.byref(module), image)
        kernel = ctypes.c_void_p()
        drv.call("cuModuleGetFunction", ctypes.byref(kernel), module, b"vector_add")
        a = [float(i) * 0.5 for i in range(N)]
        b = [float(N - i) * 0.25 for i in range(N)]
        da, db = drv.upload(a), drv.upload(b)
        dc = drv.alloc(4 * N)
        n = ctypes.c_uint32(N)
        params = (ctypes.c_void_p * 4)(*(ctypes.cast(ctypes.byref(x), ctypes.c_void_p) for x in (da, db, dc, n)))
        blocks = (N + THREADS - 1) // THREADS
        drv.call("cuLaunchKernel", kernel, blocks, 1, 1, THREADS, 1, 1, 0, None, params, None)
        got = drv.download(dc, N)
        for ptr in (da, db, dc):
            drv.free(ptr)
        drv.call("cuModuleUnload", module)
    finally:
        drv.close()
    wrong = close_enough(got, [x + y for x, y in zip(a, b, strict=True)], rel=1e-6, abs_=1e-6)
    if wrong:
        raise Failed(f"vector_add: {wrong}")
    return (f"{probe.facts['device']} (compute capability {probe.facts['compute_capability']}): "
            f"PTX vector_add of {N} floats compiled, ran and matched")


def main(argv: Sequence[str] | None = None) -> int:
    return main_for("driver", "driver_api", body, argv)


if __name__ == "__main__":
    raise SystemExit(main())
