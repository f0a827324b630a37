"""`scan --rules DIR --fix` and `scan --search-path DIR --fix` plan and verify the setup the user asked for.

The scan's ScanOptions and RuleSet travel in its ScanResult to the plan and to
the verification re-scan; each test changes one option through the command
line and checks that the plan (and the after-report's re-scan) changes
exactly as the scan did. Each extra rules folder is written here, and each
adds one kind of rule data: a family, a GPU profile, a framework.
"""
from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

from click.testing import CliRunner
from conftest import FIXTURES
from test_fix_support import WIN_HOST, WIN_ZIP, demo_copy, fix_cache  # noqa: F401 - fix_cache is a fixture
from test_packages import install

from cuda4amd.cli import main
from cuda4amd.fix.journal import load_journal
from cuda4amd.rules import load_rules

PROVENANCE = '[provenance]\ngenerated_by = "test"\nsources = ["tests/unit/test_fix_options.py"]\n'


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def rules_folder(tmp: Path, files: dict[str, str]) -> Path:
    folder = tmp / "my-rules"
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(PROVENANCE + textwrap.dedent(text), encoding="utf-8")
    return folder


def scan_json(target: Path, *options) -> dict:
    done = invoke("scan", target, "--format", "json", "--no-redact", *options)
    assert done.exit_code in (0, 3, 4, 9), done.output
    return json.loads(done.output)


def verdicts(document: dict) -> dict[str, str]:
    return {b["path"]: b["verdict"] for b in document["binaries"]}


def fix(target: Path, *options):
    return invoke("scan", target, "--host", WIN_HOST, "--fix", "--zluda", WIN_ZIP, "--yes", *options)


def after_scan(target: Path) -> dict:
    return json.loads((target / ".cuda4amd" / "after-report.json").read_text(encoding="utf-8"))["scan"]


# ---------------------------------------------------------------------------
# a custom family
# ---------------------------------------------------------------------------

VENDOR_FAMILY = """
[[family]]
id = "vendor"
name = "Vendor GPU runtime"
windows = ['^missing_vendor\\.dll$']
linux = ['^libmissing_vendor\\.so$']
zluda_libraries = []
default_route = "blocked"
amd_equivalent = "none"
zluda_status = "not replaced"
advice = "needs the vendor runtime, which has no AMD route"
evidence = "test"
"""


def chain_app(tmp: Path) -> Path:
    """The demo with pe/chain/ beside it: chain_app.exe imports missing_vendor.dll, found nowhere."""
    tool = demo_copy(tmp)
    for f in (FIXTURES / "pe" / "chain").iterdir():
        shutil.copy(f, tool / f.name)
    return tool


def test_a_custom_family_changes_the_plan_and_the_verification_as_it_changes_the_scan(tmp_path, fix_cache):
    tool = chain_app(tmp_path)
    custom = rules_folder(tmp_path, {"families.toml": VENDOR_FAMILY})
    plain, ruled = scan_json(tool, "--host", WIN_HOST), scan_json(tool, "--host", WIN_HOST, "--rules", custom)
    deps = {d["name"]: d for b in ruled["binaries"] if b["path"] == "chain_app.exe" for d in b["dependencies"]}
    assert deps["missing_vendor.dll"]["family"] == "vendor" and deps["missing_vendor.dll"]["route"] == "blocked"
    assert all(b["path"] != "chain_app.exe" or not b["dependencies"] or
               all(d.get("family") != "vendor" for d in b["dependencies"]) for b in plain["binaries"])

    done = fix(tool, "--rules", custom)
    assert done.exit_code == 0, done.output
    plan = load_journal(tool).plan
    left = {r["binary"]: r["reason"] for r in plan.left_alone}
    assert "missing_vendor.dll" in left["chain_app.exe"], left
    # the verification re-scanned with the same rules: the after-report says what the scan said
    assert verdicts(after_scan(tool)) == verdicts(scan_json(tool, "--host", "none", "--rules", custom))
    after = {d["name"]: d for b in after_scan(tool)["binaries"] if b["path"] == "chain_app.exe"
             for d in b["dependencies"]}
    assert after["missing_vendor.dll"]["family"] == "vendor"


# ---------------------------------------------------------------------------
# --search-path
# ---------------------------------------------------------------------------

def test_a_search_path_changes_the_plan_and_the_verification_as_it_changes_the_scan(tmp_path, fix_cache):
    tool = chain_app(tmp_path)
    elsewhere = tmp_path / "vendor-bin"
    elsewhere.mkdir()
    shutil.copy(FIXTURES / "pe" / "plain.dll", elsewhere / "missing_vendor.dll")
    shutil.copy(FIXTURES / "pe" / "plain.dll", elsewhere / "cublas64_12.dll")  # where NVIDIA's cuBLAS would be
    scanned = scan_json(tool, "--host", WIN_HOST, "--search-path", elsewhere)
    resolved = {(b["path"], d["name"]): d["resolved"] for b in scanned["binaries"] for d in b["dependencies"]}
    assert resolved[("render.dll", "cublas64_12.dll")] == str(elsewhere / "cublas64_12.dll")

    done = fix(tool, "--search-path", elsewhere, "--mode", "place")
    assert done.exit_code == 0, done.output
    plan = load_journal(tool).plan
    linked = {(r["binary"], r["name"]): r for r in plan.linked}
    assert linked[("render.dll", "cublas64_12.dll")]["resolved"] == str(elsewhere / "cublas64_12.dll")
    # the re-scan looked in the search path too: chain_app's vendor library is found there, as in the scan
    after = {(b["path"], d["name"]): d["resolved"] for b in after_scan(tool)["binaries"] for d in b["dependencies"]}
    assert after[("chain_app.exe", "missing_vendor.dll")] == str(elsewhere / "missing_vendor.dll")
    # and the ZLUDA file placed next to render.dll comes before the search path, as the loader does it
    assert after[("render.dll", "cublas64_12.dll")] == "cublas64_12.dll"


# ---------------------------------------------------------------------------
# a custom GPU profile
# ---------------------------------------------------------------------------

STRICTER_GFX1100 = """
[[gpu]]
gfx = "gfx1100"
generation = "RDNA3"
family = "rdna3"
integrated = false
wave32 = true
upstream_zluda = true
windows_hip_sdk = true
models = ["Radeon RX 7900 XTX", "Radeon RX 7900 XT", "Radeon PRO W7900", "Radeon PRO W7800"]
pci_ids = ["7448", "744C"]
min_windows_hip_sdk = "7.1"
notes = "a site rule: this machine's driver needs a newer HIP SDK"
"""


def test_a_custom_gpu_profile_changes_the_plan_as_it_changes_the_scan(tmp_path, fix_cache):
    tool = demo_copy(tmp_path)
    custom = rules_folder(tmp_path, {"gpus.toml": STRICTER_GFX1100})
    assert load_rules([custom]).gpus.get("gfx1100").min_windows_hip_sdk == "7.1"
    assert load_rules().gpus.get("gfx1100").min_windows_hip_sdk == ""
    judged = scan_json(tool, "--host", WIN_HOST, "--rules", custom)
    assert set(verdicts(judged).values()) <= {"blocked", "no-cuda"}
    assert any("needs HIP SDK 7.1 or newer" in r for b in judged["binaries"] for r in b["reasons"])

    refused = fix(tool, "--rules", custom)
    assert refused.exit_code == 5, refused.output
    assert "needs HIP SDK 7.1 or newer" in " ".join(refused.output.split())  # wrapped to the terminal
    assert not (tool / ".cuda4amd").exists()
    assert fix(tool).exit_code == 0  # the shipped profile lets the same host through


# ---------------------------------------------------------------------------
# a custom framework
# ---------------------------------------------------------------------------

ACME_FRAMEWORK = """
[framework]
id = "acme"
name = "ACME Render"
distributions = ["acme-render"]

[[switch]]
avoids = ["blas"]
kind = "env"
setting = "ACME_RENDER_BLAS=off"
recommended = true
note = "a site rule: ACME's cuBLAS path is slow under ZLUDA"
"""


def test_a_custom_framework_changes_the_plan_and_the_verification_as_it_changes_the_scan(tmp_path, fix_cache):
    site = tmp_path / "site-packages"
    install(site, "acme-render", "1.0", {"acme/tool.exe": FIXTURES / "demo" / "Tool" / "tool.exe",
                                         "acme/render.dll": FIXTURES / "demo" / "Tool" / "render.dll"})
    custom = rules_folder(tmp_path, {"frameworks/acme.toml": ACME_FRAMEWORK})
    assert [p["framework"] for p in scan_json(site, "--host", "none")["packages"]] == [None]
    assert [p["framework"] for p in scan_json(site, "--host", "none", "--rules", custom)["packages"]] == ["acme"]

    done = fix(site, "--rules", custom)
    assert done.exit_code == 0, done.output
    plan = load_journal(site).plan
    env = {e.name: e for e in plan.environment}
    assert env["ACME_RENDER_BLAS"].values == ((("lit", "off"),),)
    assert "ACME Render" in env["ACME_RENDER_BLAS"].why
    assert any("ACME_RENDER_BLAS=off" in a.content for a in plan.actions if a.kind == "write" and a.content)
    assert [p["framework"] for p in after_scan(site)["packages"]] == ["acme"]
