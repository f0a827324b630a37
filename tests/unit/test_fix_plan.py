"""Planning: the green-lit set, host refusals, launchers by content, dry runs."""
from __future__ import annotations

import json
import os

import pytest
from test_fix_support import LINUX_HOST, LINUX_TGZ, WIN_HOST, WIN_ZIP, demo_copy, fix_cache, linux_app, snapshot  # noqa: F401

from cuda4amd.fix.apply import fix_target
from cuda4amd.fix.launchers import LauncherError, render_cmd, render_sh
from cuda4amd.fix.plan.make import make_plan
from cuda4amd.fix.plan.model import EnvVar, Plan, PlanError
from cuda4amd.fix.release import choose_source
from cuda4amd.host import HostReport, load_host_report
from cuda4amd.scan.pipeline import ScanOptions, run_scan


def scan(rules, target, host="none"):
    return run_scan(ScanOptions(target=str(target), host=str(host)), rules=rules)


def win_host(**changes) -> HostReport:
    data = json.loads(WIN_HOST.read_text())
    for key, value in changes.items():
        if key == "found_by":
            data["hip_sdks"][0]["found_by"] = value
        elif key == "miopen":
            data["hip_sdks"][0]["libraries"]["miopen"] = {"present": True, "file": "bin\\MIOpen.dll"}
        else:
            data[key] = value
    return HostReport.from_dict(data)


def plan_for(rules, result, host, mode="launcher", zluda=WIN_ZIP, platform="windows", **kw):
    source = choose_source(rules, result.release.tag, platform, zluda)
    return make_plan(result, rules=rules, host=host, source=source, mode=mode, **kw)


def test_demo_plan_links_the_green_lit_set(rules, tmp_path):
    tool = demo_copy(tmp_path)
    plan = plan_for(rules, scan(rules, tool), win_host())
    assert plan.platform == "windows" and plan.mode == "launcher"
    assert plan.families == ["blas", "driver_api"]
    assert {(r["binary"], r["name"]) for r in plan.linked} == {("render.dll", "cublas64_12.dll"),
                                                               ("tool.exe", "nvcuda.dll")}
    left = {r["binary"]: r["reason"] for r in plan.left_alone}
    assert left["plugins/trt_export.dll"].startswith("blocked: nvinfer_10.dll: needs TensorRT")
    # the software-only scan said denoise.dll is ready; this host has no MIOpen, so cuDNN is not linked
    assert "MIOpen" in left["plugins/denoise.dll"]
    assert [r["family"] for r in plan.not_linked] == []
    copies = sorted(a.path for a in plan.actions if a.kind == "copy")
    assert copies == [f".cuda4amd/zluda/{n}" for n in ("cublas64_11.dll", "cublas64_12.dll", "cublas64_13.dll",
                                                       "nvcuda.dll", "nvcudart_hybrid64.dll", "zluda.exe",
                                                       "zluda_redirect.dll")]
    assert not any("cudnn" in a.path or "nvinfer" in a.path for a in plan.actions)
    assert all(a.sha256 is None for a in plan.actions if a.kind == "copy")  # unknown until the release is bound
    writes = sorted(a.path for a in plan.actions if a.kind == "write")
    assert writes == [".cuda4amd/tool.cmd", ".cuda4amd/tool.ps1", ".cuda4amd/zluda-run.cmd",
                      ".cuda4amd/zluda-run.ps1"]
    assert plan.launcher_exe == ".cuda4amd/zluda/zluda.exe"
    assert not any(a.path.startswith(("tool", "render", "plugins")) for a in plan.actions)  # the app is untouched
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again.key() == plan.key() and again.render() == plan.render()


def test_miopen_on_the_host_links_cudnn_too(rules, tmp_path):
    plan = plan_for(rules, scan(rules, demo_copy(tmp_path)), win_host(miopen=True))
    assert plan.families == ["blas", "dnn", "driver_api"]
    assert ".cuda4amd/zluda/cudnn64_9.dll" in {a.path for a in plan.actions}


def test_the_scan_verdict_with_the_host_decides_too(rules, tmp_path):
    tool = demo_copy(tmp_path)
    plan = plan_for(rules, scan(rules, tool, WIN_HOST), load_host_report(WIN_HOST))
    left = {r["binary"]: r["reason"] for r in plan.left_alone}
    assert left["plugins/denoise.dll"].startswith("blocked: this host: cuDNN calls go to MIOpen")


def test_this_machine_without_an_amd_gpu_is_refused(rules, tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    result = scan(rules, tool)
    out = []
    no_gpu = HostReport(platform="windows")
    outcome = fix_target(result, host=no_gpu, zluda_path=WIN_ZIP, assume_yes=True, echo=out.append, rules=rules)
    assert outcome.status == "refused" and outcome.exit_code == 5
    assert "the host lacks what ZLUDA needs: no AMD GPU found" in outcome.message
    if os.name != "nt":  # this machine: probed for real, found Linux without an AMD GPU / HIP SDK
        probed = fix_target(result, host="auto", zluda_path=WIN_ZIP, assume_yes=True, echo=out.append, rules=rules)
        assert probed.status == "refused" and "the host" in probed.message
    assert not (tool / ".cuda4amd").exists() and not fix_cache.exists()


def test_host_without_sdk_leaves_sdk_families_out(rules, tmp_path):
    host = win_host(hip_sdks=[], selected_sdk=None)
    with pytest.raises(PlanError, match="the host lacks what the plan needs: cuBLAS calls go to rocBLAS, "
                                        "which needs the HIP SDK: none was found"):
        plan_for(rules, scan(rules, demo_copy(tmp_path)), host)


def test_dry_run_plans_what_the_host_lacks_and_says_so(rules, tmp_path):
    """make_plan with a host_warnings list (a dry run): the refusals become warnings, the plan is whole."""
    result = scan(rules, demo_copy(tmp_path))
    warnings: list[str] = []
    plan = plan_for(rules, result, win_host(), host_warnings=warnings)
    assert plan.families == ["blas", "dnn", "driver_api"]  # cuDNN is planned although this host lacks MIOpen
    assert "plugins/denoise.dll" not in {r["binary"] for r in plan.left_alone}
    assert len(warnings) == 1 and "MIOpen" in warnings[0]
    no_sdk: list[str] = []
    plan = plan_for(rules, result, win_host(hip_sdks=[], selected_sdk=None), host_warnings=no_sdk)
    assert "blas" in plan.families and any("HIP SDK: none was found" in w for w in no_sdk)
    other: list[str] = []
    plan_for(rules, result, load_host_report(LINUX_HOST), host_warnings=other)
    assert other[0].startswith("the host is Linux but the application is Windows")
    with pytest.raises(PlanError, match="lacks a host report"):  # nothing to judge against: refused even so
        plan_for(rules, result, None, host_warnings=[])


def test_host_of_another_platform_is_refused(rules, tmp_path):
    with pytest.raises(PlanError, match="the host is Linux but the application is Windows"):
        plan_for(rules, scan(rules, demo_copy(tmp_path)), load_host_report(LINUX_HOST))


def test_placement_mode_needs_hip_path(rules, tmp_path):
    result = scan(rules, demo_copy(tmp_path))
    with pytest.raises(PlanError, match="placement mode needs HIP_PATH set on the host"):
        plan_for(rules, result, win_host(found_by=["ProgramFiles"]), mode="place")
    plan_for(rules, result, win_host(found_by=["ProgramFiles"]))  # the launcher sets HIP_PATH itself


def test_placement_plan(rules, tmp_path):
    tool = demo_copy(tmp_path)
    plan = plan_for(rules, scan(rules, tool), win_host(), mode="place")
    assert [(a.kind, a.path, a.source) for a in plan.actions] == [
        ("copy", "cublas64_12.dll", "cublas64_12.dll"),
        ("copy", "nvcuda.dll", "nvcuda.dll"),
        ("copy", "nvcudart_hybrid64.dll", "nvcudart_hybrid64.dll"),
    ]
    assert plan.launcher_exe is None and plan.programs == []


def test_placement_over_an_nvidia_library_in_the_tree(rules, tmp_path):
    tool = demo_copy(tmp_path)
    (tool / "lib").mkdir()
    nvidia = (tool / "render.dll").read_bytes()  # any PE file stands in for NVIDIA's cublas64_12.dll
    (tool / "cublas64_12.dll").write_bytes(nvidia)
    plan = plan_for(rules, scan(rules, tool), win_host(), mode="place")
    replaced = [a for a in plan.actions if a.path == "cublas64_12.dll"]
    assert replaced and replaced[0].replaces and "backed up" in replaced[0].why


def test_archive_targets_and_mixed_trees_are_refused(rules, tmp_path):
    import zipfile

    whl = tmp_path / "x-1.0-py3-none-win_amd64.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.write(str(demo_copy(tmp_path) / "tool.exe"), "tool.exe")
    with pytest.raises(PlanError, match="is an archive"):
        plan_for(rules, scan(rules, whl), win_host())


def test_nothing_to_link(rules, tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "readme.txt").write_text("no binaries")
    with pytest.raises(PlanError, match="nothing to link"):
        plan_for(rules, scan(rules, tmp_path / "t"), win_host())


def test_linux_plan_uses_ld_audit_when_an_rpath_would_win(rules, tmp_path):
    app = linux_app(tmp_path)
    plan = plan_for(rules, scan(rules, app), load_host_report(LINUX_HOST), zluda=LINUX_TGZ, platform="linux")
    env = {e.name: e for e in plan.environment}
    assert set(env) == {"HIP_PATH", "LD_LIBRARY_PATH", "LD_AUDIT"}
    links = {a.path: a.link for a in plan.actions if a.kind == "link"}
    assert links[".cuda4amd/zluda/libcuda.so.1"] == "libnvcuda.so"
    assert links[".cuda4amd/zluda/zluda_ld"] == "libzluda_ld.so"
    assert ".cuda4amd/zluda/libcublas.so" in {a.path for a in plan.actions if a.kind == "copy"}
    assert [p["path"] for p in plan.programs] == ["fakeapp"]


def test_linux_plan_without_rpath_needs_no_ld_audit(rules, tmp_path):
    app = linux_app(tmp_path)
    (app / "nvlib" / "libcublas.so.12").unlink()  # now nothing in the tree can win over LD_LIBRARY_PATH
    plan = plan_for(rules, scan(rules, app), load_host_report(LINUX_HOST), zluda=LINUX_TGZ, platform="linux")
    assert "LD_AUDIT" not in {e.name for e in plan.environment}
    assert not any("zluda_ld" in a.path for a in plan.actions)


def test_windows_launchers_by_content(rules, tmp_path):
    tool = demo_copy(tmp_path)
    plan = plan_for(rules, scan(rules, tool), win_host())
    text = {a.path: a.content for a in plan.actions if a.kind == "write"}
    cmd = text[".cuda4amd/tool.cmd"]
    assert cmd.endswith("\r\n") and "\r\n" in cmd
    lines = cmd.split("\r\n")
    assert lines[0] == "@echo off" and "setlocal" in lines
    assert 'set "CUDA4AMD_ROOT=%~dp0.."' in lines
    assert 'set "HIP_PATH=C:\\Program Files\\AMD\\ROCm\\6.4\\"' in lines
    assert 'set "PATH=%CUDA4AMD_ROOT%\\.cuda4amd\\zluda;C:\\Program Files\\AMD\\ROCm\\6.4\\bin;%PATH%"' in lines
    assert '"%CUDA4AMD_ROOT%\\.cuda4amd\\zluda\\zluda.exe" -- "%CUDA4AMD_ROOT%\\tool.exe" %*' in lines
    assert lines[-2] == "exit /b %ERRORLEVEL%"
    ps1 = text[".cuda4amd/tool.ps1"]
    assert "$root = [System.IO.Path]::GetFullPath((Join-Path $PSScriptRoot '..'))" in ps1
    assert "& ($root + '\\.cuda4amd\\zluda\\zluda.exe') '--' ($root + '\\tool.exe') @args" in ps1
    assert "[Environment]::SetEnvironmentVariable('HIP_PATH', 'C:\\Program Files\\AMD\\ROCm\\6.4\\', 'Process')" in ps1
    assert "exit $code" in ps1 and "finally" in ps1  # the session's environment is put back
    generic = text[".cuda4amd/zluda-run.cmd"]
    assert '"%CUDA4AMD_ROOT%\\.cuda4amd\\zluda\\zluda.exe" -- %*' in generic


def test_launchers_in_another_folder_use_absolute_paths(rules, tmp_path):
    tool = demo_copy(tmp_path)
    with pytest.raises(PlanError, match=r"launchers' folder .* does not exist"):
        plan_for(rules, scan(rules, tool), win_host(), launcher_dir=tmp_path / "launchers")
    (tmp_path / "launchers").mkdir()
    plan = plan_for(rules, scan(rules, tool), win_host(), launcher_dir=tmp_path / "launchers")
    writes = [a for a in plan.actions if a.kind == "write"]
    assert all(os.path.isabs(a.path) and a.path.startswith(str(tmp_path / "launchers")) for a in writes)
    cmd = next(a.content for a in writes if a.path.endswith("tool.cmd"))
    assert f'set "CUDA4AMD_ROOT={tool}"' in cmd


def test_launchers_in_a_new_folder_of_the_target(rules, tmp_path):
    tool = demo_copy(tmp_path)
    plan = plan_for(rules, scan(rules, tool), win_host(), launcher_dir=tool / "zluda launchers")
    assert ("mkdir", "zluda launchers") in [(a.kind, a.path) for a in plan.actions]
    cmd = next(a for a in plan.actions if a.path == "zluda launchers/tool.cmd").content
    assert 'set "CUDA4AMD_ROOT=%~dp0.."' in cmd


def test_launcher_quoting():
    env = [EnvVar("X", "set", ((("lit", "it's 100% $HOME `x`"),),)),
           EnvVar("PATH", "prepend", ((("root", ""), ("lit", "/a b")),))]
    sh = render_sh(env, "my app", None, ".", "v6")
    assert "X='it'\\''s 100% $HOME `x`'" in sh
    assert "PATH=\"$root\"'/a b'\"${PATH:+:$PATH}\"" in sh
    assert "exec \"$root\"'/my app' \"$@\"" in sh
    cmd = render_cmd(env, None, "my app", None, ".", "v6")
    assert 'set "X=it\'s 100%% $HOME `x`"' in cmd
    with pytest.raises(LauncherError):
        render_cmd([EnvVar("X", "set", ((("lit", 'a"b'),),))], None, None, None, ".", "v6")


def test_dry_run_writes_nothing(rules, tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    before = snapshot(tmp_path)
    out = []
    outcome = fix_target(scan(rules, tool), host=win_host(), zluda_path=WIN_ZIP, dry_run=True,
                         echo=out.append, rules=rules)
    assert outcome.status == "dry-run" and outcome.exit_code == 0
    assert snapshot(tmp_path) == before
    text = "".join(out)
    assert "cuda4amd fix plan" in text and "copy   .cuda4amd/zluda/nvcuda.dll" in text
    assert "sha256 (known" not in text  # a local archive is read (not unpacked) for the hashes


def test_dry_run_of_an_uncached_pin_shows_the_pin(rules, tmp_path, fix_cache, monkeypatch):
    monkeypatch.delenv("CUDA4AMD_ZLUDA_MIRROR", raising=False)
    tool = demo_copy(tmp_path)
    out = []
    outcome = fix_target(scan(rules, tool), host=win_host(), dry_run=True, echo=out.append, rules=rules)
    text = "".join(out)
    assert outcome.status == "dry-run"
    assert ("ZLUDA v6-preview.69: zluda-windows-87531d3.zip, 32,944,552 bytes, sha256 "
            "e2959ed17c8ddae6bf2bf76cf3a7348f577a2548754685d776389df2220e5d9a") in text
    assert "https://github.com/vosen/ZLUDA/releases/download/v6-preview.69/zluda-windows-87531d3.zip" in text
    assert not fix_cache.exists()


def test_declined(rules, tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    before = snapshot(tmp_path)
    outcome = fix_target(scan(rules, tool), host=win_host(), zluda_path=WIN_ZIP, echo=lambda s: None,
                         confirm=lambda q: False, rules=rules)
    assert outcome.status == "declined" and snapshot(tmp_path) == before


def test_other_release_than_the_scan_is_refused(rules, tmp_path):
    outcome = fix_target(scan(rules, demo_copy(tmp_path)), host=win_host(), zluda_release="v6",
                         echo=lambda s: None, rules=rules)
    assert outcome.status == "refused" and "--zluda-release v6" in outcome.message


def test_foreign_fix_folder_is_refused(rules, tmp_path):
    tool = demo_copy(tmp_path)
    (tool / ".cuda4amd").mkdir()
    (tool / ".cuda4amd" / "notes.txt").write_text("mine")
    outcome = fix_target(scan(rules, tool), host=win_host(), zluda_path=WIN_ZIP, assume_yes=True,
                         echo=lambda s: None, rules=rules)
    assert outcome.status == "refused" and "holds no cuda4amd journal" in outcome.message
