"""Acceptance: real PyPI wheels whose CUDA use is decided at run time or per module.

Per-module PTX and driver functions named at run time (issue 10, items 3-6):
module counts are checked against fixtures/kernels/carve.py, the independent
carver (it shares no code with cuda4amd); driver function states against the
shared ZLUDA tables, not cuda4amd's rules.

Names assembled at run time and code generators (issue 10, items 1, 2):

* jax-cuda12-pjrt: XLA's plugin (xla_cuda_plugin.so) assembles every CUDA
  library name from a stem and a version (TSL's GetDsoHandle), and its XLA
  compiler turns each jitted computation into a cubin (SASS) at run time.
* jax-cuda12-plugin: JAX's CUDA kernels, statically linked with the same DSO
  loader (its table of stems is in every module).
* cupy-cuda12x (Windows): CuPy compiles its kernels with NVRTC at run time,
  to SASS unless CUPY_COMPILE_WITH_PTX=1.

Those expected facts come from the wheels themselves, read independently of
cuda4amd (the stems as whole strings in .rodata, found with a plain
`bytes.find`), and from the loader source the rules cite.
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import by_path, dependency
from test_acceptance import fetch, zluda_table
from wheelcache import LINUX, unpacked

pytestmark = pytest.mark.acceptance

CARVE = Path(__file__).resolve().parents[2] / "fixtures" / "kernels" / "carve.py"
CUSPARSELT = "nvidia-cusparselt-cu12==0.6.2"  # 149 MB, the smallest cuSPARSELt wheel
CURAND = "nvidia-curand-cu12==10.3.5.147"  # 56 MB
NCCL = "nvidia-nccl-cu12==2.19.3"  # 166 MB, the smallest NCCL cu12 wheel (Linux only)
CUDART = "nvidia-cuda-runtime-cu12==12.9.79"
PJRT = "jax-cuda12-pjrt==0.7.0"
PLUGIN = "jax-cuda12-plugin==0.7.0"
CUPY = "cupy-cuda12x==14.2.0"


def linux(spec):
    """A Linux-only wheel's tree."""
    return unpacked(spec, LINUX)


def carved_containers(path: Path) -> dict[str, set[str]]:
    """Container number -> entry kinds, by the independent carver."""
    out = subprocess.run([sys.executable, str(CARVE), str(path)], capture_output=True, text=True, check=True).stdout
    kinds: dict[str, set[str]] = defaultdict(set)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2].startswith("#"):
            kinds[parts[2]].add(parts[3])
    return kinds


def test_cusparselt_has_ptx_in_few_of_its_modules(scan):
    tree = fetch(unpacked, CUSPARSELT)
    report = scan(tree)
    path = "cusparselt/bin/cusparseLt.dll"
    library = by_path(report)[path]
    carved = carved_containers(tree / path)
    with_ptx = sum(1 for kinds in carved.values() if "ptx" in kinds)
    assert (len(carved), with_ptx) == (2511, 2)
    modules = library["kernels"]["modules"]
    assert (modules["total"], modules["with_ptx"], modules["codeless_containers"]) == (len(carved), with_ptx, 0)
    assert library["nvidia_library"] == {"family": "sparselt", "route": "passthrough", "basis": "in-tree", "replacement": None}
    # PTX in fewer than half of its modules: blocked, not "can run, degraded" (docs/exit-status.md, rule 5)
    assert library["verdict"] == "blocked"
    assert (
        "NVIDIA cuSPARSELt library that ZLUDA does not replace: PTX in only 2 of its 2511 kernel modules: the "
        "kernels of the other 2509 (99 %) carry no PTX that ZLUDA can use (it runs only PTX), so most of its GPU "
        "code cannot run under ZLUDA"
    ) in library["reasons"]
    # and of the PTX there is, ZLUDA's parser drops most (tests/integration/test_ptx_acceptance.py pins it)
    assert any("288 of 318 kernels are dropped by ZLUDA v6-preview.69's PTX parser" in r for r in library["reasons"])
    # it JIT-links its own kernels through the driver's cuLink* functions, by name
    driver = zluda_table("v6-preview.69", "driver")
    states = dependency(library, "nvcuda.dll")["symbols"]
    assert "cuLinkComplete" in states["stub"]
    for state, names in states.items():
        for name in names:
            # a plain name is a cuGetProcAddress request: its newest _vN variant decides
            variants = sorted((int(k.rsplit("_v", 1)[1]), k) for k in driver if re.fullmatch(re.escape(name) + r"_v\d+", k))
            assert driver.get(variants[-1][1] if variants else name, "missing") == state, name
    assert report["verdict"] == "blocked"
    (package,) = report["packages"]
    assert package["verdict"] == "blocked"


def test_curand_modules_all_carry_ptx_and_the_runtime_table_is_not_use(scan):
    tree = fetch(unpacked, CURAND)
    report = scan(tree)
    path = "nvidia/curand/bin/curand64_10.dll"
    library = by_path(report)[path]
    carved = carved_containers(tree / path)
    assert len(carved) == 11 and sum(1 for k in carved.values() if "ptx" in k) == 10
    # the 11th is nvlink's device-link stub: SASS without code
    assert [k for k in carved.values() if "ptx" not in k] == [{"sass"}]
    assert library["kernels"]["modules"] == {
        "total": 10, "with_ptx": 10, "without_ptx": 0, "debug_ptx_only": 0, "codeless_containers": 1,
    }
    # it links the CUDA runtime statically: the runtime's table is all it names
    assert library["driver_names"] == {"names": [], "runtime_table": 485}
    assert dependency(library, "nvcuda.dll")["symbols"] == {}
    # all its modules carry PTX, but v6-preview.69's parser has no rule for `bfind` (v6 adds it): 24 kernels go
    assert library["verdict"] == "degraded"
    assert any("24 of 296 kernels are dropped" in r and "bfind" in r for r in library["reasons"])


def test_cudart_names_every_driver_function_and_none_counts(scan):
    report = scan(fetch(unpacked, CUDART))
    cudart = by_path(report)["nvidia/cuda_runtime/bin/cudart64_12.dll"]
    assert cudart["driver_names"] == {"names": [], "runtime_table": 495}
    assert cudart["verdict"] == "ready"


def test_nccl_is_judged_by_the_driver_functions_it_resolves(scan):
    tree = fetch(linux, NCCL)
    report = scan(tree)
    nccl = by_path(report)["nvidia/nccl/lib/libnccl.so.2"]
    assert nccl["nvidia_library"]["family"] == "nccl"
    assert nccl["nvidia_library"]["basis"] == "in-tree"
    assert nccl["kernels"]["state"] == "relocatable-ptx-only"  # built with -rdc: PTX only for the device link
    # NCCL's own table (src/misc/cudawrap.cc) without the statically linked runtime's
    names = nccl["driver_names"]["names"]
    assert {"cuInit", "cuDriverGetVersion", "cuGetProcAddress", "cuMemCreate", "cuMemMap", "cuMulticastCreate"} <= set(names)
    assert len(names) == 32 and nccl["driver_names"]["runtime_table"] == 433
    driver = zluda_table("v6-preview.69", "driver")
    symbols = dependency(nccl, "libcuda.so")["symbols"]
    assert set(symbols["stub"]) >= {"cuMemCreate", "cuMemMap", "cuMemAddressReserve", "cuMulticastCreate"}
    assert all(driver[name] == "stub" for name in ("cuMemCreate", "cuMemMap", "cuMulticastCreate"))
    assert nccl["verdict"] == "degraded"
    assert any(r.startswith("libcuda.so: 18 functions it resolves by name (cuGetProcAddress/dlsym) are ZLUDA stubs")
               for r in nccl["reasons"])



def names(binary):
    return {d["name"] for d in binary["dependencies"]}


def test_xla_plugin_assembles_its_library_names_and_generates_sass(scan):
    tree = fetch(linux, PJRT)
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
    tree = fetch(linux, PLUGIN)
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
    tree = fetch(unpacked, CUPY)
    report = scan(tree)
    package = next(p for p in report["packages"] if p["name"] == "cupy-cuda12x")
    assert package["verdict"] in ("partial", "blocked")
    assert [g["id"] for g in package["generators"]] == ["cupy_nvrtc"]
    assert any("CUPY_COMPILE_WITH_PTX=1" in advice for advice in package["advice"])
