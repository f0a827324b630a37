"""Acceptance: real PyPI wheels whose CUDA use is decided at run time.

* jax-cuda12-pjrt: XLA's plugin (xla_cuda_plugin.so) assembles every CUDA
  library name from a stem and a version (TSL's GetDsoHandle), and its XLA
  compiler turns each jitted computation into a cubin (SASS) at run time.
* jax-cuda12-plugin: JAX's CUDA kernels, statically linked with the same DSO
  loader (its table of stems is in every module).
* cupy-cuda12x (Windows): CuPy compiles its kernels with NVRTC at run time,
  to SASS unless CUPY_COMPILE_WITH_PTX=1.

Expected facts come from the wheels themselves, read independently of
cuda4amd (the stems as whole strings in .rodata, found with a plain
`bytes.find`), and from the loader source the rules cite.
"""
from __future__ import annotations

import pytest
from conftest import by_path
from wheelcache import LINUX, Unavailable, unpacked

pytestmark = pytest.mark.acceptance

PJRT = "jax-cuda12-pjrt==0.7.0"
PLUGIN = "jax-cuda12-plugin==0.7.0"
CUPY = "cupy-cuda12x==14.2.0"


def fetch(spec, platforms=LINUX):
    try:
        return unpacked(spec, platforms)
    except Unavailable as exc:
        pytest.skip(str(exc))


def names(binary):
    return {d["name"] for d in binary["dependencies"]}


def test_xla_plugin_assembles_its_library_names_and_generates_sass(scan):
    tree = fetch(PJRT)
    plugin = tree / "jax_plugins/xla_cuda12/xla_cuda_plugin.so"
    data = plugin.read_bytes()
    # independent check: the stems TSL's DsoLoader passes to GetDsoHandle are whole strings
    for stem in (b"cublas", b"cufft", b"cudnn", b"nvshmem_host"):
        assert b"\0" + stem + b"\0" in data, stem
    assert b"cudart\0cublas\0" in data  # "cudart" follows a jump table, no NUL before it: not found
    assert b"\0libcublas.so.12\0" not in data  # the complete name is never there
    report = scan(tree)
    binary = by_path(report)["jax_plugins/xla_cuda12/xla_cuda_plugin.so"]
    found = names(binary)
    for name in ("libcublas.so.{version}", "libcufft.so.{version}", "libcudnn.so.{version}",
                 "libcupti.so.{version}", "libnvshmem_host.so.{version}"):
        assert name in found, name
    by_name = {d["name"]: d for d in binary["dependencies"]}
    assert by_name["libcudnn.so.{version}"]["load"] == "by-name"
    assert by_name["libcudnn.so.{version}"]["family"] == "dnn"
    package = next(p for p in report["packages"] if p["name"] == "jax-cuda12-pjrt")
    assert package["verdict"] == "blocked"
    assert [g["id"] for g in package["generators"]] == ["xla"]
    assert package["generators"][0]["emits"] == "sass"
    assert package["reasons"][0].startswith("XLA GPU compiler (JAX, TensorFlow) generates GPU code at run time as SASS")
    # the JAX framework rule adds what jax_plugins/xla_cuda12/__init__.py preloads and no binary names
    assert package["framework"] == "jax"
    assert {"runtime_api", "blaslt", "solver", "sparse", "nccl"} <= {load["family"] for load in package["loads"]}


def test_jax_kernel_modules_link_the_dso_loader(scan):
    tree = fetch(PLUGIN)
    report = scan(tree)
    binaries = by_path(report)
    solver = binaries["jax_cuda12_plugin/_solver.so"]
    data = (tree / "jax_cuda12_plugin/_solver.so").read_bytes()
    assert b"\0cublas\0cufft\0cupti\0cudnn\0" in data
    assert {"libcublas.so.{version}", "libcufft.so.{version}", "libcudnn.so.{version}"} <= names(solver)
    package = next(p for p in report["packages"] if p["name"] == "jax-cuda12-plugin")
    assert package["verdict"] == "blocked"
    assert [g["id"] for g in package["generators"]] == ["xla"]


def test_cupy_nvrtc_generator_gives_its_switch(scan):
    tree = fetch(CUPY, ("win_amd64",))
    report = scan(tree)
    package = next(p for p in report["packages"] if p["name"] == "cupy-cuda12x")
    assert package["verdict"] in ("partial", "blocked")
    assert [g["id"] for g in package["generators"]] == ["cupy_nvrtc"]
    assert any("CUPY_COMPILE_WITH_PTX=1" in advice for advice in package["advice"])
