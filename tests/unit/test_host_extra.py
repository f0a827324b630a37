"""The host checks of the evidence work: which GPU ZLUDA uses, HIP runtime vs HIP SDK,
ZLUDA's files since the fix, and the first-run note."""
from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

import pytest
from test_fix_support import fix_cache  # noqa: F401 - a fixture

from cuda4amd.host.firstrun import CACHE_PATHS, first_run
from cuda4amd.host.gpus import Gpu
from cuda4amd.host.hip_versions import version_checks
from cuda4amd.host.integrity import changed_files, zluda_file_checks
from cuda4amd.host.report import HipRuntimeInfo, HostReport
from cuda4amd.host.sdk import HipSdk
from cuda4amd.host.zluda_device import device_checks
from cuda4amd.model import FatbinEntry, KernelReport

IGPU = Gpu("AMD Radeon(TM) Graphics", "gfx1036", "hip-runtime", integrated=True, hip_index=0)
DGPU = Gpu("AMD Radeon RX 7900 XTX", "gfx1100", "hip-runtime", integrated=False, hip_index=1)


def host(platform="windows", gpus=(IGPU, DGPU), env=None, runtime=None, sdk_version=None):
    sdks = (HipSdk("C:/AMD/ROCm/6.4", platform, sdk_version, sdk_version, ("HIP_PATH",), {}, {}),) if sdk_version \
        else ()
    return HostReport(platform=platform, gpus=tuple(gpus), selected_gpu=1 if len(gpus) > 1 else 0,
                      hip_runtime=runtime, sdks=sdks, selected_sdk=0 if sdks else None, environment=env or {})


def test_integrated_gpu_first_is_a_warning_with_the_switch():
    [check] = device_checks(host())
    assert check.status == "warning" and "integrated AMD Radeon(TM) Graphics" in check.text
    assert check.next_step.startswith("set HIP_VISIBLE_DEVICES=1")
    [linux] = device_checks(host("linux"))
    assert "ROCR_VISIBLE_DEVICES=1" in linux.next_step  # AMD's recommendation on Linux


def test_the_isolation_variable_decides():
    [check] = device_checks(host(env={"HIP_VISIBLE_DEVICES": "1"}))
    assert check.status == "info" and "ZLUDA will use AMD Radeon RX 7900 XTX" in check.text
    assert device_checks(host(gpus=(DGPU,))) == []


def test_unknown_hip_numbers():
    gpus = (Gpu("A", "gfx1100", "cim"), Gpu("B", "gfx1030", "cim"))
    [check] = device_checks(host(gpus=gpus))
    assert check.status == "warning" and "could not be told" in check.text


def test_driver_runtime_and_sdk_majors_differ():
    rt = HipRuntimeInfo("amdhip64_7.dll", "driver", version="7.1.25")
    [check] = version_checks(host(runtime=rt, sdk_version="6.4"))
    assert check.topic == "hip-runtime" and "two HIP runtimes" in check.text
    assert version_checks(host(runtime=rt, sdk_version="7.1")) == []
    needs = version_checks(host(runtime=HipRuntimeInfo("amdhip64_6.dll", "driver", version="6.4.1"),
                                sdk_version="6.4"), ("v6",))
    assert needs[0].status == "missing" and "ZLUDA v6 loads amdhip64_7.dll" in needs[0].text


def test_linux_runtime_outside_the_rocm_used():
    rt = HipRuntimeInfo("libamdhip64.so.6", "rocm", path="/opt/rocm-6.2/lib/libamdhip64.so.6", version="6.2.4")
    [check] = version_checks(host("linux", runtime=rt, sdk_version="7.0"))
    assert "/opt/rocm-6.2" in check.text


@pytest.mark.skipif(sys.platform != "linux", reason="fixes the Linux fixture app")
def test_quarantined_and_altered_zluda_files_are_named(rules, tmp_path, fix_cache):
    from test_fix_apply import fix
    from test_fix_support import LINUX_HOST, LINUX_TGZ, linux_app

    app = linux_app(tmp_path)
    assert fix(rules, app, fix_cache, host=LINUX_HOST, zluda=LINUX_TGZ).status == "applied"
    [ok] = zluda_file_checks(app)
    assert ok.status == "ok"
    store = app / ".cuda4amd" / "zluda"
    (store / "libcublas.so").unlink()
    cuda = store / "libnvcuda.so"  # what libcuda.so.1 links to in the release
    cuda.write_bytes(b"repaired")
    missing, changed, _checked = changed_files(app)
    assert any(m.endswith("libcublas.so") for m in missing) and any(c.endswith(cuda.name) for c in changed)
    [bad] = zluda_file_checks(app)
    assert bad.status == "missing" and "antivirus" in bad.text and "cuda4amd undo" in bad.next_step
    assert zluda_file_checks(tmp_path) == []  # no fix there


@pytest.mark.skipif(sys.platform != "linux", reason="fixes the Linux fixture app; FIFOs")
def test_a_link_or_fifo_in_a_zluda_files_place_is_a_change_never_opened(rules, tmp_path, fix_cache):
    """A link to elsewhere (or to a FIFO, which a plain open would wait on forever) is compared, not followed."""
    from test_fix_apply import fix
    from test_fix_support import LINUX_HOST, LINUX_TGZ, linux_app

    app = linux_app(tmp_path)
    assert fix(rules, app, fix_cache, host=LINUX_HOST, zluda=LINUX_TGZ).status == "applied"
    store = app / ".cuda4amd" / "zluda"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (store / "libcublas.so").unlink()
    (store / "libcublas.so").symlink_to(fifo)
    (store / "libnvcuda.so").unlink()
    os.mkfifo(store / "libnvcuda.so")
    missing, changed, _ = changed_files(app)
    assert missing == [] and {c.rsplit("/", 1)[-1] for c in changed} == {"libcublas.so", "libnvcuda.so"}


@pytest.mark.skipif(sys.platform != "linux", reason="fixes the Linux fixture app")
def test_an_untrusted_journal_is_reported_and_nothing_it_names_is_read(rules, tmp_path, fix_cache):
    from test_fix_apply import fix
    from test_fix_support import LINUX_HOST, LINUX_TGZ, linux_app

    app = linux_app(tmp_path)
    assert fix(rules, app, fix_cache, host=LINUX_HOST, zluda=LINUX_TGZ).status == "applied"
    journal = app / ".cuda4amd" / "journal.json"
    data = json.loads(journal.read_text(encoding="utf-8"))
    data["actions"][0]["sha256"] = "0" * 64  # edited by hand: the MAC no longer verifies
    journal.write_text(json.dumps(data), encoding="utf-8")
    [check] = zluda_file_checks(app)
    assert check.status == "warning" and "not checked" in check.text and "MAC" in check.text


@pytest.mark.skipif(sys.platform != "linux", reason="fixes the Linux fixture app")
def test_a_target_in_use_is_not_checked(rules, tmp_path, fix_cache):
    from test_fix_apply import fix
    from test_fix_support import LINUX_HOST, LINUX_TGZ, linux_app

    from cuda4amd.fix.lock import target_lock

    app = linux_app(tmp_path)
    assert fix(rules, app, fix_cache, host=LINUX_HOST, zluda=LINUX_TGZ).status == "applied"
    with target_lock(app, "undo"):
        [check] = zluda_file_checks(app)
    assert check.status == "info" and "in use" in check.text
    [ok] = zluda_file_checks(app)
    assert ok.status == "ok"



def verdict(entries, containers=1, fmt="PE"):
    kernels = KernelReport(entries=tuple(entries), containers=containers, state="ptx-available")
    return SimpleNamespace(binary=SimpleNamespace(kernels=kernels, info=SimpleNamespace(format=fmt)))


def test_first_run_counts_ptx_and_names_the_cache():
    ptx = FatbinEntry("ptx", "sm_80", "8.0", "zstd", ".nv_fatbin", False, 1000, 60 << 20)
    rel = FatbinEntry("ptx", "sm_80", "8.0", "none", "__nv_relfatbin", True, 500, 500)
    sass = FatbinEntry("sass", "sm_80", None, "none", ".nv_fatbin", False, 800, 800)
    note = first_run([verdict([ptx, rel, sass], containers=3)])
    assert note["ptx_entries"] == 1 and note["ptx_bytes"] == 60 << 20 and note["modules"] == 1
    assert note["long"] and note["cache"] == CACHE_PATHS["windows"]
    mixed = first_run([verdict([ptx]), verdict([ptx], fmt="ELF")])
    assert mixed["cache"] == CACHE_PATHS and mixed["binaries"] == 2
    assert first_run([verdict([sass])]) is None
