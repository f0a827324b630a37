"""`cuda4amd trace explain`: traces written by fixtures/trace/make_trace.py, which
follows zluda_trace's writer (see its docstring), as a folder, a zip and a tar."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda4amd.cli import main
from cuda4amd.rules.ruleset import load_rules
from cuda4amd.trace.explain import explain, family_of
from cuda4amd.trace.read import TraceError, open_trace, parse_log

MAKE = FIXTURES / "trace" / "make_trace.py"
COMMITTED = FIXTURES / "trace" / "zluda_log"


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trace") / "zluda"
    subprocess.run([sys.executable, str(MAKE), str(out)], check=True)
    return out


def test_the_committed_fixture_is_what_the_generator_writes(traces):
    for path in sorted(traces.rglob("*")):
        if path.is_file():
            assert (COMMITTED / path.relative_to(traces)).read_bytes() == path.read_bytes(), path


def run_of(traces, name="app"):
    rel = load_rules().release("v6-preview.69")
    doc = explain(open_trace(traces), release=rel, path="t")
    return {r["run"]: r for r in doc["runs"]}[name]


def test_failed_calls_grouped_with_zludas_state(traces):
    run = run_of(traces)
    rows = {r["function"]: r for r in run["failed"]}
    assert rows["cufftPlan1d"]["family"] == "fft" and rows["cufftPlan1d"]["state"] == "stub"
    assert rows["cufftPlan1d"]["count"] == 3 and rows["cufftPlan1d"]["statuses"] == {"CUFFT_NOT_SUPPORTED": 3}
    assert rows["cusparseSpMV"]["state"] == "stub"
    assert rows["cuModuleLoadData"]["statuses"] == {"CUDA_ERROR_INVALID_PTX": 1}
    assert "cublasSgemm_v2" not in rows  # succeeded
    harmless = {(h["function"], h["status"]) for h in run["harmless"]}
    assert ("cuGetProcAddress_v2", "CUDA_ERROR_NOT_FOUND") in harmless  # nested under cublasCreate_v2
    assert ("cuDevicePrimaryCtxRelease", "CUDA_ERROR_DEINITIALIZED") in harmless
    assert run["missing_in_library"] == ["cuGraphInstantiateWithParams"]


def test_last_launch_is_traced_to_its_kernel_and_module(traces):
    launch = run_of(traces)["last_launch"]
    assert launch["kernel"] == "vector_add" and launch["module"] == ["module_0001_01.ptx"]
    assert launch["launches"] == 2 and launch["module_call"] == "cuModuleLoadData"


def test_rejected_ptx_and_failed_load(traces):
    run = run_of(traces)
    assert run["ptx_errors"][0]["ptx"] == "module_0002_01.ptx" and run["ptx_errors"][0]["target"] == "sm_90a"
    assert "wgmma" in run["ptx_errors"][0]["errors"][0]
    assert run["module_load_failures"][0]["files"] == ["module_0002_01.ptx"]
    assert run["modules"]["ptx"] == 2 and run["modules"]["other"] == 1
    assert any("PTX parser rejected" in a for a in run["advice"])


def test_zip_and_tar_read_like_the_folder(traces, tmp_path):
    zipped = tmp_path / "logs.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        for p in traces.rglob("*"):
            if p.is_file():
                z.write(p, "zluda/" + p.relative_to(traces).as_posix())
    tarred = tmp_path / "logs.tar.gz"
    with tarfile.open(tarred, "w:gz") as t:  # what troubleshooting.md asks for: tar -C LOG_DIR .
        t.add(traces, ".")
    want = run_of(traces)
    rel = load_rules().release("v6-preview.69")
    for archive in (zipped, tarred):
        got = {r["run"]: r for r in explain(open_trace(archive), release=rel, path="t")["runs"]}["app"]
        assert got["failed"] == want["failed"] and got["last_launch"] == want["last_launch"]
        assert got["ptx_errors"] == want["ptx_errors"]


def test_stderr_prefix_and_odd_lines_are_accepted():
    calls, lines, notes = parse_log("[ZLUDA_TRACE] cuInit(flags: 0) -> CUDA_SUCCESS\n"
                                    "[ZLUDA_TRACE]     Created trace directory /tmp/x \n"
                                    "garbage line\n\x00")
    assert calls[0].name == "cuInit" and calls[0].children[0].text.startswith("Created trace directory")
    assert lines == 3 and notes == 2


def test_argument_values_with_commas_in_strings():
    calls, _, _ = parse_log('cuModuleGetFunction(hfunc: 0x1, hmod: 0x2, name: "a, b") -> CUDA_SUCCESS\n')
    assert calls[0].arg("name") == '"a, b"' and calls[0].arg("hmod") == "0x2"


def test_family_of_names():
    assert family_of("cublasLtMatmul")[0] == "blaslt" and family_of("cublasSgemm_v2")[0] == "blas"
    assert family_of("cudnnCreate") == ("dnn", ("dnn9", "dnn8"))
    assert family_of("{CONTEXT_LOCAL_STORAGE_INTERFACE_V0301}::context_local_storage_get")[0] == "driver_api"


def test_not_a_trace_is_a_clear_error(tmp_path):
    with pytest.raises(TraceError, match=re.escape("no log.txt")):
        open_trace(tmp_path)
    bad = tmp_path / "x.zip"
    bad.write_bytes(b"PK\x03\x04 broken")
    with pytest.raises(TraceError):
        open_trace(bad)
    result = CliRunner().invoke(main, ["trace", "explain", str(tmp_path)])
    assert result.exit_code == 2 and "not a ZLUDA trace" in result.output


def test_cli_formats_and_the_scan_report(traces, tmp_path):
    scan = {"schema": "cuda4amd.scan/1", "zluda": {"release": "v6-preview.69"}, "binaries": [
        {"path": "bin/app", "dependencies": [{"family": "fft", "symbols": {"stub": ["cufftPlan1d"]}}]}]}
    report = tmp_path / "scan.json"
    report.write_text(json.dumps(scan))
    out = tmp_path / "e.json"
    result = CliRunner().invoke(main, ["trace", "explain", str(traces), "--report", str(report), "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    app = {r["run"]: r for r in doc["runs"]}["app"]
    assert {r["function"]: r for r in app["failed"]}["cufftPlan1d"]["imported_by"] == ["bin/app"]
    text = CliRunner().invoke(main, ["trace", "explain", str(traces)]).output
    assert "last kernel launch: vector_add" in text and "what to do:" in text
    md = CliRunner().invoke(main, ["trace", "explain", str(traces), "--format", "markdown"]).output
    assert md.startswith("# ZLUDA trace explained") and "| fft | `cufftPlan1d` | stub |" in md


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from([*list('cuInit(: 0x1,") -> CUDA_SUCCESS\n    [ZLUDA_TRACE] {}'), "\x00", "é"]),
               max_size=400))
def test_any_log_text_parses_without_error(text):
    calls, lines, notes = parse_log(text)
    assert notes <= lines
    from cuda4amd.trace.read import TraceRun

    run = TraceRun(name="x", where=".", calls=calls, files={}, side={}, lines=lines, unparsed=notes)
    explain([run], release=None, path="x")


def test_control_characters_of_a_trace_never_reach_the_terminal(tmp_path):
    """A trace is the traced program's text: its names are shown as visible escapes (report.escape)."""
    from cuda4amd.trace import render

    run = tmp_path / "app\x1b]0;owned\x07"
    run.mkdir()
    (run / "log.txt").write_text("cuInit(flags: 0) -> CUDA_SUCCESS\n"
                                 "cuBad\x1b[2J|`x(a: 1) -> CUDA_ERROR_NOT_SUPPORTED\n", encoding="utf-8")
    rules = load_rules()
    doc = explain(open_trace(tmp_path), release=rules.release(rules.default_release), scan=None, path=str(tmp_path))
    for shown in (render.text(doc), render.markdown(doc)):
        assert "\x1b" not in shown and "\x07" not in shown and "\\x1b" in shown
    result = CliRunner().invoke(main, ["trace", "explain", str(tmp_path)])
    assert result.exit_code == 0 and "\x1b" not in result.output


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="FIFOs")
def test_a_fifo_in_a_trace_folder_is_not_read(tmp_path):
    import os

    run = tmp_path / "app"
    run.mkdir()
    (run / "log.txt").write_text("cuInit(flags: 0) -> CUDA_SUCCESS\n", encoding="utf-8")
    os.mkfifo(run / "module_0001.log")
    [only] = open_trace(tmp_path)
    assert only.calls[0].name == "cuInit" and "module_0001.log" not in only.side
