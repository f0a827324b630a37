"""Small workloads, one GPU operation each: name -> (setup, run).

`setup()` imports the framework and prepares inputs (its loads count too: a
library loaded at import is loaded); `run(state)` does the operation and
waits for the GPU. Each runs in its own process (tools/gpu_truth/probe.py),
so what one loads never hides what another needs. The package a workload
exercises is the part of the name before the first dot.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

Setup = Callable[[], Any]
Run = Callable[[Any], None]


def _torch():
    import torch

    assert torch.cuda.is_available(), "torch sees no CUDA device"
    return torch


def _torch_op(body: Callable[[Any], Any]) -> tuple[Setup, Run]:
    def setup():
        return _torch()

    def run(torch):
        out = body(torch)
        torch.cuda.synchronize()
        if hasattr(out, "cpu"):
            out.float().sum().cpu()

    return setup, run


def _compile(torch):
    f = torch.compile(lambda x: (x.sin() + x.cos()) * 2)
    return f(torch.randn(4096, device="cuda"))


def _cupy_op(body: Callable[[Any], Any]) -> tuple[Setup, Run]:
    def setup():
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        return cupy

    def run(cupy):
        out = body(cupy)
        cupy.cuda.Device().synchronize()
        if out is not None:
            float(out.sum())

    return setup, run


def _jax_op(body: Callable[[Any, Any], Any]) -> tuple[Setup, Run]:
    def setup():
        import jax
        import jax.numpy as jnp

        assert jax.devices()[0].platform == "gpu", f"jax runs on {jax.devices()}"
        return jax, jnp

    def run(state):
        jax, jnp = state
        out = body(jax, jnp)
        jax.block_until_ready(out)

    return setup, run


def _triton_add():
    def setup():
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def add(x, y, out, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)

        return torch, add

    def run(state):
        torch, add = state
        # copies and empty tensors only: no PyTorch kernel may run, or its (SASS-only) kernels
        # would decide the result under CUDA_FORCE_PTX_JIT=1 instead of Triton's
        x = torch.arange(8192, dtype=torch.float32).to("cuda")
        out = torch.empty_like(x)
        add[(8,)](x, x, out, x.numel(), BLOCK=1024)
        torch.cuda.synchronize()
        assert out.cpu()[3].item() == 6.0

    return setup, run


def _numba_kernel():
    def setup():
        import numpy as np
        from numba import cuda

        @cuda.jit
        def twice(a):
            i = cuda.grid(1)
            if i < a.size:
                a[i] *= 2

        return np, cuda, twice

    def run(state):
        np, cuda, twice = state
        a = cuda.to_device(np.ones(1024, dtype=np.float32))
        twice[4, 256](a)
        cuda.synchronize()
        assert a.copy_to_host()[0] == 2

    return setup, run


OPERATIONS: dict[str, tuple[Setup, Run]] = {
    "torch.import": _torch_op(lambda torch: torch.zeros(1, device="cuda")),
    "torch.elementwise": _torch_op(lambda torch: torch.randn(1 << 20, device="cuda").exp()),
    "torch.matmul": _torch_op(lambda torch: torch.randn(512, 512, device="cuda") @ torch.randn(512, 512, device="cuda")),
    "torch.linear_bias": _torch_op(lambda torch: torch.nn.functional.linear(
        torch.randn(64, 256, device="cuda"), torch.randn(128, 256, device="cuda"), torch.randn(128, device="cuda"))),
    "torch.conv2d": _torch_op(lambda torch: torch.nn.functional.conv2d(
        torch.randn(8, 16, 32, 32, device="cuda"), torch.randn(32, 16, 3, 3, device="cuda"))),
    "torch.fft": _torch_op(lambda torch: torch.fft.fft(torch.randn(4096, device="cuda")).abs()),
    "torch.random": _torch_op(lambda torch: torch.rand(1 << 20, device="cuda")),
    "torch.linalg": _torch_op(lambda torch: torch.linalg.inv(
        torch.randn(64, 64, device="cuda") + 64 * torch.eye(64, device="cuda"))),
    "torch.sort": _torch_op(lambda torch: torch.sort(torch.randn(1 << 16, device="cuda")).values),
    "torch.sdpa": _torch_op(lambda torch: torch.nn.functional.scaled_dot_product_attention(
        *(torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.float16) for _ in range(3)))),
    "torch.compile": _torch_op(_compile),
    "cupy.elementwise": _cupy_op(lambda cp: cp.arange(1 << 20, dtype=cp.float32) * 2 + 1),
    "cupy.matmul": _cupy_op(lambda cp: cp.ones((256, 256), dtype=cp.float32) @ cp.ones((256, 256), dtype=cp.float32)),
    "cupy.fft": _cupy_op(lambda cp: cp.abs(cp.fft.fft(cp.arange(4096, dtype=cp.float32)))),
    "cupy.random": _cupy_op(lambda cp: cp.random.standard_normal(1 << 16)),
    "cupy.linalg": _cupy_op(lambda cp: cp.linalg.inv(cp.eye(64, dtype=cp.float32) * 3)),
    "cupy.sort": _cupy_op(lambda cp: cp.sort(cp.arange(1 << 16, dtype=cp.float32)[::-1])),
    "jax.elementwise": _jax_op(lambda jax, jnp: jnp.arange(1 << 20, dtype=jnp.float32) * 2 + 1),
    "jax.matmul": _jax_op(lambda jax, jnp: jnp.ones((256, 256)) @ jnp.ones((256, 256))),
    "jax.fft": _jax_op(lambda jax, jnp: jnp.abs(jnp.fft.fft(jnp.arange(4096, dtype=jnp.float32)))),
    "jax.linalg": _jax_op(lambda jax, jnp: jnp.linalg.inv(jnp.eye(64) * 3)),
    "jax.random": _jax_op(lambda jax, jnp: jax.random.normal(jax.random.PRNGKey(0), (1 << 16,))),
    "jax.conv": _jax_op(lambda jax, jnp: jax.lax.conv(jnp.ones((1, 3, 32, 32)), jnp.ones((8, 3, 3, 3)), (1, 1), "SAME")),
    "triton.add": _triton_add(),
    "numba-cuda.kernel": _numba_kernel(),
}


def package_of(op: str) -> str:
    return op.split(".", 1)[0]
