"""Exact verdicts, routes and symbol states on the toolchain-built fixtures.

What each fixture imports is listed in fixtures/README.md (and checked against
the ZLUDA v6-preview.69 table by fixtures/build.sh).
"""
from __future__ import annotations

import pytest
from conftest import FIXTURES, by_path, dependency


@pytest.fixture(scope="module")
def pe(rules):
    from cuda4amd.report.document import build
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    return build(run_scan(ScanOptions(target=str(FIXTURES / "pe")), rules=rules))


@pytest.fixture(scope="module")
def elf(rules):
    from cuda4amd.report.document import build
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    return build(run_scan(ScanOptions(target=str(FIXTURES / "elf")), rules=rules))


def test_pe_verdicts(pe):
    verdicts = {path: b["verdict"] for path, b in by_path(pe).items()}
    assert verdicts == {
        "app_ready.exe": "ready",
        "blas_mixed.dll": "degraded",
        "blas_legacy.dll": "blocked",
        "chain/chain_app.exe": "blocked",
        "chain/chain_helper.dll": "blocked",
        "chain/chain_util.dll": "no-cuda",
        "delay_solver.dll": "degraded",
        "dnn_user.dll": "degraded",
        "fft_user.dll": "degraded",
        "ordinal_user.dll": "degraded",
        "plain.dll": "no-cuda",
        "runtime_user.exe": "ready",
        "runtime_calls.exe": "degraded",  # cudart imports that end in driver stubs (test_cudart_driver.py)
        "solver_user.dll": "blocked",
        "trt_plugin.dll": "blocked",
    }
    assert pe["verdict"] == "partial"
    assert pe["errors"] == []
    assert pe["schema"] == "cuda4amd.scan/3" and pe["zluda"]["release"] == "v6-preview.69"


def test_driver_api_all_implemented(pe):
    app = by_path(pe)["app_ready.exe"]
    nvcuda = dependency(app, "nvcuda.dll")
    assert (nvcuda["family"], nvcuda["load"], nvcuda["route"], nvcuda["basis"]) == ("driver_api", "static", "redirect", "zluda-release")
    assert nvcuda["symbols"] == {"implemented": ["cuCtxSetCurrent", "cuDeviceGet", "cuInit", "cuMemAlloc_v2", "cuMemFree_v2"]}
    assert nvcuda["resolved"] is None and nvcuda["how"] == "unresolved"
    assert app["reasons"] == []
    # system DLLs are known and left out of the findings
    assert [d["name"] for d in app["dependencies"]] == ["nvcuda.dll"]


def test_cublas_symbols_implemented_and_stub(pe):
    blas = by_path(pe)["blas_mixed.dll"]
    dep = dependency(blas, "cublas64_12.dll")
    assert dep["route"] == "redirect" and dep["replacement"] == "cublas64_12.dll"
    assert dep["symbols"] == {
        "implemented": ["cublasCreate_v2", "cublasDestroy_v2", "cublasSgemm_v2"],
        "stub": ["cublasDgemm_v2", "cublasSaxpy_v2"],
    }
    assert blas["reasons"] == [
        "cublas64_12.dll: 2 imported functions are ZLUDA stubs that return NOT_SUPPORTED (cublasDgemm_v2, cublasSaxpy_v2)"
    ]


def test_missing_export_blocks_a_static_pe_import(pe):
    legacy = by_path(pe)["blas_legacy.dll"]
    dep = dependency(legacy, "cublas64_12.dll")
    assert dep["symbols"] == {"implemented": ["cublasCreate_v2"], "missing": ["cublasSgemm", "cublasXtCreate"]}
    assert "the loader refuses this binary" in legacy["reasons"][0]
    assert "cublasSgemm, cublasXtCreate" in legacy["reasons"][0]


def test_blocked_families(pe):
    binaries = by_path(pe)
    trt = dependency(binaries["trt_plugin.dll"], "nvinfer_10.dll")
    assert (trt["family"], trt["route"], trt["basis"]) == ("tensorrt", "blocked", "family-default")
    assert trt["symbols"] == {"unchecked": ["createInferBuilder_INTERNAL"]}
    solver = binaries["solver_user.dll"]
    assert dependency(solver, "cusolver64_11.dll")["route"] == "blocked"
    assert dependency(solver, "cublas64_12.dll")["symbols"] == {"implemented": ["cublasCreate_v2"]}
    assert solver["reasons"][0].startswith("cusolver64_11.dll: needs cuSOLVER, which ZLUDA does not replace")


def test_delay_loaded_blocked_library_degrades(pe):
    delay = by_path(pe)["delay_solver.dll"]
    solver = dependency(delay, "cusolver64_11.dll")
    assert (solver["load"], solver["route"]) == ("delay", "blocked")
    assert dependency(delay, "nvcuda.dll")["load"] == "static"
    assert delay["reasons"][0].startswith("cusolver64_11.dll (delay-loaded): the binary loads, but what uses it fails; needs cuSOLVER")


def test_ordinal_imports_cannot_be_checked(pe):
    binary = by_path(pe)["ordinal_user.dll"]
    dep = dependency(binary, "cublas64_12.dll")
    assert dep["ordinals"] == [5] and dep["symbols"] == {"implemented": ["cublasCreate_v2"]}
    assert "imported by ordinal (5)" in binary["reasons"][0]


def test_runtime_is_passthrough(pe):
    dep = dependency(by_path(pe)["runtime_user.exe"], "cudart64_12.dll")
    assert (dep["family"], dep["route"]) == ("runtime_api", "passthrough")


def test_fft_is_stub_route(pe):
    binary = by_path(pe)["fft_user.dll"]
    dep = dependency(binary, "cufft64_11.dll")
    assert dep["route"] == "stub"
    assert dep["symbols"] == {"stub": ["cufftDestroy", "cufftExecC2C", "cufftPlan1d"]}
    assert "every call returns NOT_SUPPORTED" in binary["reasons"][0]


def test_dnn_stub(pe):
    dep = dependency(by_path(pe)["dnn_user.dll"], "cudnn64_9.dll")
    assert dep["route"] == "redirect"
    assert dep["symbols"] == {"implemented": ["cudnnConvolutionForward", "cudnnCreate"], "stub": ["cudnnBackendCreateDescriptor"]}


def test_chain_resolution_and_propagation(pe):
    binaries = by_path(pe)
    app = binaries["chain/chain_app.exe"]
    helper = dependency(app, "chain_helper.dll")
    assert (helper["resolved"], helper["how"], helper["family"]) == ("chain/chain_helper.dll", "same-folder", None)
    util = dependency(app, "CHAIN_UTIL.dll")
    assert (util["resolved"], util["how"]) == ("chain/chain_util.dll", "same-folder")
    vendor = dependency(app, "missing_vendor.dll")
    assert (vendor["resolved"], vendor["how"]) == (None, "unresolved")
    assert not [d for d in app["dependencies"] if d["name"].startswith("api-ms-win-")]
    assert app["reasons"][0].startswith("needs chain/chain_helper.dll, which is blocked: cublas64_12.dll: 1 imported function not exported")
    # a CUDA user (through chain_helper.dll) missing a static import: a reason, not a note (issue 30, rule 4)
    assert app["notes"] == []
    assert any(r.startswith("needs missing_vendor.dll, which is neither beside it, in the scanned tree nor a system "
                            "library") and r.endswith("scan the folder or pass --search-path") for r in app["reasons"])


def test_elf_verdicts(elf):
    verdicts = {path: b["verdict"] for path, b in by_path(elf).items()}
    assert verdicts == {
        "app_driver": "degraded",
        "app_runtime": "degraded",  # cudart imports that end in driver stubs (test_cudart_driver.py)
        "libcublas.so.12": "ready",
        "libplain.so": "no-cuda",
        "libuser_blas.so": "degraded",
        "libuser_rpath.so": "blocked",
    }
    assert elf["verdict"] == "partial"


def test_elf_runpath_origin_and_versioned_symbols(elf):
    binaries = by_path(elf)
    dep = dependency(binaries["libuser_blas.so"], "libcublas.so.12")
    assert (dep["resolved"], dep["how"], dep["route"]) == ("libcublas.so.12", "runpath", "redirect")
    assert dep["symbols"] == {
        "implemented": ["cublasCreate_v2", "cublasSgemm_v2"],
        "stub": ["cublasDgemm_v2"],
        "missing": ["cublasSgemm"],
    }
    # lazy binding: the missing function fails when called, the library still loads
    assert binaries["libuser_blas.so"]["reasons"][0].startswith("libcublas.so.12 (imported): 1 function not exported")
    nvidia = binaries["libcublas.so.12"]
    assert nvidia["nvidia_library"] == {"family": "blas", "route": "redirect", "basis": "zluda-release", "replacement": "libcublas.so.12"}


def test_elf_unversioned_symbols_are_attributed(elf):
    binaries = by_path(elf)
    cuda = dependency(binaries["app_driver"], "libcuda.so.1")
    assert cuda["symbols"] == {"implemented": ["cuDeviceGet", "cuInit", "cuMemAlloc_v2"], "stub": ["cuCtxSetCacheConfig"]}
    solver = dependency(binaries["libuser_rpath.so"], "libcusolver.so.11")
    assert solver["route"] == "blocked" and solver["symbols"] == {"unchecked": ["cusolverDnCreate"]}
    assert solver["how"] == "unresolved"


def test_release_choice_changes_the_tables(scan):
    older = scan(FIXTURES / "pe" / "app_ready.exe", zluda_release="v5")
    assert older["zluda"]["release"] == "v5"
    newer = scan(FIXTURES / "pe" / "app_ready.exe", zluda_release="v7-preview.9")
    assert newer["verdict"] == "ready"


def test_demo_application(scan):
    demo = scan(FIXTURES / "demo" / "Tool")
    verdicts = {path: b["verdict"] for path, b in by_path(demo).items()}
    assert verdicts == {
        "plugins/denoise.dll": "ready",
        "plugins/trt_export.dll": "blocked",
        "render.dll": "degraded",
        "tool.exe": "degraded",
    }
    assert demo["verdict"] == "partial"
    tool = by_path(demo)["tool.exe"]
    assert dependency(tool, "render.dll")["how"] == "same-folder"
    assert tool["reasons"] == ["loads render.dll (static), which is degraded: cublas64_12.dll: 1 imported function is a ZLUDA stub that returns NOT_SUPPORTED (cublasDgemm_v2)"]


def test_kernel_verdicts(scan):
    report = scan(FIXTURES / "kernels")
    binaries = by_path(report)
    verdicts = {path: b["verdict"] for path, b in binaries.items() if not path.startswith("corrupt/")}
    assert verdicts == {
        "elf/app_scale": "ready",
        "elf/axpy_lto.o": "blocked",
        "elf/libaxpy_debug.so": "blocked",  # -G PTX: v6-preview.69's parser refuses `, debug`
        "elf/libaxpy_family.so": "ready",
        "elf/libaxpy_lz4_all.so": "ready",
        "elf/libaxpy_mixed.so": "ready",
        "elf/libaxpy_nocompress.so": "ready",
        "elf/libaxpy_partial.so": "degraded",  # scale.cu's module is SASS-only
        "elf/libaxpy_ptx86.so": "ready",
        "elf/libaxpy_rdc.so": "degraded",
        "elf/libaxpy_sass86.so": "blocked",
        "elf/libaxpy_zstd_all.so": "ready",
        "pe/axpy_fatb.dll": "degraded",  # its second container (sm_75) is SASS-only
        # its SASS-only .rdata container is found only by a deep scan, but it has no CUDA import or
        # by-name load: the runtime is found some way the scan cannot see
        "pe/axpy_rdata.dll": "degraded",
        "pe/axpy_rel.dll": "degraded",
    }
    # already degraded by its own kernels: the missing loader adds nothing to say
    assert [r.split(";")[0] for r in binaries["pe/axpy_fatb.dll"]["reasons"]] == ["PTX in 1 of its 2 kernel modules"]
    assert binaries["pe/axpy_rdata.dll"]["reasons"] == ["kernels but no CUDA loader seen: names may be built at run time"]
    assert binaries["elf/libaxpy_sass86.so"]["reasons"][0] == "its GPU kernels carry no PTX (SASS for sm_86); ZLUDA runs only PTX"
    assert binaries["elf/libaxpy_partial.so"]["reasons"] == [
        "PTX in 1 of its 2 kernel modules; the kernels of the other 1 (50 %) carry no PTX that ZLUDA can use "
        "(it runs only PTX), so they fail"
    ]
    assert binaries["elf/libaxpy_debug.so"]["reasons"][0].startswith(
        "none of its 1 kernel module carries PTX that ZLUDA can use: only debug PTX (nvcc -G"
    )
    assert "ptx_parser/src/lib.rs:541-553" in binaries["elf/libaxpy_debug.so"]["reasons"][0]
    assert binaries["elf/libaxpy_mixed.so"]["kernels"] == {
        "modules": {"total": 1, "with_ptx": 1, "without_ptx": 0, "debug_ptx_only": 0, "codeless_containers": 1},
        "state": "ptx-available",
        "sass": ["sm_86", "sm_90a"],
        "ptx": [{"arch": "sm_90", "isa": "9.0", "target": "portable"}],
        "relocatable_ptx": [],
        "lto_ir": [],
        "containers": 2,
        "sections": [".nv_fatbin"],
        "compressed": True,
        # ZLUDA's PTX check of its one registered container (scan/read/ptx)
        "ptx_check": {"release": "v6-preview.69", "kernels": 1, "dropped_kernels": [], "first_refusal": None,
                      "containers": {"ok": 1, "functions_dropped": 0, "load_fails": 0, "empty_module": 0,
                                     "no_ptx": 0}, "demangled": {}},
        "unregistered_ptx_check": None,
    }
    assert binaries["pe/axpy_rel.dll"]["kernels"]["state"] == "relocatable-ptx-only"
    # its -rdc PTX is never registered: checked apart, outside ptx_check and the verdict
    assert binaries["pe/axpy_rel.dll"]["kernels"]["ptx_check"] is None
    assert binaries["pe/axpy_rel.dll"]["kernels"]["unregistered_ptx_check"] == {
        "release": "v6-preview.69", "sections": ["__nv_rel"], "kernels": 1, "dropped_kernels": 0,
        "first_refusal": None,
        "containers": {"ok": 1, "functions_dropped": 0, "load_fails": 0, "empty_module": 0, "no_ptx": 0}}
    # a corrupt fat binary is one per-file error; the binary's imports still count
    errors = {e["path"]: e["stage"] for e in report["errors"]}
    assert errors == {
        "corrupt/axpy_fatb_cut.dll": "kernels",
        "corrupt/libaxpy_mixed_cut.so": "kernels",
        "corrupt/libaxpy_sass86_oversize.so": "kernels",
    }
    assert "corrupt/libaxpy_mixed_cut.so" in binaries


def test_ptx_acceptance_depends_on_the_release(scan):
    """ZLUDA v6 parses `.target sm_86, debug` (ptx_parser/src/lib.rs:549-558 at
    3fe12063), v5 does not; v5 also refuses a module without PTX, said as a
    note for the device-link stub (whether the runtime loads it is not known)."""
    newer = by_path(scan(FIXTURES / "kernels" / "elf", zluda_release="v6"))
    assert newer["libaxpy_debug.so"]["verdict"] == "ready"
    assert newer["libaxpy_mixed.so"]["notes"] == []
    older = by_path(scan(FIXTURES / "kernels" / "elf", zluda_release="v5"))
    assert older["libaxpy_debug.so"]["verdict"] == "blocked"
    assert older["libaxpy_mixed.so"]["verdict"] == "ready"
    (note,) = older["libaxpy_mixed.so"]["notes"]
    assert note.startswith("fat binary containers without PTX or code (nvlink's device-link stub): 1; ZLUDA v5 refuses")
    assert "zluda/src/impl/module.rs:29-53" in note


def test_by_name_loads_are_edges_that_degrade_at_most(scan):
    report = scan(FIXTURES / "byname")
    binaries = by_path(report)
    loader = binaries["loader.dll"]
    assert {d["name"]: (d["load"], d["family"], d["route"]) for d in loader["dependencies"] if d["family"]} == {
        "cudnn64_9.dll": ("by-name", "dnn", "redirect"),
        "cublasLt64_12.dll": ("by-name", "blaslt", "redirect"),
        "nvrtc64_%d_0.dll": ("by-name", "nvrtc", "passthrough"),
        "cufft64_%d.dll": ("by-name", "fft", "stub"),
    }
    assert loader["verdict"] == "degraded"
    assert loader["reasons"] == ["cufft64_%d.dll: ZLUDA's cuFFT replacement has no implemented functions; every call returns NOT_SUPPORTED"]
    elf = binaries["libloader.so"]
    tensorrt = dependency(elf, "libnvinfer.so.10")
    assert (tensorrt["load"], tensorrt["route"]) == ("by-name", "blocked")
    # a blocked library loaded by name degrades the binary; it does not block it
    assert elf["verdict"] == "degraded"
    assert elf["reasons"][0].startswith("libnvinfer.so.10 (loaded by name): the binary loads, but what uses it fails; needs TensorRT")
    # Cython's compressed string table is read too
    for module in ("cython_lzss.so", "cython_zlib.so"):
        names = {d["name"] for d in binaries[module]["dependencies"]}
        assert names >= {"libcudnn.so.9", "libcusolver.so.11", "libnvrtc.so.%d"}
    assert binaries["plain.dll"]["verdict"] == "no-cuda"
