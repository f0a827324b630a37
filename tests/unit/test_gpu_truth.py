"""The GPU truth harness's comparison (tools/gpu_truth/compare.py), on data shaped like a real run."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "gpu_truth"))

from compare import classify_loads, compare, main, markdown, reached, replaced_families, template_regex

SITE = "/venv/lib/python3.12/site-packages"


def family_of(name: str) -> str | None:
    for stem, family in (("libcublas.", "blas"), ("libcudnn_graph", "dnn"), ("libcudnn.", "dnn"),
                         ("libcurand", "rand"), ("libcuda.so", "driver_api"), ("libnvidia-ptxjit", "unknown")):
        if name.startswith(stem):
            return family
    return None


def binary(path, distribution, verdict="ready", deps=(), kernels="none", ptx=(), family=None, route=None):
    return {"path": path, "distribution": distribution, "verdict": verdict, "reasons": [f"{path} reason"],
            "kernels": {"state": kernels, "ptx": [{"arch": a, "isa": "8.8"} for a in ptx]},
            "nvidia_library": {"family": family, "route": route} if family else None,
            "dependencies": [{"name": n, "resolved": r} for n, r in deps]}


REPORT = {
    "binaries": [
        binary("pkg/_core.so", "pkg", deps=[("libcublas.so.{version}", "nvidia/cublas/lib/libcublas.so.13"),
                                            ("libcudnn.so.9", "nvidia/cudnn/lib/libcudnn.so.9"),
                                            ("libcuda.so.1", None)]),
        binary("nvidia/cublas/lib/libcublas.so.13", "nvidia-cublas", family="blas", route="redirect"),
        binary("nvidia/cudnn/lib/libcudnn.so.9", "nvidia-cudnn", family="dnn", route="redirect"),
        binary("nvidia/curand/lib/libcurand.so.10", "nvidia-curand", kernels="ptx-available", ptx=["sm_120"],
               family="rand", route="passthrough"),
        binary("pkg/_rand.so", "pkg", deps=[("libcurand.so.10", "nvidia/curand/lib/libcurand.so.10")]),
    ],
    "packages": [{"name": "pkg", "verdict": "ready", "loads": []}],
}


def maps(*rels, driver=()):
    return [f"{SITE}/{r}" for r in rels] + list(driver)


PROBES = [
    {"op": "pkg.matmul", "mode": "normal", "ok": True, "maps": maps(
        "pkg/_core.so", "nvidia/cublas/lib/libcublas.so.13", "nvidia/cudnn/lib/libcudnn.so.9",
        "nvidia/cudnn/lib/libcudnn_graph.so.9", driver=["/usr/lib/libcuda.so.580.1", "/usr/lib/libnvidia-ptxjitcompiler.so.580.1"])},
    {"op": "pkg.matmul", "mode": "ptx-jit", "ok": True, "maps": maps("pkg/_core.so")},
    {"op": "pkg.random", "mode": "normal", "ok": True, "maps": maps("pkg/_rand.so", "nvidia/curand/lib/libcurand.so.10")},
    {"op": "pkg.random", "mode": "ptx-jit", "ok": False, "error": "CURAND_STATUS_LAUNCH_FAILURE", "stage": "run",
     "maps": maps("pkg/_rand.so", "nvidia/curand/lib/libcurand.so.10")},
]


def test_reached_follows_in_tree_dependencies():
    tree, outside = reached(REPORT, ["pkg"])
    assert {"pkg/_core.so", "nvidia/cublas/lib/libcublas.so.13", "nvidia/curand/lib/libcurand.so.10"} <= tree
    assert outside == ["libcuda.so.1"]


def test_template_regex():
    assert template_regex("libcublas.so.{version}").match("libcublas.so.13")
    assert template_regex("nvrtc64_%d_0.dll").match("nvrtc64_120_0.dll")
    assert not template_regex("libcublas.so.{version}").match("libcublasLt.so.13")


def test_loads_are_sorted_into_kinds():
    tree, outside = reached(REPORT, ["pkg"])
    loads = classify_loads(PROBES[0]["maps"], SITE, family_of, tree, outside, {"dnn"})
    assert loads["predicted"] == ["/usr/lib/libcuda.so.580.1", "nvidia/cublas/lib/libcublas.so.13",
                                  "nvidia/cudnn/lib/libcudnn.so.9"]
    assert loads["behind-replaced"] == ["nvidia/cudnn/lib/libcudnn_graph.so.9"]
    assert loads["driver"] == ["/usr/lib/libnvidia-ptxjitcompiler.so.580.1"]
    assert loads["missed"] == [] and loads["family"] == []


def test_failures_without_sass_against_the_scan():
    summary = compare(PROBES, REPORT, SITE, family_of, {"pkg": ("pkg",)}, gpu_arch=90)
    pkg = summary["pkg"]
    assert pkg["recall"] == "4/4"
    random = next(o for o in pkg["operations"] if o["op"] == "pkg.random")
    assert random["fails_without_sass"] is True
    assert "sm_120" in random["jit_vs_zluda"]  # NVIDIA's JIT cannot take it on sm_90; ZLUDA may
    assert any(d.startswith("pkg.random fails under CUDA_FORCE_PTX_JIT=1") and "NVIDIA's JIT limit" in d
               for d in pkg["disagreements"])
    assert any("package verdict ready" in d for d in pkg["disagreements"])
    text = markdown(summary, {"date": "2026-12-01", "gpu": "test"})
    assert "run-time NVIDIA loads predicted: **4/4**" in text and "| pkg.random | ok | FAIL (run)" in text


# the merged H200 run's JAX section in miniature: the plugin's binaries name no cuDNN; JAX's framework
# rule loads libcudnn.so.9 by name (packages[].loads[], route redirect), and NVIDIA's libcudnn.so.9 then
# loads its sub-libraries, which under ZLUDA (whose cuDNN replaces the front library) are never loaded
PRELOADED = {
    "binaries": [binary("plugin/xla.so", "plugin", deps=[("libcuda.so.1", None)]),
                 binary("nvidia/cudnn/lib/libcudnn.so.9", "nvidia-cudnn", family="dnn", route="redirect"),
                 binary("nvidia/cudnn/lib/libcudnn_graph.so.9", "nvidia-cudnn", verdict="blocked",
                        kernels="sass-only", family="dnn", route="blocked")],
    "packages": [{"name": "plugin", "verdict": "blocked", "loads": [
        {"family": "dnn", "name": "libcudnn.so.9", "when": "always", "route": "redirect", "basis": "framework-rule"},
        {"family": "rand", "name": "libcurand.so.10", "when": "always", "route": "passthrough",
         "basis": "framework-rule"}]}],
}
PRELOAD_PROBES = [{"op": "plugin.conv", "mode": "normal", "ok": True, "maps": maps(
    "plugin/xla.so", "nvidia/cudnn/lib/libcudnn.so.9", "nvidia/cudnn/lib/libcudnn_graph.so.9",
    driver=["/usr/lib/libcuda.so.580.1"])}]


def test_a_replaced_library_loaded_by_a_framework_rule_puts_what_it_loads_behind_it():
    tree, _ = reached(PRELOADED, ["plugin"])
    assert replaced_families(PRELOADED, tree) == set()  # no reached binary is a replaced library
    assert replaced_families(PRELOADED, tree, ["plugin"]) == {"dnn"}  # a passthrough load (cuRAND) is not
    assert replaced_families(PRELOADED, tree, ["other"]) == set()  # only the workload's own distributions
    loads = compare(PRELOAD_PROBES, PRELOADED, SITE, family_of, {"plugin": ("plugin",)})["plugin"]["loads"]
    assert loads["predicted"] == ["/usr/lib/libcuda.so.580.1", "nvidia/cudnn/lib/libcudnn.so.9"]
    assert loads["behind-replaced"] == ["nvidia/cudnn/lib/libcudnn_graph.so.9"]
    assert loads["family"] == [] and loads["missed"] == []


def test_a_recorded_run_is_re_judged_against_a_scan_report(tmp_path, capsys):
    # the recorded run's probes (its gpu-truth.json) against another scan report, with cuda4amd's own
    # family rules: the JAX case above under the harness's real package names
    report = json.loads(json.dumps(PRELOADED).replace('"plugin"', '"jax-cuda13-plugin"'))
    probes = [dict(p, op="jax.conv") for p in PRELOAD_PROBES]
    probes.append(dict(probes[0], mode="ptx-jit"))
    recorded = {"meta": {"date": "2026-12-01", "site": SITE, "compute": "9.0", "gpu": "test"},
                "probes": probes, "summary": {"stale": True}}
    (tmp_path / "gpu-truth.json").write_text(json.dumps(recorded))
    (tmp_path / "scan.json").write_text(json.dumps(report))
    out, again = tmp_path / "again.md", tmp_path / "again.json"
    assert main(["--probes", str(tmp_path / "gpu-truth.json"), "--scan", str(tmp_path / "scan.json"),
                 "--markdown", str(out), "--json", str(again)]) == 0
    jax = json.loads(again.read_text())["jax"]
    assert jax["loads"]["behind-replaced"] == ["nvidia/cudnn/lib/libcudnn_graph.so.9"]
    assert jax["recall"] == "2/2"  # libcudnn.so.9 by the framework rule, the driver by the binary's import
    text = out.read_text()
    assert text.startswith("# GPU truth run 2026-12-01") and f"- site: {SITE}" in text
    assert "run-time NVIDIA loads predicted: **2/2**" in text and "1 behind a library ZLUDA replaces" in text
    # a broken input is a clear error, not a traceback
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SystemExit) as exited:
        main(["--probes", str(tmp_path / "bad.json"), "--scan", str(tmp_path / "scan.json")])
    assert exited.value.code == 2 and "cannot re-judge" in capsys.readouterr().err
