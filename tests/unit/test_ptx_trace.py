"""`trace explain` says which kernel ZLUDA's PTX check drops when a lookup answers CUDA_ERROR_NOT_FOUND
(issue 29, item 3): from the module's PTX the trace saved, and from a scan report's PTX check."""
from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES

from cuda4amd.rules.ruleset import load_rules
from cuda4amd.trace.explain import explain
from cuda4amd.trace.read import open_trace

TAG = "v6-preview.69"


def trace(folder: Path, ptx: bytes | None, lookups: list[tuple[str, str]]) -> Path:
    """A trace as zluda_trace writes it (fixtures/trace/make_trace.py): one module loaded, kernels looked up."""
    run = folder / "zluda" / "app"
    run.mkdir(parents=True)
    lines = ["cuInit(flags: 0) -> CUDA_SUCCESS",
             "cuModuleLoadData(module: 0x10, image: 0x20) -> CUDA_SUCCESS"]
    if ptx is not None:
        lines.append("    Saved module to module_0001_01.ptx")
        (run / "module_0001_01.ptx").write_bytes(ptx)
    for name, status in lookups:
        lines.append(f'cuModuleGetFunction(hfunc: 0x0, hmod: 0x10, name: "{name}") -> {status}')
    (run / "log.txt").write_text("".join(line + "\n" for line in lines))
    return folder / "zluda"


def explained(path: Path, scan: dict | None = None) -> dict:
    doc = explain(open_trace(path), release=load_rules().release(TAG), scan=scan, path="t")
    return doc["runs"][0]


def test_a_kernel_the_parser_drops_is_named_with_the_refusal(tmp_path):
    ptx = (FIXTURES / "ptx" / "dropped_function.ptx").read_bytes()
    run = explained(trace(tmp_path, ptx, [("keep", "CUDA_SUCCESS"), ("drop_me", "CUDA_ERROR_NOT_FOUND"),
                                          ("drop_me", "CUDA_ERROR_NOT_FOUND")]))
    [row] = run["kernels_not_found"]  # once per name
    assert row["kernel"] == "drop_me" and row["module"] == ["module_0001_01.ptx"] and row["in_scan"] == []
    fate = row["in_trace"]
    assert fate["fate"] == "dropped" and fate["outcome"] == "functions_dropped"
    assert "red.global.add.f32" in fate["construct"] and f"@{TAG}" in fate["source"]
    [advice] = [a for a in run["advice"] if a.startswith("cuModuleGetFunction found no kernel drop_me")]
    assert "ZLUDA's PTX parser drops it at v6-preview.69" in advice and "red.global.add.f32" in advice


def test_a_kernel_the_module_does_not_have(tmp_path):
    ptx = (FIXTURES / "ptx" / "accepted.ptx").read_bytes()
    run = explained(trace(tmp_path, ptx, [("no_such_kernel", "CUDA_ERROR_NOT_FOUND")]))
    assert run["kernels_not_found"][0]["in_trace"]["fate"] == "not in the module"


def test_without_the_module_the_scan_report_says_it(tmp_path):
    scan = {"target": {"path": str(tmp_path / "gone")}, "binaries": [
        {"path": "lib/k.dll", "kernels": {"ptx_check": {
            "release": TAG, "dropped_kernels": ["_Z4axpyfPKfPfi"],
            "first_refusal": {"construct": "set.nan.f16.f16", "source": f"ptx_parser/src/lib.rs:2543@{TAG}"}}}},
        {"path": "lib/other.dll", "kernels": {"ptx_check": {"release": TAG, "dropped_kernels": []}}}]}
    run = explained(trace(tmp_path, None, [("_Z4axpyfPKfPfi", "CUDA_ERROR_NOT_FOUND")]), scan)
    [row] = run["kernels_not_found"]
    assert row["in_trace"] is None
    assert row["in_scan"] == [{"path": "lib/k.dll", "release": TAG, "container": None,
                               "first_refusal": scan["binaries"][0]["kernels"]["ptx_check"]["first_refusal"]}]
    assert any("the scan's PTX check of lib/k.dll drops it at v6-preview.69: set.nan.f16.f16" in a
               for a in run["advice"])


def test_nothing_known_says_what_to_do(tmp_path):
    run = explained(trace(tmp_path, None, [("k", "CUDA_ERROR_NOT_FOUND")]))
    [advice] = [a for a in run["advice"] if "found no kernel k" in a]
    assert "pass a scan report" in advice


def test_a_successful_lookup_is_not_listed(tmp_path):
    run = explained(trace(tmp_path, (FIXTURES / "ptx" / "accepted.ptx").read_bytes(),
                          [("_Z4axpyfPKfPfi", "CUDA_SUCCESS")]))
    assert run["kernels_not_found"] == []
