"""Acceptance: real Windows CUDA wheels from PyPI, scanned as wheels and as trees.

Expected facts are computed independently of cuda4amd's reader and rules:
imports with pefile, symbol states straight from the shared ZLUDA tables.
"""
from __future__ import annotations

import csv

import pytest
from conftest import SHARED_DATA, by_path, dependency
from wheelcache import Unavailable, unpacked, wheel

pytestmark = pytest.mark.acceptance

CUPY = "cupy-cuda12x==14.2.0"
CTRANSLATE2 = "ctranslate2==4.8.5"
CUDART = "nvidia-cuda-runtime-cu12==12.9.79"
CUFFT = "nvidia-cufft-cu12==11.4.1.4"


def fetch(get, spec):
    try:
        return get(spec)
    except Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def cupy_tree():
    return fetch(unpacked, CUPY)


@pytest.fixture(scope="module")
def cupy_report(rules, cupy_tree):
    from cuda4amd.report.document import build
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    return build(run_scan(ScanOptions(target=str(cupy_tree)), rules=rules))


def pefile_imports(path, dll):
    import pefile

    pefile.MAX_IMPORT_SYMBOLS = 1_000_000
    image = pefile.PE(str(path), fast_load=True)
    image.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"]])
    for entry in image.DIRECTORY_ENTRY_IMPORT:
        if entry.dll.decode().lower() == dll.lower():
            return sorted(i.name.decode() for i in entry.imports if i.name)
    return []


def zluda_table(tag, library):
    path = SHARED_DATA / "zluda" / f"zluda-{tag}-functions.tsv"
    if not path.exists():
        pytest.skip(f"shared data not found at {path}")
    with path.open(newline="") as handle:
        return {row["function"]: row["status"] for row in csv.DictReader(handle, delimiter="\t") if row["library"] == library}


def test_cupy_cusolver_extensions_are_blocked(cupy_report):
    binaries = by_path(cupy_report)
    for path in ("cupy_backends/cuda/libs/cusolver.cp312-win_amd64.pyd", "cupyx/_cusolver.cp312-win_amd64.pyd"):
        dep = dependency(binaries[path], "cusolver64_11.dll")
        assert (dep["family"], dep["load"], dep["route"]) == ("solver", "static", "blocked")
        assert binaries[path]["verdict"] == "blocked"
    importers = sorted(p for p, b in binaries.items() if any(d["name"].lower() == "cusolver64_11.dll" for d in b["dependencies"]))
    assert importers == ["cupy_backends/cuda/libs/cusolver.cp312-win_amd64.pyd", "cupyx/_cusolver.cp312-win_amd64.pyd"]


def test_cupy_cublas_extension_is_classified_symbol_by_symbol(cupy_report, cupy_tree):
    path = "cupy_backends/cuda/libs/cublas.cp312-win_amd64.pyd"
    imported = pefile_imports(cupy_tree / path, "cublas64_12.dll")
    assert len(imported) == 104
    table = zluda_table("v6-preview.69", "blas")
    expected: dict[str, list[str]] = {}
    for name in imported:
        expected.setdefault(table.get(name, "missing"), []).append(name)
    dep = dependency(by_path(cupy_report)[path], "cublas64_12.dll")
    assert dep["route"] == "redirect"
    assert dep["symbols"] == expected
    # cupy 14.2 calls only names ZLUDA exports: 10 implemented, 94 stubs, none missing
    assert {state: len(names) for state, names in expected.items()} == {"implemented": 10, "stub": 94}
    assert by_path(cupy_report)[path]["verdict"] == "degraded"


def test_cupy_other_libraries(cupy_report):
    binaries = by_path(cupy_report)
    routes = {
        ("cupy/cuda/cufft.cp312-win_amd64.pyd", "cufft64_11.dll"): "stub",
        ("cupy/cuda/jitify.cp312-win_amd64.pyd", "nvrtc64_120_0.dll"): "passthrough",
        ("cupy_backends/cuda/libs/curand.cp312-win_amd64.pyd", "curand64_10.dll"): "blocked",
        ("cupy_backends/cuda/libs/cutensor.cp312-win_amd64.pyd", "cuTENSOR.dll"): "blocked",
        ("cupy_backends/cuda/libs/cusparse.cp312-win_amd64.pyd", "cusparse64_12.dll"): "redirect",
    }
    for (path, dll), route in routes.items():
        assert dependency(binaries[path], dll)["route"] == route, (path, dll)
    assert binaries["cupy/cuda/jitify.cp312-win_amd64.pyd"]["verdict"] == "ready"
    assert cupy_report["verdict"] == "partial"
    assert cupy_report["errors"] == []


def test_scanning_the_wheel_equals_scanning_its_tree(rules, cupy_report):
    from cuda4amd.report.document import build
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    archive = fetch(wheel, CUPY)
    from_wheel = build(run_scan(ScanOptions(target=str(archive)), rules=rules))
    assert from_wheel["target"]["kind"] == "archive"
    assert from_wheel["binaries"] == cupy_report["binaries"]
    assert from_wheel["verdict"] == cupy_report["verdict"]


def test_cuda_runtime_wheel(scan):
    report = scan(fetch(unpacked, CUDART))
    cudart = by_path(report)["nvidia/cuda_runtime/bin/cudart64_12.dll"]
    assert cudart["nvidia_library"]["family"] == "runtime_api"
    assert cudart["nvidia_library"]["route"] == "passthrough"
    assert cudart["verdict"] == "ready"
    assert report["verdict"] == "ready"


def test_cufft_wheel(scan):
    report = scan(fetch(unpacked, CUFFT))
    binaries = by_path(report)
    cufft = binaries["nvidia/cufft/bin/cufft64_11.dll"]
    assert (cufft["nvidia_library"]["route"], cufft["verdict"]) == ("stub", "degraded")
    cufftw = binaries["nvidia/cufft/bin/cufftw64_11.dll"]
    assert cufftw["nvidia_library"]["family"] == "fftw" and cufftw["verdict"] == "blocked"
    dep = dependency(cufftw, "cufft64_11.dll")
    assert (dep["resolved"], dep["how"], dep["route"]) == ("nvidia/cufft/bin/cufft64_11.dll", "same-folder", "stub")
    assert report["verdict"] == "partial"


def test_ctranslate2_wheel(scan):
    report = scan(fetch(unpacked, CTRANSLATE2))
    binaries = by_path(report)
    cudnn = binaries["ctranslate2/cudnn64_9.dll"]
    assert cudnn["nvidia_library"]["route"] == "redirect" and cudnn["verdict"] == "ready"
    assert binaries["ctranslate2/ctranslate2.dll"]["machine"] == "x86_64"
    assert report["errors"] == []


CUPY_SASS = ["sm_50", "sm_52", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100f", "sm_120f"]


def test_cupy_kernel_extensions_carry_ptx_and_sass(cupy_report):
    # archs verified independently by fixtures/kernels/carve.py, a separate carver
    binaries = by_path(cupy_report)
    for path in ("cupy/cuda/cub.cp312-win_amd64.pyd", "cupy/cuda/thrust.cp312-win_amd64.pyd", "cupy/random/_generator_api.cp312-win_amd64.pyd"):
        kernels = binaries[path]["kernels"]
        assert kernels["state"] == "ptx-available", path
        assert kernels["sass"] == CUPY_SASS
        assert kernels["ptx"] == [{"arch": "sm_100", "isa": "8.8", "target": "portable"}]
        assert kernels["modules"]["without_ptx"] == 0, path
        assert kernels["sections"] == [".nv_fatb"]
        # the statically linked CUDA runtime loads the driver by name
        assert dependency(binaries[path], "nvcuda.dll")["load"] == "by-name"
        # PTX in every module; what ZLUDA's parser then drops decides (tests/integration/test_ptx_acceptance.py)
        check = kernels["ptx_check"]
        assert check["containers"]["load_fails"] == 0, path
        assert binaries[path]["verdict"] == ("degraded" if check["dropped_kernels"] else "ready"), path


def test_ctranslate2_loads_cublas_by_name_and_its_kernels_carry_ptx(scan):
    report = scan(fetch(unpacked, CTRANSLATE2))
    library = by_path(report)["ctranslate2/ctranslate2.dll"]
    cublas = dependency(library, "cublas64_12.dll")
    assert (cublas["load"], cublas["family"], cublas["route"]) == ("by-name", "blas", "redirect")
    assert library["kernels"]["state"] == "ptx-available"
    assert library["kernels"]["ptx"] == [{"arch": "sm_86", "isa": "8.7", "target": "portable"}]
    assert library["kernels"]["sass"] == ["sm_53", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86"]
    # its PTX has bf16 FMAs v6-preview.69's parser has no rule for: those kernels are dropped
    assert library["verdict"] == "degraded"
    assert any("41 of 539 kernels are dropped" in r and "fma.rn.bf16" in r for r in library["reasons"])


def test_installed_packages_are_reported_per_distribution(tmp_path, scan):
    import subprocess
    import sys

    wheels = [str(fetch(wheel, spec)) for spec in (CUPY, CTRANSLATE2, CUFFT)]
    site = tmp_path / "site-packages"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(site),
         "--platform", "win_amd64", "--python-version", "3.12", "--only-binary=:all:", *wheels],
        check=True,
    )
    report = scan(site)
    packages = {p["name"]: p for p in report["packages"]}
    assert {name: (p["version"], p["verdict"], p["framework"]) for name, p in packages.items()} == {
        "cupy-cuda12x": ("14.2.0", "partial", "cupy"),
        "ctranslate2": ("4.8.5", "partial", "ctranslate2"),  # its dropped bf16 kernels
        "nvidia-cufft-cu12": ("11.4.1.4", "partial", None),
    }
    cupy = packages["cupy-cuda12x"]
    assert cupy["reasons"][0].startswith("curand.cp312-win_amd64.pyd: curand64_10.dll: needs cuRAND")
    assert 'set CUPY_ACCELERATORS="" so CuPy avoids cuTENSOR' in cupy["advice"]
    owned = {b["path"]: b["distribution"] for b in report["binaries"]}
    assert owned["cupy/cuda/cub.cp312-win_amd64.pyd"] == "cupy-cuda12x"
    assert owned["nvidia/cufft/bin/cufftw64_11.dll"] == "nvidia-cufft-cu12"
    # the NVIDIA library ZLUDA does not replace is judged by its own kernels
    cufftw = by_path(report)["nvidia/cufft/bin/cufftw64_11.dll"]
    assert cufftw["nvidia_library"]["basis"] == "in-tree" and cufftw["kernels"]["state"] == "sass-only"
