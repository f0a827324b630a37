"""Calls through the CUDA runtime reach the driver (issue 30, item 6; docs/exit-status.md, docs/rules.md).

NVIDIA's cudart runs unchanged on ZLUDA's driver, so an application's cudart imports are judged by the
driver functions they end in: rules/runtime/cudart-to-driver.toml (tools/cudart_driver_map.py, from the
See also of each function in NVIDIA's cuda_runtime_api.h), against the release's driver table.

At vosen/ZLUDA v6-preview.69 (87531d39) the driver functions below are declared
(cuda_macros/src/cuda.rs: cuMemAllocManaged :3804, cuDeviceGetPCIBusId :3928, cuOccupancyMaxActive-
BlocksPerMultiprocessor :16219, cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags :16268,
cuLaunchCooperativeKernel :20559, cuMemAllocAsync :20760) and, except ...WithFlags (zluda/src/lib.rs:182),
absent from the implemented list of zluda/src/lib.rs:67-209, so the `unimplemented` macro
(zluda/src/lib.rs:19-31) makes them return r#impl::unimplemented(), CUDA_ERROR_NOT_SUPPORTED in a release
build (zluda/src/impl/mod.rs:25-28). Fixtures: fixtures/pe/runtime_calls.exe, fixtures/elf/app_runtime
(fixtures/build.sh, mingw-w64 and gcc).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, REPO, by_path

from cuda4amd.cli import main
from cuda4amd.cli.output import EXIT_FOR_VERDICT
from cuda4amd.rules import RulesError, load_rules
from cuda4amd.rules.cudart import CUDART_FILE, DOCS_PREFIX

RULE_FILE = REPO / "rules" / "runtime" / CUDART_FILE
#: runtime function -> (driver function, its state at v6-preview.69)
STUBBED = {
    "cudaDeviceGetPCIBusId": "cuDeviceGetPCIBusId",
    "cudaLaunchCooperativeKernel": "cuLaunchCooperativeKernel",
    "cudaMallocAsync": "cuMemAllocAsync",
    "cudaMallocManaged": "cuMemAllocManaged",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor": "cuOccupancyMaxActiveBlocksPerMultiprocessor",
}
IMPLEMENTED = {
    "cudaMalloc": "cuMemAlloc",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags": "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
}
#: imported by the fixtures, not mapped: NVIDIA documents several driver functions / none
UNMAPPED = ("cudaMemcpy", "cudaOccupancyAvailableDynamicSMemPerBlock")
CUDA = Path("/usr/local/cuda-13.0")


def test_the_shipped_mapping_cites_nvidias_documentation(rules):
    calls = rules.cudart_driver.calls
    assert len(calls) > 100
    for runtime, driver in {**STUBBED, **IMPLEMENTED}.items():
        assert calls[runtime].driver == driver
    for name in UNMAPPED:
        assert name not in calls
    for call in calls.values():
        assert call.doc.startswith(DOCS_PREFIX) and call.source.startswith("cuda_runtime_api.h:") and call.section
    assert calls["cudaMallocManaged"].section == "Memory Management"
    assert calls["cudaMallocManaged"].doc.endswith("group__CUDART__MEMORY.html")
    notes = " ".join(rules.cudart_driver.provenance[0].notes)
    assert "cudaMemcpy" in notes and "nothing documented" in notes
    # a See also that is a cross-reference, or a function cudart answers itself, is not where a call ends
    for name in ("cudaStreamGetDevice", "cudaGraphConditionalHandleCreate", "cudaGetErrorName", "cudaGetErrorString",
                 "cudaRuntimeGetVersion"):
        assert name not in calls and name in notes
    # a group reopened further down the header keeps its section (\addtogroup CUDART_DEVICE)
    assert calls["cudaSetDevice"].section == "Device Management"


def test_release_table_states_of_the_driver_functions(rules):
    table = rules.release("v6-preview.69").functions["driver"]
    assert {d: table[d] for d in STUBBED.values()} == dict.fromkeys(STUBBED.values(), "stub")
    assert table["cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags"] == "implemented"
    assert table["cuMemAlloc_v2"] == "implemented"  # cudaMalloc's cuMemAlloc, as a request: its newest _vN


@pytest.mark.skipif(not (CUDA / "include" / "cuda_runtime_api.h").is_file(), reason="CUDA 13.0 headers absent")
def test_the_tool_regenerates_the_shipped_file(tmp_path):
    import subprocess
    import sys

    out = tmp_path / CUDART_FILE
    subprocess.run([sys.executable, str(REPO / "tools" / "cudart_driver_map.py"), "--cuda", str(CUDA),
                    "--out", str(out)], check=True, capture_output=True)
    assert out.read_bytes() == RULE_FILE.read_bytes()


@pytest.mark.parametrize("name", ["pe/runtime_calls.exe", "elf/app_runtime"])
def test_cudart_imports_ending_in_driver_stubs_are_degraded(name, tmp_path, scan):
    shutil.copy(FIXTURES / name, tmp_path / Path(name).name)
    report = scan(tmp_path)
    row = by_path(report)[Path(name).name]
    assert row["verdict"] == "degraded"
    reasons = [r for r in row["reasons"] if "end in a driver function that is a ZLUDA stub" in r]
    assert len(reasons) == 1, row["reasons"]
    reason = reasons[0]
    for runtime, driver in STUBBED.items():
        assert f"{runtime} → {driver}" in reason
    for runtime in (*IMPLEMENTED, *UNMAPPED):
        assert f"{runtime} →" not in reason
    assert "NVIDIA CUDA Runtime API, See also of each:" in reason and "Memory Management" in reason
    assert report["verdict"] == "partial"
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["scan", str(tmp_path), "--host", "none"])
    assert result.exit_code == EXIT_FOR_VERDICT["partial"] == 3


def test_cudart_imports_ending_in_implemented_driver_functions_stay_ready(tmp_path, scan):
    shutil.copy(FIXTURES / "pe" / "runtime_user.exe", tmp_path)  # cudaMalloc, cudaFree, cudaLaunchKernel
    assert by_path(scan(tmp_path))["runtime_user.exe"]["verdict"] == "ready"


def rules_folder(tmp_path: Path, body: str) -> Path:
    (tmp_path / "runtime").mkdir(parents=True, exist_ok=True)
    (tmp_path / "runtime" / CUDART_FILE).write_text(
        "[provenance]\ngenerated_by = 'hand'\nsources = ['test']\n\n" + body, encoding="utf-8")
    return tmp_path


ROW = ("[[function]]\nruntime = '{runtime}'\ndriver = '{driver}'\nsection = 'Memory Management'\n"
       "doc = '{doc}'\nsource = 'cuda_runtime_api.h:1'\n")
DOC = DOCS_PREFIX + "group__CUDART__MEMORY.html"


def test_an_extra_folder_replaces_a_row(tmp_path):
    extended = load_rules([rules_folder(tmp_path, ROW.format(runtime="cudaMalloc", driver="cuMemAllocManaged",
                                                            doc=DOC))])
    assert extended.cudart_driver.calls["cudaMalloc"].driver == "cuMemAllocManaged"
    assert extended.cudart_driver.calls["cudaFree"].driver == "cuMemFree"  # the shipped rows stay


@pytest.mark.parametrize("row, message", [
    (ROW.format(runtime="cuMemAlloc", driver="cuMemAlloc", doc=DOC), "not a CUDA runtime function name"),
    (ROW.format(runtime="cudaMalloc", driver="cudaMalloc", doc=DOC), "not a CUDA driver function name"),
    (ROW.format(runtime="cudaMalloc", driver="cuMemAlloc", doc="https://example.com/x"), "CUDA Runtime API"),
    (ROW.format(runtime="cudaMalloc", driver="cuMemAlloc", doc=DOC) * 2, "mapped twice"),
    (ROW.format(runtime="cudaMalloc", driver="cuMemAlloc", doc=DOC).replace("source", "sauce"), "unknown key"),
    ("[cudart]\nx = 1\n", "unknown top-level key"),
])
def test_invalid_rows_are_refused_when_loaded(tmp_path, row, message):
    with pytest.raises(RulesError, match=message):
        load_rules([rules_folder(tmp_path, row)])


def test_a_runtime_function_ending_in_a_driver_function_the_release_lacks_is_degraded(tmp_path):
    """v5's driver table lacks cuLogsCurrent (v6-preview.69 declares it): a row of an extra rules folder
    that maps cudaMalloc to it makes runtime_user.exe degraded at v5, the reason saying calling it fails."""
    import json

    folder = rules_folder(tmp_path / "rules", ROW.format(runtime="cudaMalloc", driver="cuLogsCurrent", doc=DOC))
    shutil.copy(FIXTURES / "pe" / "runtime_user.exe", tmp_path)
    result = CliRunner().invoke(main, ["scan", str(tmp_path / "runtime_user.exe"), "--host", "none", "--rules",
                                       str(folder), "--zluda-release", "v5", "--format", "json"])
    row = by_path(json.loads(result.output))["runtime_user.exe"]
    assert row["verdict"] == "degraded"
    assert any("cudaMalloc → cuLogsCurrent" in r and "not exported by ZLUDA's driver, so calling it fails" in r
               for r in row["reasons"]), row["reasons"]
