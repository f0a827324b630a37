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


