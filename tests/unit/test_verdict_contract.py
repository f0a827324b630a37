"""The verdict contract of docs/exit-status.md, one test per line of it.

Inputs are the toolchain-built fixtures (fixtures/README.md), copied into small trees laid out by hand.
"""
from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, by_path
from test_packages import install

from cuda4amd.cli import main
from cuda4amd.cli.output import EXIT_FOR_VERDICT
from cuda4amd.model import FileError
from cuda4amd.report.console import render
from cuda4amd.report.document import headline
from cuda4amd.scan.verdict import TARGET_ORDER, target_verdict

READY = FIXTURES / "pe" / "app_ready.exe"  # imports only implemented driver functions
BLOCKED = FIXTURES / "pe" / "solver_user.dll"  # imports cuSOLVER: no AMD route
DEGRADED = FIXTURES / "pe" / "blas_mixed.dll"  # imports cuBLAS stubs


def status(target, *args):
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["scan", str(target), "--host", "none", *map(str, args)])
    return result.exit_code, result.output


def tree(tmp_path, **files):
    """A folder of fixture binaries: name -> source path, or None for an empty file named like a library."""
    for name, source in files.items():
        if source is None:
            (tmp_path / name).write_bytes(b"")
        else:
            shutil.copy(source, tmp_path / name)
    return tmp_path


# -- 1. nothing unread is ready --------------------------------------------------------------------------


def test_unread_file_beside_ready_binaries_is_incomplete_exit_9(tmp_path, scan):
    target = tree(tmp_path, **{"app.exe": READY, "cuda_main.dll": None})
    report = scan(target)
    assert by_path(report)["app.exe"]["verdict"] == "ready"
    assert report["verdict"] == "incomplete"
    assert (report["summary"]["unread"], report["summary"]["verdict_of_read"]) == (1, "ready")
    code, output = status(target)
    assert code == EXIT_FOR_VERDICT["incomplete"] == 9
    assert output.startswith("INCOMPLETE  1 file could not be read; what was read: every CUDA binary can run")


def test_without_the_unread_file_the_same_tree_is_ready(tmp_path, scan):
    assert scan(tree(tmp_path, **{"app.exe": READY}))["verdict"] == "ready"
    assert status(tmp_path)[0] == 0


def test_unread_file_and_no_cuda_is_incomplete_not_no_cuda(scan):
    report = scan(FIXTURES / "corrupt")
    assert (report["verdict"], report["summary"]["verdict_of_read"]) == ("incomplete", "no-cuda")
    assert status(FIXTURES / "corrupt")[0] == 9


def test_unread_file_and_partial_is_incomplete(tmp_path, scan):
    report = scan(tree(tmp_path, **{"app.exe": READY, "solver.dll": BLOCKED, "gone.dll": None}))
    assert (report["verdict"], report["summary"]["verdict_of_read"]) == ("incomplete", "partial")


def test_unread_file_and_blocked_stays_blocked(tmp_path, scan):
    target = tree(tmp_path, **{"solver.dll": BLOCKED, "gone.dll": None})
    report = scan(target)
    assert (report["verdict"], report["summary"]["unread"]) == ("blocked", 1)
    assert status(target)[0] == 4


def test_kernels_the_reader_could_not_follow_count_as_unread(scan):
    """fixtures/kernels/corrupt: fat binaries cut short (errors of stage `kernels`)."""
    report = scan(FIXTURES / "kernels")
    assert {e["stage"] for e in report["errors"]} == {"kernels"}
    assert (report["verdict"], report["summary"]["verdict_of_read"]) == ("incomplete", "partial")


def test_loader_and_strings_notes_are_not_unread():
    notes = [FileError("a.so", "loader", "RUNPATH note"), FileError("b.so", "strings", "string table: short")]
    judged = target_verdict([], [], notes)
    assert (judged.verdict, judged.unread) == ("no-cuda", 0)


def test_exit_status_per_verdict_is_documented():
    from conftest import REPO

    table = (REPO / "docs" / "exit-status.md").read_text(encoding="utf-8").split("\n\n")[1]  # scan's table
    assert set(EXIT_FOR_VERDICT) == set(TARGET_ORDER)
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| `")}
    for verdict, code in EXIT_FOR_VERDICT.items():
        assert f"`{verdict}`" in rows[f"`{code}`"]


def test_incomplete_is_in_the_schema_enum():
    import json

    from conftest import REPO

    schema = json.loads((REPO / "scanner" / "report" / "schemas" / "scan.json").read_text(encoding="utf-8"))
    assert set(schema["properties"]["verdict"]["enum"]) == set(TARGET_ORDER)


# -- 2. one basis -----------------------------------------------------------------------------------------


def test_one_package_target_has_its_package_verdict(tmp_path, scan):
    """torch's case: helper libraries ready, the extension module blocked: the target is blocked, exit 4."""
    site = tmp_path / "site-packages"
    install(site, "torchlike", "1.0", {
        "torchlike/_C.cp312-win_amd64.pyd": FIXTURES / "pe" / "trt_plugin.dll",
        "torchlike/lib/app_ready.exe": READY,
    })
    report = scan(site)
    (package,) = report["packages"]
    assert package["verdict"] == report["verdict"] == "blocked"
    assert report["summary"]["parts"] == {"basis": "packages", "ready": 0, "partial": 0, "blocked": 1}
    assert headline(report) == "no CUDA package here can run through ZLUDA"
    code, output = status(site)
    assert code == 4
    assert "the verdict is over 1 CUDA package: 0 ready, 0 partial, 1 blocked" in output


def test_binaries_outside_any_package_are_parts_of_their_own(tmp_path, scan):
    site = tmp_path / "site-packages"
    install(site, "torchlike", "1.0", {"torchlike/_C.cp312-win_amd64.pyd": FIXTURES / "pe" / "trt_plugin.dll"})
    shutil.copy(READY, site / "loose.exe")
    report = scan(site)
    assert report["verdict"] == "partial"
    assert report["summary"]["parts"] == {"basis": "packages-and-binaries", "ready": 1, "partial": 0, "blocked": 1}


def test_without_packages_the_parts_are_the_binaries(scan):
    report = scan(FIXTURES / "pe")
    summary = report["summary"]
    assert summary["parts"] == {"basis": "binaries", "ready": summary["ready"], "partial": summary["degraded"],
                                "blocked": summary["blocked"]}


@pytest.mark.parametrize(("parts", "verdict"), [
    ([], "no-cuda"), (["ready", "ready"], "ready"), (["blocked", "blocked"], "blocked"),
    (["ready", "blocked"], "partial"), (["partial"], "partial"), (["ready", "partial"], "partial"),
])
def test_verdict_over_parts(parts, verdict):
    from dataclasses import dataclass, field

    @dataclass
    class Part:
        verdict: str
        binaries: list[str] = field(default_factory=list)

    assert target_verdict([], [Part(p) for p in parts]).verdict == verdict


def test_console_headline_uses_the_document_verdict(tmp_path, scan):
    report = scan(tree(tmp_path, **{"app.exe": READY, "gone.dll": None}))
    assert render(report).startswith("INCOMPLETE  1 file could not be read")


# -- 4. a missing app-local dependency is not ready ---------------------------------------------------------


def test_missing_app_local_dependency_is_not_ready(tmp_path, scan):
    """tool.exe imports nvcuda.dll (implemented) and an app-local render.dll, here absent."""
    target = tree(tmp_path, **{"tool.exe": FIXTURES / "demo" / "Tool" / "tool.exe"})
    report = scan(target / "tool.exe")
    tool = by_path(report)["tool.exe"]
    assert tool["verdict"] == "degraded" and report["verdict"] == "partial"
    assert tool["reasons"] == ["needs render.dll, which is neither beside it, in the scanned tree nor a system "
                               "library: Windows refuses to load it without it, and what it does with CUDA was not "
                               "seen; scan the folder or pass --search-path"]
    code, output = status(target / "tool.exe")
    words = " ".join(output.replace("│", " ").split())  # the table wraps the reason
    assert code == 3 and "scan the folder or pass --search-path" in words  # the default view says it


def test_the_dependency_found_beside_it_or_through_search_path_is_judged_instead(tmp_path, scan):
    demo = FIXTURES / "demo" / "Tool"
    beside = by_path(scan(demo / "tool.exe"))["tool.exe"]
    assert not any("--search-path" in r for r in beside["reasons"])
    target = tree(tmp_path, **{"tool.exe": demo / "tool.exe"})
    searched = by_path(scan(target / "tool.exe", search_paths=(demo,)))["tool.exe"]
    assert not any("--search-path" in r for r in searched["reasons"])


def test_a_binary_without_cuda_keeps_a_missing_dependency_as_a_note(tmp_path, scan):
    target = tree(tmp_path, **{"chain_app.exe": FIXTURES / "pe" / "chain" / "chain_app.exe"})
    app = by_path(scan(target))["chain_app.exe"]
    assert app["verdict"] == "no-cuda"
    assert "needs missing_vendor.dll, which is neither in the scanned tree nor a known system library" in app["notes"]


# -- 11. one meaning per word -----------------------------------------------------------------------------

PARTIAL_TEXT = "some of it can run through ZLUDA, not all of it fully"


@pytest.mark.parametrize("case", ["pe", "byname"])  # pe: some blocked; byname: none blocked, all degraded
def test_partial_has_one_headline(case, scan):
    report = scan(FIXTURES / case)
    assert report["verdict"] == "partial"
    assert headline(report) == PARTIAL_TEXT


def test_readme_and_docs_say_the_one_partial():
    from conftest import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"PARTIAL  {PARTIAL_TEXT}" in readme and f"`partial`\n({PARTIAL_TEXT})" in readme
    for doc in ("docs/exit-status.md", "docs/reports.md"):
        text = (REPO / doc).read_text(encoding="utf-8")
        assert PARTIAL_TEXT in text
        assert "some cannot" not in text and "some work only in part`" not in text


# -- 8. current CUDA 13 names (rules/families.toml, tools/convert_rules.py EXTRA_NAMES / with_dev_links) ----


@pytest.mark.parametrize(("name", "family", "route"), [
    ("nvrtc64_131_0.dll", "nvrtc", "passthrough"),  # a later minor, probed by name by applications
    ("nvrtc64_130_0.dll", "nvrtc", "passthrough"),  # what nvidia-cuda-nvrtc 13.1.115 ships
    ("libcudnn.so", "dnn", "redirect"),  # ZLUDA's Linux release ships libcudnn.so itself
    ("libcudart.so", "runtime_api", "passthrough"),
    ("libnvrtc.so", "nvrtc", "passthrough"),
    ("libcublas.so", "blas", "redirect"),
])
def test_cuda13_and_unversioned_names_resolve_to_their_family(rules, name, family, route):
    from cuda4amd.scan.classify import identify

    platform = "windows" if name.endswith(".dll") else "linux"
    identity = identify(name, platform, rules, rules.release(rules.default_release))
    assert (identity.family, identity.route) == (family, route)


def test_unversioned_names_are_derived_only_from_whole_names():
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("convert_rules", REPO / "tools" / "convert_rules.py")
    assert spec is not None and spec.loader is not None
    convert = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(convert)
    assert convert.with_dev_links([r"^libcudnn\.so\.[89]$"]) == [r"^libcudnn\.so\.[89]$", r"^libcudnn\.so$"]
    # names with alternatives (cuDNN 9's sub-libraries, loaded by their front-end by versioned name): none
    for grouped in (r"^lib(cublasmp\.so\.0|cufftMp\.so\.1[12])$", r"^libcudnn_(graph|ops)\.so\.9$"):
        assert convert.with_dev_links([grouped]) == [grouped]




# -- 2. a package with no GPU path is blocked; advice never points at a blocked part ------------------------
# fixtures/gpupaths (its build.sh): a library whose only CUDA contact is dlopen("libcuda.so.1"), and one with
# PTX in 1 of its 3 kernel modules

PROBE = FIXTURES / "gpupaths" / "libdriver_probe.so"  # a CPU part: loads the driver by name, nothing more
MINORITY = FIXTURES / "gpupaths" / "libaxpy_minority.so"
SASS_ONLY = FIXTURES / "kernels" / "elf" / "libaxpy_sass86.so"  # blocked: SASS only
PTX_ONLY = FIXTURES / "kernels" / "elf" / "libaxpy_ptx86.so"  # ready: PTX
TRT_BY_NAME = FIXTURES / "byname" / "libloader.so"  # degraded: dlopen()s libnvinfer.so.10 and libcublas.so.12
TRT_LINKED = FIXTURES / "gpupaths" / "libtrt_user.so"  # blocked: NEEDED libnvinfer.so.10, libnvonnxparser.so.10


def onnxruntime_like(tmp_path, cuda_provider, tensorrt_provider=TRT_BY_NAME, core=PROBE, **more):
    """onnxruntime-gpu laid out as its Linux wheel is: a CPU core that only loads the driver by name
    (libonnxruntime.so), the CUDA and the TensorRT execution providers (and `more`: path -> source)."""
    site = tmp_path / "site-packages"
    install(site, "onnxruntime-gpu", "1.31.1", {
        "onnxruntime/capi/libonnxruntime.so.1.31.1": core,
        "onnxruntime/capi/libonnxruntime_providers_cuda.so": cuda_provider,
        "onnxruntime/capi/libonnxruntime_providers_tensorrt.so": tensorrt_provider,
        **{f"onnxruntime/capi/{name}": source for name, source in more.items()},
    })
    return site


def test_a_package_with_every_gpu_path_blocked_is_blocked_whatever_its_cpu_part(tmp_path, scan):
    site = onnxruntime_like(tmp_path, SASS_ONLY, tensorrt_provider=TRT_LINKED)
    report = scan(site)
    binaries = by_path(report)
    assert binaries["onnxruntime/capi/libonnxruntime.so.1.31.1"]["verdict"] == "ready"  # the CPU part
    (package,) = report["packages"]
    assert package["verdict"] == report["verdict"] == "blocked"
    assert package["counts"] == {"basis": "binaries", "ready": 0, "degraded": 0, "blocked": 2, "cpu_only": 1}
    assert package["summary"] == ("all 2 CUDA binaries blocked; 1 more CUDA binary only loads the CUDA driver by "
                                  "name (no kernels, no CUDA library, no driver function named): a CPU part, not "
                                  "counted")
    code, output = status(site)
    assert code == 4
    words = " ".join(output.replace("│", " ").split())
    assert "1 of them is a CPU part: it only loads the CUDA driver by name, not counted in the verdict" in words


def test_a_cpu_part_beside_gpu_paths_that_run_is_left_out_of_the_counts(tmp_path, scan):
    (package,) = scan(onnxruntime_like(tmp_path, PTX_ONLY))["packages"]
    assert package["verdict"] == "partial"  # the CUDA provider runs, the TensorRT one in part
    assert package["counts"] == {"basis": "binaries", "ready": 1, "degraded": 1, "blocked": 0, "cpu_only": 1}


def test_a_package_whose_only_cuda_contact_is_a_cpu_part_is_judged_by_it(tmp_path, scan):
    site = tmp_path / "site-packages"
    install(site, "probeonly", "1.0", {"probeonly/libprobe.so": PROBE})
    (package,) = scan(site)["packages"]
    assert (package["verdict"], package["counts"]) == ("ready", {"basis": "binaries", "ready": 1, "degraded": 0,
                                                                 "blocked": 0})


def test_what_does_gpu_work_is_never_a_cpu_part(rules):
    """Kernels, a static driver import (with the functions it calls) or any CUDA library: a GPU path."""
    from cuda4amd.scan.packages import is_cpu_part
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    result = run_scan(ScanOptions(target=str(FIXTURES / "elf")), rules=rules)
    probe = run_scan(ScanOptions(target=str(PROBE)), rules=rules)
    cuda = {v.binary.path for v in result.verdicts if v.verdict != "no-cuda"}
    assert cuda and not any(is_cpu_part(v, cuda) for v in result.verdicts)  # app_driver imports cuInit, …
    kernels = run_scan(ScanOptions(target=str(PTX_ONLY)), rules=rules)
    assert not any(is_cpu_part(v, set()) for v in kernels.verdicts)
    assert [is_cpu_part(v, set()) for v in probe.verdicts] == [True]


def test_mostly_sass_only_kernels_block_the_binary_and_say_the_share(scan):
    """Fewer than half of the kernel modules with PTX ZLUDA can use: blocked (LEAST_RUNNABLE_SHARE)."""
    minority = by_path(scan(MINORITY))["libaxpy_minority.so"]
    assert minority["verdict"] == "blocked"
    assert minority["reasons"] == [
        "PTX in only 1 of its 3 kernel modules: the kernels of the other 2 (67 %) carry no PTX that ZLUDA can use "
        "(it runs only PTX), so most of its GPU code cannot run under ZLUDA"]
    half = by_path(scan(FIXTURES / "kernels" / "elf" / "libaxpy_partial.so"))["libaxpy_partial.so"]
    assert half["verdict"] == "degraded"  # PTX in 1 of 2: at the threshold it runs in part
    assert "the kernels of the other 1 (50 %) carry no PTX" in half["reasons"][0]


@pytest.mark.parametrize(("usable", "total", "share"), [(38, 607, 94), (1, 2, 50), (1, 300, 99), (299, 300, 1)])
def test_the_failing_share_is_rounded_but_never_0_or_100(usable, total, share):
    from cuda4amd.scan.verdict import failing_share

    assert failing_share(usable, total) == share


def test_mostly_sass_only_kernels_get_the_advice_for_sass_only_kernels(tmp_path, scan):
    (package,) = scan(onnxruntime_like(tmp_path, MINORITY))["packages"]
    assert any("MIGraphXExecutionProvider" in line for line in package["advice"])


def test_advice_never_steers_to_a_blocked_part(tmp_path, scan):
    """The TensorRT switch keeps sessions on the CUDA provider (`uses`): said only while that can run."""
    blocked = scan(onnxruntime_like(tmp_path / "a", SASS_ONLY))["packages"][0]
    assert blocked["verdict"] == "partial"  # the TensorRT provider runs in part
    assert not any("CUDAExecutionProvider" in line for line in blocked["advice"])
    running = scan(onnxruntime_like(tmp_path / "b", PTX_ONLY))["packages"][0]
    assert any("CUDAExecutionProvider" in line for line in running["advice"])


def test_a_package_that_cannot_run_gets_only_replacements(tmp_path, scan):
    """torch on Linux with SASS-only kernels: no PyTorch setting makes it run; the ROCm build does."""
    site = tmp_path / "site-packages"
    install(site, "torch", "2.14.1", {"torch/lib/libtorch_cuda.so": SASS_ONLY})
    (package,) = scan(site)["packages"]
    assert package["verdict"] == "blocked"
    assert package["advice"] == [
        "PyTorch: install the ROCm build of PyTorch instead (`pip install torch --index-url "
        "https://download.pytorch.org/whl/rocm<version>`), which runs on AMD GPUs without ZLUDA"]


def test_can_run_is_by_the_parts_verdicts_not_their_names(rules):
    from cuda4amd.rules.frameworks import advice_for

    ort = next(f for f in rules.frameworks if f.id == "onnxruntime")
    nothing_runs = advice_for(ort, {"tensorrt"}, None, can_run=lambda uses: False)
    assert nothing_runs == [
        'ONNX Runtime: install onnxruntime-directml instead of onnxruntime-gpu and use '
        'providers=["DmlExecutionProvider"], which runs on AMD GPUs without ZLUDA [Windows only]',
        "ONNX Runtime: install AMD's ROCm build of ONNX Runtime (rocm.docs.amd.com: Install ONNX Runtime for ROCm) "
        'instead of onnxruntime-gpu and use providers=["MIGraphXExecutionProvider"], which runs on AMD GPUs without '
        'ZLUDA [Linux only]']
    asked: list[tuple[str, ...]] = []
    advice_for(ort, {"tensorrt", "dnn"}, None, can_run=lambda uses: asked.append(uses) or True)
    assert set(asked) == {("*onnxruntime_providers_cuda.*",)}  # what the rules say the lines rely on


def test_the_same_library_family_is_advised_once_per_binary(scan):
    """Two TensorRT libraries in one binary: the family's advice once, then 'too (see …)'."""
    trt = by_path(scan(TRT_LINKED))["libtrt_user.so"]
    assert trt["reasons"] == ["libnvinfer.so.10: needs TensorRT, which has no AMD route through ZLUDA: use the "
                              "app's non-TensorRT backend if it has one that can run",
                              "libnvonnxparser.so.10: needs TensorRT too (see libnvinfer.so.10)"]


# -- 10. advice fits the target and is said once ------------------------------------------------------------


@pytest.mark.parametrize(("platform", "expected", "left_out"), [
    ("linux", "ROCm build of PyTorch", "cu118"),
    ("windows", "cu118", "ROCm build"),
])
def test_advice_fits_the_targets_platform(rules, platform, expected, left_out):
    from cuda4amd.rules.frameworks import advice_for

    torch = next(f for f in rules.frameworks if f.id == "torch")
    lines = advice_for(torch, set(), "sass-only", platforms={platform})
    assert any(expected in line for line in lines)
    assert not any(left_out in line for line in lines)
    assert not any(line.endswith(("[Windows only]", "[Linux only]")) for line in lines)  # it is the target's
    both = advice_for(torch, set(), "sass-only", platforms={"windows", "linux"})
    assert any(line.endswith("[Windows only]") for line in both) and any(line.endswith("[Linux only]") for line in both)


def test_a_linux_wheel_gets_the_rocm_build_first(tmp_path, scan):
    site = onnxruntime_like(tmp_path, SASS_ONLY)
    install(site, "torch", "2.14.1", {"torch/lib/libtorch_cuda.so": SASS_ONLY})
    packages = {p["name"]: p for p in scan(site)["packages"]}
    assert "ROCm build of PyTorch" in packages["torch"]["advice"][0]
    assert "ROCm build of ONNX Runtime" in packages["onnxruntime-gpu"]["advice"][0]
    for package in packages.values():
        assert not any("cu118" in line or "directml" in line or "only]" in line for line in package["advice"])


def test_no_line_is_said_twice_in_a_package(rules):
    from cuda4amd.rules.frameworks import advice_for

    ort = next(f for f in rules.frameworks if f.id == "onnxruntime")
    lines = advice_for(ort, {"tensorrt", "dnn"}, "sass-only", platforms={"windows"})
    assert sum("onnxruntime-directml" in line for line in lines) == 1  # one replacement, three reasons for it
    assert len(lines) == len(set(lines))


def test_a_reason_several_binaries_share_is_said_once_per_package(tmp_path, scan):
    site = tmp_path / "site-packages"
    install(site, "twin", "1.0", {"twin/liba.so": SASS_ONLY, "twin/libb.so": SASS_ONLY})
    (package,) = scan(site)["packages"]
    assert package["reasons"] == ["liba.so, libb.so: its GPU kernels carry no PTX (SASS for sm_86); ZLUDA runs "
                                  "only PTX"]
    from cuda4amd.report.grouping import own_reasons

    assert own_reasons(package) == []  # the binaries' own, not the package's


def test_a_switch_is_said_once_in_a_cell_and_in_a_section(tmp_path, scan):
    """torch (its Inductor generator) and triton (its framework switch and its generator) all say
    TORCHDYNAMO_DISABLE=1: once in triton's advice, and once in Markdown's "What to try", for both."""
    from cuda4amd.report import render

    site = tmp_path / "site-packages"
    install(site, "triton", "3.5.0", {"triton/_C/libtriton.so": FIXTURES / "elf" / "libplain.so"})
    install(site, "torch", "2.9.0", {"torch/lib/libtorch_cuda.so": PTX_ONLY})
    report = scan(site)
    for package in report["packages"]:
        assert sum("TORCHDYNAMO_DISABLE=1" in line for line in package["advice"]) <= 1, package["name"]
    section = render("markdown", report).split("## What to try", 1)[1].split("\n## ", 1)[0]
    assert section.count("TORCHDYNAMO_DISABLE=1") == 1
    assert "**triton, torch**" in section


def test_said_once_drops_repeats_and_lines_whose_settings_were_said():
    from cuda4amd.words import said_once, settings

    assert settings('set XLA_FLAGS="--a --b" and TORCHDYNAMO_DISABLE=1 (and no kernels)') == {
        'XLA_FLAGS="--a --b"', "TORCHDYNAMO_DISABLE=1"}
    assert said_once(["set A_B=1 so x", "Gen: A_B=1: it then generates nothing", "set A_B=1 so x", "set C_D=0",
                      "no setting here", "no setting here"]) == ["set A_B=1 so x", "set C_D=0", "no setting here"]


@pytest.mark.parametrize(("platform", "expected", "left_out"), [
    ("linux", "miopen-hip", "Windows HIP SDKs"),
    ("windows", "Windows HIP SDKs", "miopen-hip"),
])
def test_the_cudnn_advice_fits_the_targets_platform(rules, platform, expected, left_out):
    from cuda4amd.rules.frameworks import advice_for

    torch = next(f for f in rules.frameworks if f.id == "torch")
    lines = advice_for(torch, {"dnn"}, None, platforms={platform})
    assert any(expected in line for line in lines) and not any(left_out in line for line in lines)


@pytest.mark.parametrize(("provider", "said"), [(PTX_ONLY, True), (SASS_ONLY, False)])
def test_uses_is_judged_by_that_part_even_outside_the_verdicts_basis(tmp_path, scan, provider, said):
    """A package judged by its extension modules: the switch still follows the CUDA provider's own verdict."""
    extension = {"onnxruntime_pybind11_state.abi3.so": FIXTURES / "elf" / "app_driver"}  # a CUDA user (driver API)
    site = onnxruntime_like(tmp_path, provider, tensorrt_provider=TRT_LINKED, **extension)
    (package,) = scan(site)["packages"]
    assert package["counts"]["basis"] == "extension-modules"
    assert any("CUDAExecutionProvider" in line for line in package["advice"]) is said


@pytest.mark.parametrize(("library", "set_by_fix"), [(FIXTURES / "elf" / "libplain.so", True), (SASS_ONLY, False)])
def test_the_fix_sets_only_the_switches_the_advice_gives(tmp_path, rules, library, set_by_fix):
    """Triton's recommended TORCHDYNAMO_DISABLE=1: advised (and set by --fix) while the package can run,
    neither when its only GPU path is blocked."""
    from cuda4amd.fix.plan.environment import environment
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    site = tmp_path / "site-packages"
    install(site, "triton", "3.5.0", {"triton/_C/libtriton.so": library})
    result = run_scan(ScanOptions(target=str(site), host="none"), rules=rules)
    (package,) = result.packages
    assert any("TORCHDYNAMO_DISABLE=1" in line for line in package.advice) is set_by_fix
    variables = environment(result, rules, "linux", "place", None, False, None, [])
    assert any(v.name == "TORCHDYNAMO_DISABLE" for v in variables) is set_by_fix
