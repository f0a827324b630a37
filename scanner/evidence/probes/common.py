"""What every smoke probe shares: the line protocol, library loading, device memory.

A probe is a small program (``python -m cuda4amd.evidence.probes.NAME``) that
imports nothing but the standard library and this module, so it runs the same
through ZLUDA's libraries and NVIDIA's. It speaks to the runner
(cuda4amd.evidence.runner) on stdout, one line each:

* ``@step NAME`` before each call that may block or crash, so that a timeout,
  hang or crash names the call it happened in;
* ``@result {json}`` once, at the end: ``status`` (pass, unsupported or
  incorrect — the runner alone decides timeout, hang and crash), ``detail``,
  ``loaded`` (the library was loaded and its first call answered) and
  ``facts`` (device name, versions, ...).

Library names: each probe takes ``--library NAME`` (repeatable, tried in
order; a name or a path) and ``--driver NAME``. Without them it tries the
names below, which are the sonames / DLL names NVIDIA's libraries carry
(Linux: the nvidia-* wheels' ``nvidia/cu13/lib`` and ``nvidia/*/lib`` files,
e.g. ``libcublas.so.13``; Windows: the CUDA toolkit's ``bin`` folder,
``cublas64_12.dll``) and ZLUDA ships under the same names (the release file
tables in rules/zluda/*.toml).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

#: family -> default names, newest first (see the module docstring for the source)
DEFAULT_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "linux": {
        "driver_api": ("libcuda.so.1", "libcuda.so"),
        "blas": ("libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"),
        "blaslt": ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"),
        "sparse": ("libcusparse.so.12", "libcusparse.so.11", "libcusparse.so"),
        "dnn": ("libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"),
        "fft": ("libcufft.so.12", "libcufft.so.11", "libcufft.so.10", "libcufft.so"),
    },
    "windows": {
        "driver_api": ("nvcuda.dll",),
        "blas": ("cublas64_13.dll", "cublas64_12.dll", "cublas64_11.dll"),
        "blaslt": ("cublasLt64_13.dll", "cublasLt64_12.dll", "cublasLt64_11.dll"),
        "sparse": ("cusparse64_12.dll", "cusparse64_11.dll"),
        "dnn": ("cudnn64_9.dll", "cudnn64_8.dll"),
        "fft": ("cufft64_12.dll", "cufft64_11.dll", "cufft64_10.dll"),
    },
}

#: CUDA_ERROR_NOT_SUPPORTED (cuda.h, CUresult 801); ZLUDA's driver returns it for what it does not do
CUDA_ERROR_NOT_SUPPORTED = 801
CUDA_ERROR_NOT_FOUND = 500


class Refused(Exception):
    """A call answered with a 'not supported' status: a safe refusal."""


class Failed(Exception):
    """A call answered with an error, or a result was wrong."""


class Probe:
    """One probe run: emits steps and the one result line."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.facts: dict[str, Any] = {}
        self.loaded = False
        self.done = False

    def step(self, text: str) -> None:
        sys.stdout.write(f"@step {text}\n")
        sys.stdout.flush()

    def finish(self, status: str, detail: str) -> None:
        if self.done:
            return
        self.done = True
        line = json.dumps({"probe": self.name, "status": status, "detail": detail, "loaded": self.loaded,
                           "facts": self.facts}, ensure_ascii=True, default=str)
        sys.stdout.write(f"@result {line}\n")
        sys.stdout.flush()

    def run(self, body: Callable[[Probe], str]) -> int:
        """Run body(self); its return value is the detail of a pass."""
        try:
            detail = body(self)
        except Refused as exc:
            self.finish("unsupported", str(exc))
        except Failed as exc:
            self.finish("incorrect", str(exc))
        except Unloadable as exc:
            self.finish("unsupported", str(exc))
        else:
            self.finish("pass", detail)
        return 0


class Unloadable(Exception):
    """No library of the asked names could be loaded."""


def platform() -> str:
    return "windows" if os.name == "nt" else "linux"


def arguments(family: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=f"smoke probe for {family}")
    parser.add_argument("--library", action="append", default=[], help="library name or path, tried in order")
    parser.add_argument("--driver", action="append", default=[], help="CUDA driver library name or path")
    args = parser.parse_args(argv)
    args.library = args.library or list(DEFAULT_NAMES[platform()].get(family, ()))
    args.driver = args.driver or list(DEFAULT_NAMES[platform()]["driver_api"])
    return args


def load(names: Sequence[str], what: str) -> tuple[ctypes.CDLL, str]:
    """The first of `names` that loads, and its name; Unloadable if none."""
    tried: dict[str, list[str]] = {}  # why -> the names that failed so: one reason, said once
    loader = ctypes.WinDLL if os.name == "nt" else ctypes.CDLL  # type: ignore[attr-defined]
    for name in names:
        try:
            return loader(name), name
        except OSError as exc:
            # dlopen's message starts with the name ("libcuda.so.1: cannot open …"), Windows' does not
            why = str(exc).removeprefix(f"{name}: ")
            tried.setdefault(why, []).append(name)
    said = "; ".join(f"{', '.join(failed)}: {why}" for why, failed in tried.items())
    raise Unloadable(f"cannot load {what} ({said or 'no name given'})")


def function(lib: ctypes.CDLL, name: str, restype: type[ctypes._SimpleCData[Any]] = ctypes.c_int) -> Callable[..., int]:
    """The exported function `name`, or Refused when the library does not export it."""
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise Refused(f"{name} is not exported by this library") from None
    fn.restype = restype
    return fn


class Driver:
    """The few driver API calls the probes need: context, memory, copies."""

    def __init__(self, probe: Probe, names: Sequence[str]) -> None:
        self.probe = probe
        self.lib, self.name = load(names, "the CUDA driver")
        self.context = ctypes.c_void_p()
        self.device = ctypes.c_int()

    def check(self, call: str, code: int) -> None:
        if code == 0:
            return
        name = ctypes.c_char_p()
        text = f"{code}"
        getter = getattr(self.lib, "cuGetErrorName", None)
        if getter is not None and getter(code, ctypes.byref(name)) == 0 and name.value:
            text = f"{code} ({name.value.decode('ascii', 'replace')})"
        if code == CUDA_ERROR_NOT_SUPPORTED:
            raise Refused(f"{call} returned {text}")
        raise Failed(f"{call} returned {text}")

    def call(self, name: str, *args: object) -> None:
        self.probe.step(name)
        self.check(name, function(self.lib, name)(*args))

    def open(self) -> None:
        """cuInit, device 0, its primary context made current (what the CUDA runtime does)."""
        self.call("cuInit", 0)
        self.probe.loaded = True
        count = ctypes.c_int()
        self.call("cuDeviceGetCount", ctypes.byref(count))
        self.probe.facts["devices"] = count.value
        if count.value < 1:
            raise Failed("cuDeviceGetCount reports no device")
        self.call("cuDeviceGet", ctypes.byref(self.device), 0)
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(self.context), self.device)
        self.call("cuCtxSetCurrent", self.context)

    def close(self) -> None:
        if self.context.value:
            release = getattr(self.lib, "cuDevicePrimaryCtxRelease_v2", None) or \
                getattr(self.lib, "cuDevicePrimaryCtxRelease", None)
            if release is not None:
                release(self.device)

    def alloc(self, size: int) -> ctypes.c_uint64:
        ptr = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(size))
        return ptr

    def free(self, ptr: ctypes.c_uint64) -> None:
        function(self.lib, "cuMemFree_v2")(ptr)

    def upload(self, values: Sequence[float] | Sequence[int],
               ctype: type[ctypes._SimpleCData[Any]] = ctypes.c_float) -> ctypes.c_uint64:
        host = (ctype * len(values))(*values)
        ptr = self.alloc(ctypes.sizeof(host))
        self.call("cuMemcpyHtoD_v2", ptr, host, ctypes.c_size_t(ctypes.sizeof(host)))
        return ptr

    def download(self, ptr: ctypes.c_uint64, count: int,
                 ctype: type[ctypes._SimpleCData[Any]] = ctypes.c_float) -> list:
        host = (ctype * count)()
        self.call("cuCtxSynchronize")
        self.call("cuMemcpyDtoH_v2", host, ptr, ctypes.c_size_t(ctypes.sizeof(host)))
        return list(host)


def close_enough(got: Sequence[float], want: Sequence[float], *, rel: float = 1e-4, abs_: float = 1e-4) -> str | None:
    """None when every value matches within tolerance, else the first mismatch, described."""
    if len(got) != len(want):
        return f"{len(got)} values where {len(want)} were expected"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if not (math.isfinite(g) and math.isclose(g, w, rel_tol=rel, abs_tol=abs_)):
            return f"value {i} is {g!r}, expected {w!r}"
    return None


def library_status(call: str, code: int, not_supported: int, names: dict[int, str]) -> None:
    """Raise for a library call's non-zero status: Refused for its 'not supported' code, else Failed."""
    if code == 0:
        return
    text = f"{call} returned {code}" + (f" ({names[code]})" if code in names else "")
    if code == not_supported:
        raise Refused(text)
    raise Failed(text)


def main_for(name: str, family: str, body: Callable[[Probe, argparse.Namespace], str],
             argv: Sequence[str] | None = None) -> int:
    args = arguments(family, argv)
    probe = Probe(name)
    return probe.run(lambda p: body(p, args))


def open_library(probe: Probe, args: argparse.Namespace, what: str, not_supported: int,
                 names: dict[int, str]) -> tuple[Driver, ctypes.CDLL, Callable[..., None]]:
    """The driver opened, the library `what` loaded (its name in the probe's facts), and
    `call(fn, *args)`: one library call, its status checked by `library_status`."""
    drv = Driver(probe, args.driver)
    lib, name = load(args.library, what)
    probe.facts["library"] = name
    drv.open()

    def call(fn: str, *fargs: object) -> None:
        probe.step(fn)
        library_status(fn, function(lib, fn)(*fargs), not_supported, names)

    return drv, lib, call
