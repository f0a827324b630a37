"""Parsers of the host probes, on recorded real outputs (fixtures/host, see its README)."""
from __future__ import annotations

import json
import struct

import pytest
from conftest import FIXTURES

from cuda4amd.host.gpus import (
    gpus_from_cim,
    gpus_from_hipinfo,
    gpus_from_rocminfo,
    parse_agent_enumerator,
    parse_cim_json,
    parse_hipinfo,
    parse_rocminfo,
)
from cuda4amd.host.probes import CommandResult, format_hip_version, parse_props
from cuda4amd.host.sdk import files_for_arch, kernel_archs, parse_hip_version_file
from cuda4amd.host.testing import read_recorded
from cuda4amd.rules.gpus import load_profiles

HOST = FIXTURES / "host"


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


def test_hipinfo_single_gpu(profiles):
    gpus = gpus_from_hipinfo(read_recorded(HOST / "hipinfo" / "win_rx7900xtx_hipsdk62.txt"), profiles)
    assert len(gpus) == 1
    g = gpus[0]
    assert (g.name, g.gfx, g.target, g.hip_index, g.integrated, g.source) == (
        "AMD Radeon RX 7900 XTX", "gfx1100", "gfx1100", 0, False, "hipinfo")
    assert g.memory_gb == 23.98


def test_hipinfo_igpu_and_dgpu(profiles):
    gpus = gpus_from_hipinfo(read_recorded(HOST / "hipinfo" / "win_igpu_gfx1036_rx7900xtx.txt"), profiles)
    assert [(g.hip_index, g.name, g.gfx, g.integrated) for g in gpus] == [
        (0, "AMD Radeon(TM) Graphics", "gfx1036", True),
        (1, "AMD Radeon RX 7900 XTX", "gfx1100", False),
    ]


def test_hipinfo_with_runtime_trace_lines(profiles):
    rows = parse_hipinfo(read_recorded(HOST / "hipinfo" / "linux_amd_log_level_rx6700xt.txt"))
    assert [(r["device#"], r["Name"], r["gcnArchName"]) for r in rows] == [("0", "AMD Radeon RX 6700 XT", "gfx1031")]
    gpus = gpus_from_hipinfo(read_recorded(HOST / "hipinfo" / "linux_amd_log_level_rx6700xt.txt"), profiles)
    assert gpus[0].gfx == "gfx1031" and gpus[0].integrated is False


def test_hipinfo_error_output_has_no_devices():
    assert parse_hipinfo(read_recorded(HOST / "hipinfo" / "win_hipsdk711_no_device.txt")) == []
    assert parse_hipinfo("") == []


def test_hipinfo_target_features_are_kept_apart():
    text = ("device#                           0\nName:                             AMD Radeon RX 6800 XT\n"
            "gcnArchName:                      gfx1030:sramecc-:xnack-\n")
    (g,) = gpus_from_hipinfo(text, load_profiles())
    assert (g.gfx, g.target) == ("gfx1030", "gfx1030:sramecc-:xnack-")


def test_cim_single_adapter_is_an_object(profiles):
    gpus = gpus_from_cim(read_recorded(HOST / "cim" / "win_single_rx6700xt.json"), profiles)
    assert [(g.name, g.gfx, g.pci_id, g.integrated, g.hip_index, g.source) for g in gpus] == [
        ("AMD Radeon RX 6700 XT", "gfx1031", "73DF", False, None, "cim")]
    assert gpus[0].driver_version == "31.0.24019.1006"
    assert gpus[0].memory_gb == 4.0


def test_cim_igpu_dgpu_and_other_vendors(profiles):
    gpus = gpus_from_cim(read_recorded(HOST / "cim" / "win_igpu_rx7900xtx.json"), profiles)
    # the generic iGPU name is mapped through its PCI id; the basic display adapter is not AMD
    assert [(g.name, g.gfx, g.pci_id, g.integrated) for g in gpus] == [
        ("AMD Radeon(TM) Graphics", "gfx1036", "164E", True),
        ("AMD Radeon RX 7900 XTX", "gfx1100", "744C", False),
    ]


def test_cim_raw_ciminstance_form_and_unknown_models(profiles):
    # ConvertTo-Json of a CimInstance without Select-Object nests values in CimInstanceProperties
    raw = [{"CimInstanceProperties": [
        {"Name": "Name", "Value": "AMD Radeon RX 7800 XT"},
        {"Name": "AdapterCompatibility", "Value": "Advanced Micro Devices, Inc."},
        {"Name": "PNPDeviceID", "Value": "PCI\\VEN_1002&DEV_747E&SUBSYS_00000000&REV_C8\\6&ABC&0&0"},
    ]}, {"Name": "AMD Radeon Pro Mystery", "PNPDeviceID": "PCI\\VEN_1002&DEV_ABCD&SUBSYS_1&REV_00\\X"},
        {"Name": "NVIDIA GeForce RTX 4090", "AdapterCompatibility": "NVIDIA",
         "PNPDeviceID": "PCI\\VEN_10DE&DEV_2684&SUBSYS_1&REV_A1\\X"}]
    gpus = gpus_from_cim(json.dumps(raw), profiles)
    assert [(g.name, g.gfx, g.pci_id) for g in gpus] == [
        ("AMD Radeon RX 7800 XT", "gfx1101", "747E"), ("AMD Radeon Pro Mystery", None, "ABCD")]
    assert parse_cim_json("") == []
    assert parse_cim_json("\ufeff{}") == [{}]


def test_rocminfo_agents(profiles):
    text = read_recorded(HOST / "rocminfo" / "linux_epyc_rx6700xt_rocm57.txt")
    agents = parse_rocminfo(text)
    assert [(a["Name"], a["Device Type"], a["Node"]) for a in agents] == [
        ("AMD EPYC 7453 28-Core Processor", "CPU", "0"),
        ("AMD EPYC 7453 28-Core Processor", "CPU", "1"),
        ("gfx1031", "GPU", "2"),
    ]
    (g,) = gpus_from_rocminfo(text, profiles)
    assert (g.name, g.gfx, g.pci_id, g.hip_index, g.integrated) == ("AMD Radeon RX 6700 XT", "gfx1031", "73DF", 0, False)


def test_agent_enumerator_skips_the_cpu():
    assert parse_agent_enumerator("gfx000\ngfx1030\ngfx1100\n\n") == ["gfx1030", "gfx1100"]


def test_hip_runtime_props_buffer():
    # hipDeviceProp_t: name char[256] first; gcnArchName somewhere after it (offset differs by HIP version)
    buf = bytearray(4096)
    buf[:23] = b"AMD Radeon RX 7900 XTX\0"
    struct.pack_into("<Q", buf, 256, 25753026560)  # totalGlobalMem-like noise
    buf[1160:1168] = b"gfx1100\0"
    dev = parse_props(bytes(buf))
    assert (dev.name, dev.gcn_arch_name) == ("AMD Radeon RX 7900 XTX", "gfx1100")
    buf[1160:1184] = b"gfx1030:sramecc-:xnack-\0"
    assert parse_props(bytes(buf)).gcn_arch_name == "gfx1030:sramecc-:xnack-"
    assert parse_props(bytes(4096)) is None
    assert format_hip_version(60241512) == "6.2.41512"


def test_hip_version_file_and_kernel_files():
    text = read_recorded(HOST / "sdk" / "win-hipsdk-5.7.hipVersion")
    assert parse_hip_version_file("# x\n" + text) == ("5.7", "5.7.32000")
    assert parse_hip_version_file("nothing") == (None, None)
    names = ["Kernels.so-000-gfx1100.hsaco", "TensileLibrary_lazy_gfx1100.dat", "TensileLibrary_lazy_gfx1101.dat",
             "TensileLibrary_Type_BB_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx1100.co",
             "Kernels.so-000-gfx906-xnack-.hsaco", "TensileLibrary_Type_x_fallback.dat", "TensileManifest.txt"]
    archs = kernel_archs(names)
    assert sorted(archs) == ["gfx1100", "gfx1101", "gfx906"]
    assert files_for_arch(names, "gfx1100") == (
        "Kernels.so-000-gfx1100.hsaco", "TensileLibrary_Type_BB_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx1100.co",
        "TensileLibrary_lazy_gfx1100.dat")
    assert files_for_arch(names, "gfx110") == ()  # no prefix matches


def test_command_result():
    assert CommandResult(0, "x").ok
    assert not CommandResult(-1, error="not found").ok


def test_ctypes_runtime_logic_with_a_fake_dll(monkeypatch):
    """CtypesHipRuntime's real code on a fake amdhip64 (ctypes.WinDLL replaced): amdhip64_7.dll loads
    but enumerates nothing (as HIP 7.1.1 did for gfx1030, ROCm/hip#3899), amdhip64_6.dll has the GPU."""
    import ctypes

    from cuda4amd.host.probes import CtypesHipRuntime

    class FakeLib:
        def __init__(self, count, version):
            self.count, self.version = count, version

        def hipRuntimeGetVersion(self, ref):
            ref._obj.value = self.version
            return 0

        def hipGetDeviceCount(self, ref):
            ref._obj.value = self.count
            return 0 if self.count else 100

        def hipGetDevicePropertiesR0600(self, buf, index):
            data = b"AMD Radeon RX 6800 XT\0".ljust(600, b"\0") + b"gfx1030\0"
            ctypes.memmove(buf, data, len(data))
            return 0

    libs = {"amdhip64_7.dll": FakeLib(0, 70151000), "amdhip64_6.dll": FakeLib(1, 60443483)}

    def fake_windll(name):
        if name not in libs:
            raise OSError(2, "not found")
        return libs[name]

    monkeypatch.setattr(ctypes, "WinDLL", fake_windll, raising=False)
    result = CtypesHipRuntime(platform="windows").probe()
    assert (result.library, result.version) == ("amdhip64_6.dll", "6.4.43483")
    assert [(d.name, d.gcn_arch_name) for d in result.devices] == [("AMD Radeon RX 6800 XT", "gfx1030")]
    del libs["amdhip64_6.dll"]
    result = CtypesHipRuntime(platform="windows").probe()
    assert result.library == "amdhip64_7.dll" and result.devices == ()
    assert "hipGetDeviceCount returned 100" in result.error and "amdhip64_6.dll: not found" in result.error
    assert CtypesHipRuntime(platform="linux").probe().library is None
