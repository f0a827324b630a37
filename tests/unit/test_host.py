"""Host detection end to end, on recorded doubles of every probe (fixtures/host).

Each scenario builds a machine from recorded outputs: a fake HIP SDK tree in a
temp dir (from a manifest of real file names), a KFD sysfs tree, hipInfo /
CIM / rocminfo text, and the answers of the driver's HIP runtime.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

from cuda4amd.host import (
    REDIRECTED_FAMILIES,
    SCHEMA,
    HipDevice,
    HipRuntimeResult,
    HostReport,
    HostReportError,
    PrivateStrings,
    Probes,
    detect_host,
    host_gaps,
    load_host_report,
    readiness,
)
from cuda4amd.host.probes import CommandResult
from cuda4amd.host.testing import build_tree, linux_probes, read_recorded, windows_probes

HOST = FIXTURES / "host"
ROCM = "C:\\Program Files\\AMD\\ROCm"
SDK64 = ROCM + "\\6.4"
HIP_ENV = {"HIP_PATH": SDK64 + "\\", "HIP_PATH_64": SDK64 + "\\"}
XTX = HipRuntimeResult(library="amdhip64_6.dll", version="6.2.41512",
                       devices=(HipDevice("AMD Radeon RX 7900 XTX", "gfx1100"),))

#: where the host gap of cuDNN says to get MIOpen on Windows (rules/gpus.toml [[pitfall]] miopen-install-windows)
MIOPEN_WINDOWS = ("install MIOpen from a HIP SDK build that ships MIOpen.dll (the official AMD HIP SDK does not): "
                  "ZLUDA's docs name TheRock's ROCm SDK nightly tarballs (therock-dist-windows-gfx<arch> from "
                  "therock-nightly-tarball.s3.amazonaws.com), unpacked with HIP_PATH set to that folder "
                  "(vosen/ZLUDA docs/src/hip_sdk.md)")


@pytest.fixture(scope="module")
def rules():
    from cuda4amd.rules.ruleset import load_rules

    return load_rules()


@pytest.fixture
def win(tmp_path):
    """A Windows machine: HIP SDK 6.4 (real rocBLAS file names) and the driver's amdhip64_6.dll."""
    sdk = build_tree(tmp_path / "rocm" / "6.4", HOST / "sdk" / "win-hipsdk-6.4.manifest")
    windir = tmp_path / "windows"
    (windir / "System32").mkdir(parents=True)
    (windir / "System32" / "amdhip64_6.dll").write_bytes(b"MZ")

    def make(hip=XTX, env=HIP_ENV, commands=None, extra_mounts=None, private=None, sdk_root=True):
        mounts = {"C:\\Windows": windir}
        if sdk_root:
            mounts[ROCM] = tmp_path / "rocm"
        mounts.update(extra_mounts or {})
        return windows_probes(mounts=mounts, env=env, commands=commands, hip=hip, private=private)

    make.sdk = sdk
    make.tmp = tmp_path
    return make


# ---------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------

def test_windows_rx7900xtx_hipsdk64_is_ready(win):
    host = detect_host(win())
    assert host.platform == "windows"
    gpu = host.gpu
    assert (gpu.name, gpu.gfx, gpu.source, gpu.hip_index) == ("AMD Radeon RX 7900 XTX", "gfx1100", "hip-runtime", 0)
    assert (host.hip_runtime.library, host.hip_runtime.version, host.hip_runtime.source) == (
        "amdhip64_6.dll", "6.2.41512", "driver")
    assert host.hip_runtime.path == "C:\\Windows\\System32\\amdhip64_6.dll"
    sdk = host.sdk
    assert (sdk.root, sdk.version, sdk.full_version) == (SDK64, "6.4", "6.4.43483")
    assert sdk.found_by[:2] == ("HIP_PATH", "HIP_PATH_64")
    assert {k for k, st in sdk.libraries.items() if st.present} == {"rocblas", "hipblaslt", "rocsparse", "hip"}
    assert sdk.kernels["rocblas"].dir == "bin\\rocblas\\library"
    assert "gfx1100" in sdk.kernels["rocblas"].archs and "gfx1031" not in sdk.kernels["rocblas"].archs
    assert "TensileLibrary_lazy_gfx1100.dat" in sdk.kernels["rocblas"].files["gfx1100"]
    assert "Kernels.so-000-gfx1100.hsaco" in sdk.kernels["hipblaslt"].files["gfx1100"]

    gaps = host_gaps(host, set(REDIRECTED_FAMILIES))
    assert gaps == {"driver_api": [], "blas": [], "blaslt": [], "sparse": [], "fft": [],
                    "dnn": ["cuDNN calls go to MIOpen, which this HIP SDK (6.4, Windows) does not include: "
                            + MIOPEN_WINDOWS]}
    ready = readiness(host)
    assert ready.level == "ready"
    assert ready.headline.startswith("READY: AMD Radeon RX 7900 XTX (gfx1100) with HIP SDK 6.4")
    assert "MIOpen" in ready.headline


def test_windows_sdk_with_miopen_serves_cudnn(win):
    (win.sdk / "bin" / "MIOpen.dll").write_bytes(b"MZ")
    host = detect_host(win())
    assert host_gaps(host, {"dnn"}) == {"dnn": []}
    assert "MIOpen" not in readiness(host).headline


def test_windows_rx6700xt_gfx1031_has_no_rocblas_kernels(win):
    hip = HipRuntimeResult(library="amdhip64_6.dll", version="6.2.41512",
                           devices=(HipDevice("AMD Radeon RX 6700 XT", "gfx1031"),))
    host = detect_host(win(hip=hip, env={**HIP_ENV, "HSA_OVERRIDE_GFX_VERSION": "10.3.0"}))
    assert host.gpu.gfx == "gfx1031"
    gaps = host_gaps(host, {"driver_api", "blas", "blaslt", "sparse"})
    assert gaps["driver_api"] == []
    assert gaps["blas"] == ["cuBLAS calls go to rocBLAS, which has no kernels for gfx1031 (AMD ships none for this GPU)"
                           ": add third-party Tensile kernels for gfx1031 to the SDK's bin\\rocblas\\library"]
    assert gaps["blaslt"] == ["cuBLASLt calls go to hipBLASLt, which has no kernels for gfx1031: install a HIP SDK (ROCm) "
                              "release with hipBLASLt kernels for gfx1031"]
    assert gaps["sparse"] == []
    ready = readiness(host)
    assert ready.level == "partial"
    assert "rocBLAS, which has no kernels for gfx1031" in ready.headline
    # the override does nothing on Windows, and doctor says so
    env_checks = [c for c in ready.checks if c.topic == "environment"]
    assert env_checks and "no effect on Windows" in env_checks[0].text
    lib = next(c for c in ready.checks if c.text.startswith("rocBLAS"))
    assert lib.status == "missing" and "third-party Tensile files for gfx1031" in lib.next_step


def test_windows_hipinfo_when_the_runtime_cannot_be_asked(win):
    hip = HipRuntimeResult(library="amdhip64_6.dll", error="hipGetDeviceCount returned 100")
    hipinfo = read_recorded(HOST / "hipinfo" / "win_rx7900xtx_hipsdk62.txt")
    probes = win(hip=hip, commands={"hipinfo": hipinfo})
    host = detect_host(probes)
    assert host.gpu.source == "hipinfo" and host.gpu.gfx == "gfx1100"
    # hipInfo.exe of the HIP SDK was run, by its path
    assert probes.commands.calls[0][0].lower().endswith("6.4\\bin\\hipinfo.exe")
    assert [(p.name, p.status) for p in host.probes][:2] == [("hip-runtime", "error"), ("hipinfo", "ok")]
    assert readiness(host).level == "ready"


def test_windows_igpu_and_dgpu_pick_the_discrete_one(win):
    hipinfo = read_recorded(HOST / "hipinfo" / "win_igpu_gfx1036_rx7900xtx.txt")
    host = detect_host(win(hip=HipRuntimeResult(error="amdhip64_7.dll: not found"), commands={"hipinfo": hipinfo}))
    assert [(g.name, g.integrated) for g in host.gpus] == [("AMD Radeon(TM) Graphics", True),
                                                           ("AMD Radeon RX 7900 XTX", False)]
    assert host.selected_gpu == 1 and host.gpu.hip_index == 1
    ready = readiness(host)
    hint = next(c for c in ready.checks if c.topic == "gpu" and c.status == "warning")
    assert "HIP device 0 first: AMD Radeon(TM) Graphics (gfx1036)" in hint.text
    assert hint.next_step == "set HIP_VISIBLE_DEVICES=1 so that apps use AMD Radeon RX 7900 XTX"
    assert ready.level == "ready"


def test_windows_hip_visible_devices_is_honoured(win):
    hipinfo = read_recorded(HOST / "hipinfo" / "win_igpu_gfx1036_rx7900xtx.txt")
    probes = win(hip=HipRuntimeResult(error="x"), commands={"hipinfo": hipinfo},
                 env={**HIP_ENV, "HIP_VISIBLE_DEVICES": "0"})
    host = detect_host(probes)
    assert host.gpu.gfx == "gfx1036"  # the user chose the iGPU: judge that one
    assert host.environment["HIP_VISIBLE_DEVICES"] == "0"
    assert not any(c.status == "warning" and c.topic == "gpu" for c in readiness(host).checks)


def test_windows_display_adapters_as_last_resort(win):
    cim = read_recorded(HOST / "cim" / "win_igpu_rx7900xtx.json")
    probes = win(hip=HipRuntimeResult(error="amdhip64_7.dll: not found; amdhip64_6.dll: not found"),
                 commands={"powershell": cim}, sdk_root=False)
    host = detect_host(probes)
    assert [(g.name, g.gfx, g.source, g.hip_index) for g in host.gpus] == [
        ("AMD Radeon(TM) Graphics", "gfx1036", "cim", None), ("AMD Radeon RX 7900 XTX", "gfx1100", "cim", None)]
    assert host.gpu.name == "AMD Radeon RX 7900 XTX"
    cmd = probes.commands.calls[-1]
    assert cmd[0].endswith("powershell") and "Win32_VideoController" in cmd[-1]
    assert [(p.name, p.status) for p in host.probes][:3] == [("hip-runtime", "not-found"), ("hipinfo", "not-found"),
                                                             ("cim", "ok")]
    ready = readiness(host)
    assert ready.level == "partial"  # no HIP SDK: the libraries are missing, the driver side is fine
    assert host_gaps(host, {"blas"}) == {"blas": ["cuBLAS calls go to rocBLAS, which needs the HIP SDK: none was found; install the HIP SDK"]}
    assert any("HIP device order is unknown" in c.text for c in ready.checks)


def test_windows_single_adapter_cim(win):
    probes = win(hip=HipRuntimeResult(error="x"), commands={"powershell": read_recorded(
        HOST / "cim" / "win_single_rx6700xt.json")}, sdk_root=False)
    host = detect_host(probes)
    assert [(g.name, g.gfx, g.pci_id) for g in host.gpus] == [("AMD Radeon RX 6700 XT", "gfx1031", "73DF")]
    # the PNP instance path (a per-machine id) never reaches the report
    assert "1C0C8E5F" not in host.to_json()


def test_windows_gcn_gpu_cannot_run_zluda(win):
    hip = HipRuntimeResult(library="amdhip64_6.dll", version="6.2.41512",
                           devices=(HipDevice("AMD Radeon VII", "gfx906:sramecc+:xnack-"),))
    host = detect_host(win(hip=hip))
    assert host.gpu.target == "gfx906:sramecc+:xnack-"
    gaps = host_gaps(host, {"driver_api"})
    assert gaps["driver_api"] == [
        "gfx906 (AMD Radeon VII) is GCN5 (Vega 20): upstream ZLUDA supports RDNA (gfx101x and newer) only"]
    assert readiness(host).level == "not-ready"


def test_windows_without_hip_path(win):
    host = detect_host(win(env={}))
    sdk = host.sdk
    assert sdk.found_by == ("%ProgramFiles%\\AMD\\ROCm",)
    gaps = host_gaps(host, {"blas"})
    assert gaps["blas"] == ["ZLUDA finds rocBLAS next to itself or through HIP_PATH, which is not set: "
                            f"set HIP_PATH={SDK64}"]
    check = next(c for c in readiness(host).checks if c.topic == "hip-sdk" and c.status == "warning")
    assert check.next_step == f"set HIP_PATH={SDK64}\\ (the HIP SDK installer normally does)"


def test_windows_two_sdks_hip_path_decides(win):
    build_tree(win.tmp / "rocm" / "5.7", HOST / "sdk" / "win-hipsdk-5.7.manifest")
    host = detect_host(win(env={"HIP_PATH": ROCM + "\\5.7\\", "HIP_PATH_57": ROCM + "\\5.7\\",
                                "HIP_PATH_64": SDK64 + "\\"}))
    assert [s.version for s in host.sdks] == ["5.7", "6.4"]
    assert host.sdk.version == "5.7" and host.sdk.full_version == "5.7.32000"
    assert "hipblaslt" in {k for k, st in host.sdks[1].libraries.items() if st.present}
    gaps = host_gaps(host, {"blas", "blaslt"})
    assert gaps["blas"] == []
    assert gaps["blaslt"] == ["cuBLASLt calls go to hipBLASLt, which this HIP SDK (5.7, Windows) does not include: install a HIP SDK (ROCm) release that ships hipBLASLt"]
    assert any(c.text.startswith("also installed: 6.4") for c in readiness(host).checks)


def test_windows_gfx1150_needs_a_newer_sdk(win):
    hip = HipRuntimeResult(library="amdhip64_6.dll", devices=(HipDevice("AMD Radeon 890M Graphics", "gfx1150"),))
    host = detect_host(win(hip=hip))
    assert host.gpu.integrated is True
    assert host_gaps(host, {"driver_api"})["driver_api"] == [
        "gfx1150 needs HIP SDK 7.2 or newer on Windows; this one is 6.4: install HIP SDK 7.2 or newer"]


def test_windows_no_runtime_no_sdk_no_tools(win):
    probes = win(hip=HipRuntimeResult(error="amdhip64_7.dll: not found"), env={}, sdk_root=False)
    (win.tmp / "windows" / "System32" / "amdhip64_6.dll").unlink()
    host = detect_host(probes)
    assert host.gpus == () and host.hip_runtime is None and host.sdks == ()
    assert host_gaps(host, {"driver_api"}) == {"driver_api": [
        "no AMD GPU found",
        "no HIP runtime (amdhip64_7.dll or amdhip64_6.dll) found: it comes with the AMD Adrenalin driver"]}
    ready = readiness(host)
    assert ready.headline.startswith("NOT READY: no AMD GPU and no HIP SDK found")
    assert [(p.name, p.status) for p in host.probes] == [
        ("hip-runtime", "not-found"), ("hipinfo", "not-found"), ("cim", "not-found"), ("hip-sdk", "not-found"),
        ("zluda", "not-found")]


def test_windows_broken_powershell_output_is_a_probe_error(win):
    probes = win(hip=HipRuntimeResult(error="x"), sdk_root=False,
                 commands={"powershell": CommandResult(0, "{not json")})
    host = detect_host(probes)
    assert host.gpus == ()
    assert ("cim", "error") in [(p.name, p.status) for p in host.probes]


# ---------------------------------------------------------------------------
# Linux
# ---------------------------------------------------------------------------

@pytest.fixture
def linux(tmp_path):
    def make(kfd: str | None, rocm=True, commands=None, env=None):
        mounts = {}
        if kfd:
            shutil.copytree(HOST / "kfd" / kfd, tmp_path / "kfd")
            mounts["/sys/class/kfd/kfd"] = tmp_path / "kfd"
        if rocm:
            build_tree(tmp_path / "opt" / "rocm-6.4.1", HOST / "sdk" / "linux-rocm-6.4.1.manifest")
            mounts["/opt"] = tmp_path / "opt"
        return linux_probes(mounts=mounts, env=env, commands=commands)
    return make


ROCMINFO = read_recorded(HOST / "rocminfo" / "linux_epyc_rx6700xt_rocm57.txt")


def test_linux_kfd_and_rocminfo(linux):
    probes = linux("epyc_rx6700xt", commands={"rocminfo": ROCMINFO})
    host = detect_host(probes)
    assert [(g.name, g.gfx, g.source, g.hip_index, g.pci_id, g.integrated) for g in host.gpus] == [
        ("AMD Radeon RX 6700 XT", "gfx1031", "kfd", 0, "73DF", False)]
    # rocminfo of the ROCm install was run by its path; the name was matched by KFD node number
    assert probes.commands.calls[0][0] == "/opt/rocm-6.4.1/bin/rocminfo"
    assert [(p.name, p.status) for p in host.probes][:2] == [("kfd", "ok"), ("rocminfo", "ok")]
    sdk = host.sdk
    assert (sdk.root, sdk.version, sdk.full_version, sdk.found_by) == (
        "/opt/rocm-6.4.1", "6.4", "6.4.1-83", ("/opt/rocm-*",))
    assert sdk.libraries["rocblas"].file == "lib/librocblas.so"
    assert (host.hip_runtime.library, host.hip_runtime.source) == ("libamdhip64.so", "rocm")
    gaps = host_gaps(host, {"driver_api", "blas", "dnn"})
    assert gaps == {"driver_api": [], "dnn": [],
                    "blas": ["cuBLAS calls go to rocBLAS, which has no kernels for gfx1031 (AMD ships none for this GPU)"
                             ": add third-party Tensile kernels for gfx1031 to the SDK's lib/rocblas/library, or set "
                             "HSA_OVERRIDE_GFX_VERSION=10.3.0"]}
    lib = next(c for c in readiness(host).checks if c.text.startswith("rocBLAS"))
    assert lib.next_step.endswith("or set HSA_OVERRIDE_GFX_VERSION=10.3.0")


def test_linux_override_borrows_gfx1030_kernels(linux):
    host = detect_host(linux("epyc_rx6700xt", commands={"rocminfo": ROCMINFO},
                             env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}))
    assert host_gaps(host, {"blas"}) == {"blas": []}
    assert "gfx1030" in host.sdk.kernels["rocblas"].files
    assert any(c.topic == "environment" and "gfx1030" in c.text for c in readiness(host).checks)
    assert readiness(host).level == "partial"  # hipBLASLt has no gfx1030 kernels in this ROCm
    assert host_gaps(host, {"blaslt"})["blaslt"] == [
        "cuBLASLt calls go to hipBLASLt, which has no kernels for gfx1030 (HSA_OVERRIDE_GFX_VERSION=10.3.0)"
        ": install a HIP SDK (ROCm) release with hipBLASLt kernels for gfx1030"]


def test_linux_kfd_without_rocm(linux):
    host = detect_host(linux("rx7900xtx", rocm=False))
    (g,) = host.gpus
    assert (g.gfx, g.pci_id, g.source, g.integrated) == ("gfx1100", "744C", "kfd", False)
    assert "Radeon RX 7900 XTX" in g.name
    assert host.sdk is None and host.hip_runtime is None
    assert host_gaps(host, {"driver_api"})["driver_api"] == [
        "no HIP runtime (libamdhip64.so) found: it comes with ROCm"]
    assert readiness(host).level == "not-ready"
    # the node's unique_id is never read into the report
    assert "11673270660693242239" not in host.to_json()


def test_linux_rocminfo_alone_and_agent_enumerator(linux):
    host = detect_host(linux(None, rocm=False, commands={"rocminfo": ROCMINFO}))
    assert [(g.gfx, g.source) for g in host.gpus] == [("gfx1031", "rocminfo")]
    host = detect_host(linux(None, rocm=False, commands={"rocm_agent_enumerator": "gfx000\ngfx1100\n"}))
    assert [(g.gfx, g.source, g.hip_index) for g in host.gpus] == [("gfx1100", "rocm_agent_enumerator", 0)]


def test_linux_nothing_found_recorded(linux):
    host = detect_host(linux(None, rocm=False))
    assert host.gpus == () and host.sdks == ()
    assert readiness(host).headline.startswith("NOT READY: no AMD GPU and no HIP SDK (ROCm) found")


def test_this_machine_real_probes():
    host = detect_host(Probes.real())
    assert host.schema == SCHEMA
    if not host.gpus:  # the CI machine has no AMD GPU
        assert "no AMD GPU found" in host_gaps(host, {"driver_api"})["driver_api"]
        assert readiness(host).level == "not-ready"
    HostReport.from_dict(host.to_dict())


# ---------------------------------------------------------------------------
# ZLUDA present?
# ---------------------------------------------------------------------------

def _zluda_folder(root: Path, rules, tag="v6-preview.69", platform="windows", driver=b"zluda") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    stub = (HOST / "zluda" / ("nvcuda-zluda.stub" if driver == b"zluda" else "nvcuda-nvidia.stub")).read_bytes()
    for f in rules.release(tag).files:
        if f.platform == platform and "/" not in f.path:
            (root / f.path).write_bytes(stub if f.path in ("nvcuda.dll", "libnvcuda.so") else b"MZ")
    return root


def test_zluda_in_the_target_is_recognised(win, rules, tmp_path):
    app = tmp_path / "app"
    _zluda_folder(app, rules)
    (app / "Tool.exe").write_bytes(b"MZ")
    host = detect_host(win(extra_mounts={"D:\\Apps\\Tool": app}), target="D:\\Apps\\Tool", rules=rules)
    (z,) = host.zluda
    assert z.path == "D:\\Apps\\Tool" and z.where == ("target",)
    assert "v6-preview.69" in z.releases and "zluda.exe" in z.files and "Tool.exe" not in z.files
    assert any("no per-file hashes" in e for e in z.evidence)
    assert any(c.topic == "zluda" and c.status == "ok" for c in readiness(host).checks)


def test_zluda_by_its_driver_bytes_on_path(win, rules, tmp_path):
    folder = tmp_path / "z"
    folder.mkdir()
    (folder / "nvcuda.dll").write_bytes((HOST / "zluda" / "nvcuda-zluda.stub").read_bytes())
    (folder / "cublas64_12.dll").write_bytes(b"MZ")
    nvidia = tmp_path / "system32"
    nvidia.mkdir()
    (nvidia / "nvcuda.dll").write_bytes((HOST / "zluda" / "nvcuda-nvidia.stub").read_bytes())
    host = detect_host(win(extra_mounts={"E:\\zl": folder, "C:\\Nv": nvidia},
                           env={**HIP_ENV, "PATH": "C:\\Nv;E:\\zl;C:\\nowhere"}), rules=rules)
    (z,) = host.zluda  # NVIDIA's own nvcuda.dll is not taken for ZLUDA
    assert z.path == "E:\\zl" and z.where == ("PATH",)
    assert z.files == ("cublas64_12.dll", "nvcuda.dll")
    assert "nvcuda.dll" in z.evidence[0] and "names ZLUDA" in z.evidence[0]


def test_nvidia_drivers_are_told_apart_from_their_first_megabyte(linux, rules, tmp_path):
    """NVIDIA's libcuda names its maker near its start: the read stops there (the file is not
    read through for ZLUDA's marker); a ZLUDA driver without signature files is still found."""
    from cuda4amd.host import probes as probe_module

    nvidia = tmp_path / "nvidia"
    nvidia.mkdir()
    (nvidia / "libcuda.so.1").write_bytes(b"\x7fELF" + b"\0" * 612 + b"NVIDIA Corporation" + bytes(range(256)) * 40000)
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "libcuda.so.1").write_bytes(b"\x7fELF" + bytes(range(256)) * 8000 + b"ZLUDA " + bytes(range(256)) * 100)
    reads: dict[str, int] = {}
    real_open = open

    class Counting:
        def __init__(self, path, mode="r", *args, **kwargs):
            self.path, self.f = str(path), real_open(path, mode, *args, **kwargs)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def read(self, n=-1):
            data = self.f.read(n)
            reads[self.path] = reads.get(self.path, 0) + len(data)
            return data

    probes = linux(None, rocm=False, env={"LD_LIBRARY_PATH": "/srv/nvidia:/srv/lone"})
    probes.fs.mounts[:0] = [(("srv", "nvidia"), nvidia), (("srv", "lone"), lone)]
    probe_module.open = Counting  # type: ignore[attr-defined]  # the module's reads only
    try:
        host = detect_host(probes, rules=rules)
    finally:
        del probe_module.open  # type: ignore[attr-defined]
    (found,) = host.zluda
    assert found.path == "/srv/lone" and "names ZLUDA" in found.evidence[0]
    assert reads[str(nvidia / "libcuda.so.1")] <= 1 << 20  # of its 10 MB: the first chunk
    # two NVIDIA markers, ZLUDA's
    assert reads[str(lone / "libcuda.so.1")] == 3 * (lone / "libcuda.so.1").stat().st_size


def test_zluda_linux_configured(linux, rules, tmp_path):
    z = _zluda_folder(tmp_path / "zl", rules, platform="linux")
    probes = linux(None, rocm=False, env={"LD_AUDIT": "/srv/zluda/zluda_ld", "CUDA4AMD_ZLUDA": "/srv/zluda"})
    probes.fs.mounts.insert(0, (("srv", "zluda"), z))
    host = detect_host(probes, rules=rules)
    (found,) = host.zluda
    assert found.path == "/srv/zluda" and found.where == ("CUDA4AMD_ZLUDA", "LD_AUDIT")
    assert found.releases  # matched against the Linux file tables


# ---------------------------------------------------------------------------
# report: JSON round trip, privacy, errors
# ---------------------------------------------------------------------------

def test_report_round_trips_through_json(win, tmp_path):
    hipinfo = read_recorded(HOST / "hipinfo" / "win_igpu_gfx1036_rx7900xtx.txt")
    host = detect_host(win(hip=HipRuntimeResult(error="x"), commands={"hipinfo": hipinfo}))
    path = tmp_path / "host.json"
    path.write_text(host.to_json(), encoding="utf-8")
    again = load_host_report(path)
    assert again.to_dict() == host.to_dict()
    assert host_gaps(again, REDIRECTED_FAMILIES) == host_gaps(host, REDIRECTED_FAMILIES)
    assert readiness(again).headline == readiness(host).headline


def test_recorded_report_judges_another_machine():
    # a gfx1031 Windows report, written by hand in the schema: the verdict side needs no probing
    data = {
        "schema": SCHEMA, "platform": "windows", "os": "Windows 10.0.22631",
        "gpus": [{"name": "AMD Radeon RX 6700 XT", "gfx": "gfx1031", "source": "hipinfo", "hip_index": 0,
                  "integrated": False}],
        "selected_gpu": 0,
        "hip_runtime": {"library": "amdhip64_6.dll", "source": "driver", "version": "6.2.41512"},
        "hip_sdks": [{"path": SDK64, "version": "6.4", "found_by": ["HIP_PATH"],
                      "libraries": {"rocblas": {"present": True, "file": "bin\\rocblas.dll"},
                                    "miopen": {"present": False}},
                      "kernels": {"rocblas": {"dir": "bin\\rocblas\\library", "archs": ["gfx1030", "gfx1100"]}}}],
        "selected_sdk": 0,
    }
    host = HostReport.from_dict(data)
    assert host_gaps(host, {"blas", "dnn", "solver"}) == {
        "blas": ["cuBLAS calls go to rocBLAS, which has no kernels for gfx1031 (AMD ships none for this GPU)"
                 ": add third-party Tensile kernels for gfx1031 to the SDK's bin\\rocblas\\library"],
        "dnn": ["cuDNN calls go to MIOpen, which this HIP SDK (6.4, Windows) does not include: " + MIOPEN_WINDOWS]}


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(schema="cuda4amd.host/9"), "schema must be 'cuda4amd.host/1'"),
    (lambda d: d.update(platform="macos"), "platform must be one of"),
    (lambda d: d.update(selected_gpu=3), "selected_gpu: 3 is not an index"),
    (lambda d: d.update(serial="X123"), "unknown key 'serial'"),
    (lambda d: d["gpus"][0].update(gfx="navi31"), "gpus[0].gfx must look like"),
    (lambda d: d["gpus"][0].update(source="guess"), "gpus[0].source must be one of"),
    (lambda d: d["gpus"][0].update(integrated="yes"), "gpus[0].integrated: wrong type str"),
    (lambda d: d["gpus"][0].update(hip_index=True), "gpus[0].hip_index: wrong type bool"),
    (lambda d: d["hip_sdks"][0]["libraries"].update(cudnn={"present": True}), "unknown library 'cudnn'"),
    (lambda d: d["environment"].update(USERNAME="alice"), "environment: 'USERNAME' must be one of"),
    (lambda d: d.pop("platform"), "missing key 'platform'"),
])
def test_invalid_reports_are_rejected(win, mutate, message):
    data = json.loads(detect_host(win()).to_json())
    mutate(data)
    with pytest.raises(HostReportError) as info:
        HostReport.from_dict(data, "host.json")
    assert message in info.value.message
    assert str(info.value.path) == "host.json"


def test_load_host_report_errors(tmp_path):
    with pytest.raises(HostReportError, match="cannot read"):
        load_host_report(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(HostReportError, match="not valid JSON"):
        load_host_report(bad)


def test_reports_carry_no_user_host_or_home(win, rules, tmp_path):
    private = PrivateStrings(homes=("C:\\Users\\alice",), users=("alice",), hosts=("ALICE-DESKTOP",))
    sdk_home = tmp_path / "homesdk"
    build_tree(sdk_home, HOST / "sdk" / "win-hipsdk-6.4.manifest")
    zl = _zluda_folder(tmp_path / "zl", rules)
    env = {"HIP_PATH": "C:\\Users\\alice\\ROCm\\6.4\\",
           "PATH": "C:\\Users\\Alice\\Downloads\\zluda;D:\\ALICE-DESKTOP\\x",
           "CUDA4AMD_ZLUDA": "C:\\Users\\alice\\Downloads\\zluda", "USERNAME": "alice", "COMPUTERNAME": "ALICE-DESKTOP"}
    probes = win(env=env, private=private, extra_mounts={"C:\\Users\\alice\\ROCm\\6.4": sdk_home,
                                                         "C:\\Users\\alice\\Downloads\\zluda": zl})
    host = detect_host(probes, rules=rules)
    assert host.sdk.root == "%USERPROFILE%\\ROCm\\6.4"
    assert host.zluda[0].path == "%USERPROFILE%\\Downloads\\zluda"
    text = host.to_json() + json.dumps([c.__dict__ for c in readiness(host).checks])
    for secret in ("alice", "Alice", "ALICE", "DESKTOP"):
        assert secret not in text
    assert "USERNAME" not in text and "COMPUTERNAME" not in text


def test_redaction_without_known_home():
    from cuda4amd.report.redact import Redactor, is_redacted

    assert Redactor.for_host_report("windows").text("C:\\Users\\bob\\zluda") == "C:\\Users\\<user>\\zluda"
    assert Redactor.for_host_report("linux").text("/home/bob/zluda") == "/home/<user>/zluda"
    linux = Redactor.for_host_report("linux", PrivateStrings(homes=("/home/bob",), users=("bob",), hosts=("box",)))
    assert linux.text("/home/bob/x:/srv/box/bob") == "~/x:/srv/<host>/<user>"
    assert is_redacted("/home/<user>/rocm") and not is_redacted("~/rocm")


def test_gfx_outside_the_profiles(win):
    hip = HipRuntimeResult(library="amdhip64_6.dll", devices=(HipDevice("AMD Radeon(TM) Graphics", "gfx90c:xnack-"),
                                                               HipDevice("AMD Radeon Future", "gfx1299")))
    host = detect_host(win(hip=hip, env={**HIP_ENV, "HIP_VISIBLE_DEVICES": "0"}))
    assert host_gaps(host, {"driver_api"})["driver_api"] == [
        "gfx90c (AMD Radeon(TM) Graphics) is a wave64 GCN/CDNA GPU: "
        "upstream ZLUDA supports RDNA (gfx101x and newer) only"]
    host = detect_host(win(hip=hip))
    assert host.gpu.gfx == "gfx1299"  # an unknown RDNA-numbered GPU is preferred over a GCN one
    assert host_gaps(host, {"driver_api"})["driver_api"] == []
    assert any("not in cuda4amd's GPU profiles" in c.text for c in readiness(host).checks)


def test_gaps_are_structured_and_the_family_library_map_is_rule_data(win, tmp_path):
    from cuda4amd.host.gaps import GAP_CODES, Gap, family_libraries, find_gaps
    from cuda4amd.rules.ruleset import load_rules

    host = detect_host(win(sdk_root=False))
    gaps = find_gaps(host, ["driver_api", "blas", "dnn", "fft", "solver"])
    assert gaps == [Gap("blas", "no-hip-sdk", "cuBLAS calls go to rocBLAS, which needs the HIP SDK: none was found; install the HIP SDK"),
                    Gap("dnn", "no-hip-sdk", "cuDNN calls go to MIOpen, which needs the HIP SDK: none was found; "
                                             "install the HIP SDK; " + MIOPEN_WINDOWS)]
    assert all(g.code in GAP_CODES for g in gaps)
    unset = detect_host(win(env={}))  # the SDK is there, HIP_PATH is not
    assert {g.code for g in find_gaps(unset, ["blas"])} == {"hip-path-unset"}
    # which AMD library a family's calls go to is families.toml's host_library
    shipped = load_rules()
    from cuda4amd.host.sdk import LIBRARIES
    assert all(f.host_library in LIBRARIES for f in shipped.families if f.host_library is not None)
    assert family_libraries(shipped) == {"blas": ("cuBLAS", "rocblas"), "blaslt": ("cuBLASLt", "hipblaslt"),
                                         "dnn": ("cuDNN", "miopen"), "sparse": ("cuSPARSE", "rocsparse")}
    extra = tmp_path / "rules"
    extra.mkdir()
    (extra / "families.toml").write_text(
        '[provenance]\ngenerated_by = "test"\nsources = ["test"]\n\n[[family]]\nid = "acme_blas"\n'
        'name = "ACME BLAS"\nwindows = [\'^acmeblas64\\.dll$\']\nlinux = []\nzluda_libraries = []\n'
        'default_route = "blocked"\namd_equivalent = "rocBLAS"\nzluda_status = "test"\nadvice = "test"\n'
        'evidence = "test"\nhost_library = "rocblas"\n', encoding="utf-8")
    custom = load_rules([extra])
    assert family_libraries(custom)["acme_blas"] == ("ACME BLAS", "rocblas")
    assert find_gaps(host, ["acme_blas"], rules=custom) == [
        Gap("acme_blas", "no-hip-sdk", "ACME BLAS calls go to rocBLAS, which needs the HIP SDK: none was found; install the HIP SDK")]
