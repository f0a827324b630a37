"""Per-package verdicts in a site-packages folder laid out by hand (real RECORD format)."""
from __future__ import annotations

import shutil

from conftest import FIXTURES


def install(site, name, version, files):
    dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    rows = []
    for rel, source in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, site / rel)
        rows.append(f"{rel},,")
    rows.append(f"{dist_info.name}/METADATA,,")
    (dist_info / "RECORD").write_text("\n".join(rows) + "\n")


def test_packages_lead_with_verdicts_reasons_and_framework_advice(tmp_path, scan):
    site = tmp_path / "site-packages"
    install(site, "paddlepaddle-gpu", "2.6.1", {"paddle/libs/trt_plugin.dll": FIXTURES / "pe" / "trt_plugin.dll",
                                                "paddle/libs/app_ready.exe": FIXTURES / "pe" / "app_ready.exe"})
    install(site, "plainpkg", "1.0", {"plainpkg/plain.dll": FIXTURES / "pe" / "plain.dll"})
    report = scan(site)
    packages = {p["name"]: p for p in report["packages"]}
    assert set(packages) == {"paddlepaddle-gpu", "plainpkg"}
    paddle = packages["paddlepaddle-gpu"]
    assert (paddle["version"], paddle["verdict"], paddle["framework"]) == ("2.6.1", "partial", "paddlepaddle")
    assert paddle["binaries"] == ["paddle/libs/app_ready.exe", "paddle/libs/trt_plugin.dll"]
    assert paddle["reasons"][0].startswith("trt_plugin.dll: nvinfer_10.dll: needs TensorRT")
    assert paddle["advice"], "the framework's switches for what is blocked"
    assert packages["plainpkg"]["verdict"] == "no-cuda"
    owners = {b["path"]: b["distribution"] for b in report["binaries"]}
    assert owners == {
        "paddle/libs/app_ready.exe": "paddlepaddle-gpu",
        "paddle/libs/trt_plugin.dll": "paddlepaddle-gpu",
        "plainpkg/plain.dll": "plainpkg",
    }


def test_framework_rules_add_by_name_loads_no_binary_revealed(tmp_path, scan):
    site = tmp_path / "site-packages"
    install(site, "paddlepaddle-gpu", "2.6.1", {"paddle/libs/app_ready.exe": FIXTURES / "pe" / "app_ready.exe"})
    paddle = scan(site)["packages"][0]
    by_family = {load["family"]: load for load in paddle["loads"]}
    assert by_family["tensorrt"]["route"] == "blocked" and by_family["tensorrt"]["basis"] == "framework-rule"
    assert any(r.startswith("PaddlePaddle loads nvinfer_10.dll by name") for r in paddle["reasons"])
    assert "driver_api" not in by_family  # app_ready.exe imports nvcuda.dll: already seen


def test_a_package_whose_extension_modules_are_all_blocked_is_blocked(tmp_path, scan):
    """torch's case: the libraries it ships (cuBLAS, replaced by ZLUDA) are
    ready, but what a user imports (torch/_C) cannot run."""
    site = tmp_path / "site-packages"
    install(site, "torchlike", "1.0", {
        "torchlike/_C.cp312-win_amd64.pyd": FIXTURES / "pe" / "trt_plugin.dll",  # imports TensorRT: blocked
        "torchlike/lib/app_ready.exe": FIXTURES / "pe" / "app_ready.exe",  # ready
    })
    (package,) = scan(site)["packages"]
    assert package["verdict"] == "blocked"
    assert package["counts"] == {"basis": "extension-modules", "ready": 0, "degraded": 0, "blocked": 1}
    assert package["summary"] == "its CUDA extension module is blocked"
    assert package["reasons"][0].startswith("_C.cp312-win_amd64.pyd: nvinfer_10.dll: needs TensorRT")


def test_partial_only_when_something_runs_and_wording_agrees_with_the_counts(tmp_path, scan):
    site = tmp_path / "site-packages"
    install(site, "mixed", "1.0", {
        "mixed/fast.cp312-win_amd64.pyd": FIXTURES / "pe" / "app_ready.exe",
        "mixed/blas.cp312-win_amd64.pyd": FIXTURES / "pe" / "blas_mixed.dll",  # cuBLAS stubs: degraded
    })
    (package,) = scan(site)["packages"]
    assert package["verdict"] == "partial"
    assert package["counts"] == {"basis": "extension-modules", "ready": 1, "degraded": 1, "blocked": 0}
    assert package["summary"] == "2 CUDA extension modules: 1 ready, 1 degraded"


def test_a_framework_load_without_an_amd_route_keeps_a_package_from_ready(tmp_path, scan):
    site = tmp_path / "site-packages"
    install(site, "paddlepaddle-gpu", "2.6.1", {"paddle/libs/app_ready.exe": FIXTURES / "pe" / "app_ready.exe"})
    (paddle,) = scan(site)["packages"]
    assert any("no AMD route" in reason for reason in paddle["reasons"])
    assert paddle["verdict"] == "partial"
    assert paddle["counts"] == {"basis": "binaries", "ready": 1, "degraded": 0, "blocked": 0}
    assert paddle["summary"] == "1 CUDA binary: 1 ready; what its framework loads by name has no AMD route"


def test_owners_are_looked_up_among_the_distributions_of_archives_too(tmp_path, scan):
    """A binary is owned by the first distribution (by name) that lists it, compared casefolded, among the
    tree's and those of the wheels in it, which list paths below the wheel's name: a folder named like the
    wheel in another case holds such paths too, and they are the wheel's distribution's."""
    import zipfile

    site = tmp_path / "site-packages"
    install(site, "alpha", "1.0", {"alpha/plain.dll": FIXTURES / "pe" / "plain.dll"})
    (site / "Beta.WHL" / "x").mkdir(parents=True)
    shutil.copy(FIXTURES / "pe" / "plain.dll", site / "Beta.WHL" / "x" / "plain.dll")
    with zipfile.ZipFile(site / "beta.whl", "w") as wheel:
        wheel.write(FIXTURES / "pe" / "plain.dll", "x/plain.dll")
        wheel.writestr("beta-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: beta\nVersion: 1.0\n")
        wheel.writestr("beta-1.0.dist-info/RECORD", "x/plain.dll,,\nbeta-1.0.dist-info/METADATA,,\n")
    for jobs in (1, 2):
        owners = {b["path"]: b["distribution"] for b in scan(site, jobs=jobs)["binaries"]}
        assert owners == {"alpha/plain.dll": "alpha", "Beta.WHL/x/plain.dll": "beta", "beta.whl/x/plain.dll": "beta"}
