"""Issue 30 item 7a: Triton judged as it runs on AMD. A Triton that ships only its AMD backend (the layout of
lshqqytiger/triton, which ComfyUI-Zluda installs) takes that backend under ZLUDA: HIP code objects the HIP
runtime runs, not SASS; one that ships the NVIDIA backend beside it (PyPI's triton) takes the NVIDIA one under
a CUDA build of PyTorch, as today. Site-packages laid out by hand (real RECORD format)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from test_packages import install

from cuda4amd.cli import main
from cuda4amd.host import HipDevice, HipRuntimeResult, detect_host
from cuda4amd.host.testing import build_tree, windows_probes
from cuda4amd.rules import RulesError
from cuda4amd.rules.runtime import load_generators

AMD = "triton/backends/amd/driver.py"
NVIDIA = "triton/backends/nvidia/driver.py"
ROCM = "C:\\Program Files\\AMD\\ROCm"


def site_with_triton(tmp_path, *backends: str):
    source = tmp_path / "src.py"
    source.write_text("# a Python file of the distribution\n")
    site = tmp_path / "site-packages"
    install(site, "triton", "3.4.0", {"triton/__init__.py": source, **dict.fromkeys(backends, source)})
    return site


def triton_of(report: dict) -> dict:
    (package,) = [p for p in report["packages"] if p["name"] == "triton"]
    return package


def test_a_triton_with_only_the_amd_backend_is_not_blocked_for_sass(tmp_path, scan):
    report = scan(site_with_triton(tmp_path, AMD))
    triton = triton_of(report)
    assert triton["verdict"] == "ready"
    (generator,) = triton["generators"]
    assert generator["backend"] == {"id": "amd", "taken": True, "emits": "hsaco", "confidence": "unverified"}
    assert not any("SASS" in r for r in triton["reasons"])
    assert ("run-time code generator: Triton through its AMD backend (HIP code objects, beside ZLUDA"
            in triton["summary"])
    assert any(a.startswith("Triton: a Triton that ships only the AMD backend") and "ZLUDA_CC=8.8" in a
               for a in triton["advice"])
    assert report["verdict"] == "ready"


def test_a_triton_with_the_nvidia_backend_beside_it_emits_sass_as_before(tmp_path, scan):
    triton = triton_of(scan(site_with_triton(tmp_path, AMD, NVIDIA)))
    assert triton["verdict"] == "blocked"
    assert triton["generators"][0]["backend"]["taken"] is False
    assert triton["reasons"][0].startswith("Triton generates GPU code at run time as SASS (a cubin)")
    assert "it ships its AMD backend too, but Triton takes it only with a ROCm build of PyTorch" in triton["reasons"][0]
    assert any(a.startswith("Triton's AMD backend: on Linux, the ROCm build of PyTorch") for a in triton["advice"])


def test_a_triton_without_the_amd_backend_stays_as_today(tmp_path, scan):
    triton = triton_of(scan(site_with_triton(tmp_path, NVIDIA)))
    assert triton["verdict"] == "blocked"
    assert "backend" not in triton["generators"][0]
    assert "AMD backend" not in " ".join(triton["reasons"] + triton["advice"])


def recorded_host(tmp_path, sdk: bool) -> str:
    """A Windows machine with an RX 7900 XTX and the driver's HIP runtime, with or without HIP SDK 6.4."""
    mounts = {}
    env = {}
    if sdk:
        build_tree(tmp_path / "rocm" / "6.4", FIXTURES / "host" / "sdk" / "win-hipsdk-6.4.manifest")
        mounts[ROCM] = tmp_path / "rocm"
        env["HIP_PATH"] = ROCM + "\\6.4\\"
    windir = tmp_path / "windows"
    (windir / "System32").mkdir(parents=True)
    (windir / "System32" / "amdhip64_6.dll").write_bytes(b"MZ")
    mounts["C:\\Windows"] = windir
    hip = HipRuntimeResult(library="amdhip64_6.dll", version="6.2.41512",
                           devices=(HipDevice("AMD Radeon RX 7900 XTX", "gfx1100"),))
    path = tmp_path / "host.json"
    path.write_text(detect_host(windows_probes(mounts=mounts, env=env, hip=hip)).to_json())
    return str(path)


def test_the_amd_backend_is_gated_by_the_hip_sdk_on_the_host(tmp_path):
    site = site_with_triton(tmp_path, AMD)
    without = CliRunner().invoke(main, ["scan", str(site), "--format", "json", "--host",
                                        recorded_host(tmp_path / "a", sdk=False)])
    triton = triton_of(json.loads(without.output))
    assert triton["verdict"] == "blocked" and without.exit_code == 4
    assert triton["reasons"][0].startswith("this host: Triton's AMD backend compiles each kernel")
    assert triton["reasons"][0].endswith("this host has no HIP SDK (ROCm): install it, with HIP_PATH set on Windows")
    with_sdk = CliRunner().invoke(main, ["scan", str(site), "--format", "json", "--host",
                                         recorded_host(tmp_path / "b", sdk=True)])
    assert triton_of(json.loads(with_sdk.output))["verdict"] == "ready" and with_sdk.exit_code == 0


def test_backend_rules_are_validated(tmp_path):
    (triton,) = [g for g in load_generators() if g.id == "triton"]
    (amd,) = triton.backends
    assert amd.is_taken(frozenset({AMD})) and not amd.is_taken(frozenset({AMD, NVIDIA}))
    assert triton.backend_in(frozenset({NVIDIA})) is None
    body = ("[provenance]\ngenerated_by = 'hand'\nsources = ['test']\n\n[[generator]]\nid = 'x'\nname = 'X'\n"
            "distributions = ['x']\nemits = 'sass'\nneeded = 'always'\nhow = 'h'\n\n[[generator.backend]]\n"
            "id = 'amd'\nname = 'A'\nfiles = ['x/amd.py']\nunless = []\nemits = '{emits}'\nneeds = 'hip-sdk'\n"
            "how = 'h'\ntaken = 't'\nnot_taken = 'n'\n")
    path = tmp_path / "generators.toml"
    path.write_text(body.format(emits="cubin"))
    with pytest.raises(RulesError, match="emits"):
        load_generators(tmp_path)
    path.write_text(body.format(emits="hsaco"))
    (x,) = load_generators(tmp_path)
    assert x.backends[0].files == ("x/amd.py",)
