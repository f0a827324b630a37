"""`cuda4amd doctor` (the click command object of cuda4amd.host.doctor)."""
from __future__ import annotations

import json
import subprocess
import sys

import click
from click.testing import CliRunner
from conftest import FIXTURES

from cuda4amd.cli.doctor import doctor
from cuda4amd.host import HostReport, readiness
from cuda4amd.host.doctor import render_console


def run(*args):
    return CliRunner().invoke(doctor, list(map(str, args)))


def test_doctor_on_this_machine_exits_0_and_says_what_is_missing():
    result = run()
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    if "NOT READY" in first:  # this CI machine: no AMD GPU, no HIP SDK / ROCm
        assert first.startswith("NOT READY: no AMD GPU and no HIP SDK")
        assert "no AMD GPU found" in result.output
        assert "next: " in result.output


def test_doctor_json_is_a_host_report(tmp_path):
    result = run("--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["schema"] == "cuda4amd.host/1"
    assert doc["readiness"]["level"] in ("ready", "partial", "not-ready")
    assert doc["readiness"]["headline"]
    host = HostReport.from_dict(doc)  # the derived readiness is accepted and ignored
    assert readiness(host).headline == doc["readiness"]["headline"]


def test_doctor_writes_a_file(tmp_path):
    out = tmp_path / "host.json"
    result = run("-o", out)
    assert result.exit_code == 0, result.output
    assert "report written to" in result.output
    assert json.loads(out.read_text(encoding="utf-8"))["schema"] == "cuda4amd.host/1"
    txt = tmp_path / "host.txt"
    assert run("-o", txt, "--format", "console").exit_code == 0
    assert "GPU" in txt.read_text(encoding="utf-8")


def test_doctor_unwritable_output_is_a_usage_error(tmp_path):
    result = run("-o", tmp_path / "missing-dir" / "host.json")
    assert result.exit_code == 2
    assert "cannot write" in result.output


def test_doctor_looks_for_zluda_in_a_target(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    stub = (FIXTURES / "host" / "zluda" / "nvcuda-zluda.stub").read_bytes()
    for name in ("zluda.exe", "nvcuda.dll", "libzluda_ld.so", "libnvcuda.so", "libcuda.so.1"):
        (app / name).write_bytes(stub)
    (app / "tool").write_bytes(b"\x7fELF")
    result = run("--target", app / "tool", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    (z,) = doc["zluda"]
    assert z["where"] == ["target"] and z["releases"]
    assert ("zluda.exe" if sys.platform.startswith("win") else "libzluda_ld.so") in z["files"]


def test_doctor_can_be_registered_on_a_group():
    group = click.Group("cuda4amd")
    group.add_command(doctor)
    result = CliRunner().invoke(group, ["doctor", "--help"])
    assert result.exit_code == 0
    assert "--format [console|json|markdown]" in result.output


def test_importing_the_doctor_command_stays_light():
    # the CLI registers `doctor` at import time: that must cost nothing but click
    code = ("import sys, cuda4amd.host.doctor; "
            "print(sorted(m for m in sys.modules if m.startswith('cuda4amd') or m in ('rich', 'ctypes')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['cuda4amd', 'cuda4amd.host', 'cuda4amd.host.doctor']"


def test_console_rendering_of_a_recorded_report():
    from cuda4amd.host import HipDevice, HipRuntimeResult, detect_host
    from cuda4amd.host.testing import windows_probes

    host = detect_host(windows_probes(hip=HipRuntimeResult(
        library="amdhip64_6.dll", version="6.2.41512", devices=(HipDevice("AMD Radeon RX 7900 XTX", "gfx1100"),))))
    text = render_console(host, readiness(host), width=100)
    assert text.splitlines()[0].startswith("PARTLY READY")
    assert "✓ HIP device 0: AMD Radeon RX 7900 XTX (gfx1100, RDNA3, discrete)" in text
    assert "✗ no HIP SDK found" in text
    assert all(len(line) <= 100 for line in text.splitlines())
