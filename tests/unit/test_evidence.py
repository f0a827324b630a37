"""The smoke probes and their runner, against stand-in libraries built here with gcc
(tests/evidence_fakes/*.c), and the recorded NVIDIA outcomes (benchmarks/evidence/)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cuda4amd.evidence.record import OutcomeFileError, outcomes_of, probe_document, read_outcomes
from cuda4amd.evidence.runner import STATUSES, Outcome, classify, run_probe, run_probes

FAKES = Path(__file__).parents[1] / "evidence_fakes"
EVIDENCE = Path(__file__).parents[2] / "benchmarks" / "evidence"


@pytest.fixture(scope="module")
def fakes(tmp_path_factory) -> dict[str, str]:
    if shutil.which("gcc") is None or os.name == "nt":
        pytest.skip("needs gcc on Linux to build the stand-in libraries")
    out = tmp_path_factory.mktemp("fakes")
    built = {}
    for source in sorted(FAKES.glob("*.c")):
        target = out / f"lib{source.stem}.so"
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(target), str(source)], check=True)
        built[source.stem] = str(target)
    return built


def probe(family, fakes, mode="pass", library=None, limit=20.0, idle=2.0) -> Outcome:
    env = dict(os.environ, FAKECUDA_MODE=mode)
    return run_probe(family, env=env, drivers=[fakes["fakecuda"]], libraries=[library] if library else [],
                     limit=limit, idle=idle)


def test_driver_probe_passes_on_a_driver_that_adds(fakes):
    o = probe("driver_api", fakes)
    assert o.status == "pass", o
    assert o.loaded and o.facts["device"] == "Fake GPU" and o.facts["compute_capability"] == "8.6"
    assert "vector_add of 1000 floats" in o.detail


def test_a_wrong_sum_is_incorrect(fakes):
    o = probe("driver_api", fakes, "wrong")
    assert o.status == "incorrect" and "value 0 is 251.0, expected 250.0" in o.detail


def test_not_supported_is_a_safe_refusal_and_names_the_call(fakes):
    o = probe("driver_api", fakes, "refuse")
    assert o.status == "unsupported" and o.loaded
    assert "cuModuleLoadData returned 801 (CUDA_ERROR_NOT_SUPPORTED)" in o.detail


def test_busy_past_the_limit_is_a_timeout_idle_is_a_hang(fakes):
    if not Path("/proc/self/stat").exists():
        pytest.skip("CPU time is read from /proc")
    busy = probe("driver_api", fakes, "spin", limit=2.5, idle=1.0)
    assert busy.status == "timeout" and busy.step == "cuModuleLoadData"
    stuck = probe("driver_api", fakes, "sleep", limit=2.5, idle=1.0)
    assert stuck.status == "hang" and stuck.step == "cuModuleLoadData"
    assert "no progress in the last 1 s" in stuck.detail
    gpu = probe("driver_api", fakes, "syncspin", limit=2.5, idle=1.0)
    assert gpu.status == "hang" and gpu.step == "cuCtxSynchronize" and "waiting for the GPU" in gpu.detail


def test_a_signal_is_a_crash_in_the_last_step(fakes):
    o = probe("driver_api", fakes, "segv")
    assert o.status == "crash" and o.step == "cuLaunchKernel" and "SIGSEGV" in o.detail


def test_blas_probe_compares_sgemm_with_python(fakes):
    o = probe("blas", fakes, library=fakes["fakecublas"])
    assert o.status == "pass" and "cublasSgemm_v2 3x4 by 4x2" in o.detail


def test_cufft_not_supported_is_unsupported_never_pass(fakes):
    o = probe("fft", fakes, library=fakes["fakecufft"])
    assert o.status == "unsupported" and "CUFFT_NOT_SUPPORTED" in o.detail


def test_a_library_without_the_call_refuses(fakes):
    o = probe("fft", fakes, library=fakes["fakecublas"])
    assert o.status == "unsupported" and "cufftPlan1d is not exported" in o.detail


def test_a_missing_library_is_not_loaded(fakes):
    o = probe("blas", fakes, library="/nonexistent/libcublas.so.12")
    assert o.status == "unsupported" and not o.loaded and "cannot load cuBLAS" in o.detail


def test_run_probes_puts_the_driver_first_and_records(fakes, tmp_path):
    outcomes = run_probes(["fft", "blas"], names={"driver_api": [fakes["fakecuda"]], "blas": [fakes["fakecublas"]],
                                                    "fft": [fakes["fakecufft"]]})
    assert [o.family for o in outcomes] == ["driver_api", "blas", "fft"]
    doc = probe_document(outcomes, through="test")
    path = tmp_path / "o.json"
    path.write_text(json.dumps(doc))
    assert [o.status for o in read_outcomes(path)] == ["pass", "pass", "unsupported"]


def test_classify_rules():
    assert classify(None, -11, killed=None)[0] == "crash"
    assert classify({"status": "pass"}, 0, killed=None) == ("pass", "")
    status, detail = classify({"status": "pass", "detail": "ok"}, 3, killed=None)
    assert status == "crash" and "exit status 3" in detail  # a crash at exit is a crash
    assert classify({"status": "weird"}, 0, killed=None)[0] == "crash"
    assert classify(None, None, killed="hang")[0] == "hang"


def test_recorded_nvidia_run_passes_every_probe():
    """The run on an NVIDIA H200 (tools/evidence_nvidia.sh, output in benchmarks/evidence/)."""
    for name in ("2026-12-01-nvidia-h200-probes.json", "2026-12-01-nvidia-h200-probes-warm.json"):
        outcomes = read_outcomes(EVIDENCE / name)
        assert {o.family: o.status for o in outcomes} == dict.fromkeys(
            ("driver_api", "blas", "blaslt", "sparse", "dnn", "fft"), "pass")
        assert all(o.status in STATUSES for o in outcomes)
        assert outcomes[0].facts["device"] == "NVIDIA H200" and outcomes[0].facts["compute_capability"] == "9.0"


def test_bad_outcome_files_are_refused(tmp_path):
    with pytest.raises(OutcomeFileError):
        outcomes_of({"schema": "other"})
    with pytest.raises(OutcomeFileError):
        outcomes_of({"schema": "cuda4amd.probes/1", "outcomes": [{"family": "blas", "probe": "blas",
                                                                 "status": "fine", "detail": ""}]})
    bad = tmp_path / "x.json"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(OutcomeFileError):
        read_outcomes(bad)


def _bin(path, verdict, *fams):
    return {"path": path, "verdict": verdict, "dependencies": [{"family": f, "route": "redirect"} for f in fams]}


def test_levels_are_never_higher_than_observed():
    from cuda4amd.evidence.levels import evidence_section

    binaries = [_bin("app.exe", "ready", "driver_api", "blas", "fft"), _bin("tool.exe", "ready", "blas"),
                _bin("trt.dll", "blocked", "blas"), _bin("other.exe", "ready", "sparse")]
    checks = [{"what": "dependency", "binary": b, "family": f, "ok": True}
              for b, f in (("app.exe", "driver_api"), ("app.exe", "blas"), ("app.exe", "fft"), ("tool.exe", "blas"))]
    checks.append({"what": "dependency", "binary": "other.exe", "family": "sparse", "ok": False})
    outcomes = [{"family": "driver_api", "status": "pass", "loaded": True, "detail": "ok"},
                {"family": "blas", "status": "pass", "loaded": True, "detail": "ok"},
                {"family": "fft", "status": "unsupported", "loaded": True, "detail": "CUFFT_NOT_SUPPORTED"},
                {"family": "sparse", "status": "pass", "loaded": True, "detail": "ok"}]
    ev = evidence_section(binaries, verification={"checks": checks}, outcomes=outcomes, through="zluda")
    fams = {f: v["level"] for f, v in ev["families"].items()}
    assert fams == {"driver_api": "functional-pass", "blas": "functional-pass", "fft": "safe-refusal",
                    "sparse": "static"}  # sparse: its link check failed, so its probe does not count
    assert ev["binaries"] == {"app.exe": "safe-refusal", "tool.exe": "functional-pass", "trt.dll": "static",
                              "other.exe": "static"}


def test_a_probe_that_loaded_but_failed_is_loadable_and_one_that_never_loaded_adds_nothing():
    from cuda4amd.evidence.levels import evidence_section, probe_level

    assert probe_level({"status": "crash", "loaded": True}) == "loadable"
    assert probe_level({"status": "unsupported", "loaded": False}) is None
    ev = evidence_section([_bin("a", "ready", "blas")], outcomes=[{"family": "blas", "status": "hang",
                                                                   "loaded": True, "detail": "stuck"}])
    assert ev["families"]["blas"] == {"level": "loadable", "route": "redirect", "probe": "hang", "detail": "stuck"}


def test_recorded_outcomes_give_levels_without_a_gpu():
    """The recorded NVIDIA outcomes, replayed into the levels of the demo tool's report."""
    from cuda4amd.evidence.levels import evidence_section

    scan = json.loads((Path(__file__).parents[1] / "goldens" / "demo-tool" / "scan.json").read_text())
    outcomes = [o.to_dict() for o in read_outcomes(EVIDENCE / "2026-12-01-nvidia-h200-probes.json")]
    ev = evidence_section(scan["binaries"], outcomes=outcomes, through="nvidia")
    assert ev["families"]["blas"]["level"] == "functional-pass"
    assert ev["families"]["tensorrt"]["level"] == "static"  # no probe for it
    assert ev["binaries"]["plugins/trt_export.dll"] == "static"  # blocked
