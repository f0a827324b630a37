"""GPU profiles (rules/gpus.toml): generated from the shared table, valid, consistent."""
from __future__ import annotations

import csv
import importlib.util
import re
from pathlib import Path

import pytest

from cuda4amd.rules.gpus import (
    GPU_PROFILES_FILE,
    PITFALL_IDS,
    base_gfx,
    gfx_from_target_version,
    load_profiles,
    normalize_model,
)
from cuda4amd.rules.validate import RulesError, shipped_rules_dir

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "fixtures" / "reference"
SHIPPED = REPO / "rules" / "gpus.toml"


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


@pytest.fixture(scope="module")
def tsv_rows():
    path = DATA / "gpu-profiles.tsv"
    if not path.is_file():
        pytest.skip(f"shared reference data not found at {DATA}")
    with path.open(newline="", encoding="utf-8") as f:
        return [{k: v.strip() for k, v in r.items()} for r in csv.DictReader(f, delimiter="\t")]


def _converter():
    spec = importlib.util.spec_from_file_location("convert_gpus", REPO / "tools" / "convert_gpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_shipped_file_is_where_the_loader_looks(profiles):
    # the installed package (editable or not) carries the repository's file
    assert (shipped_rules_dir() / GPU_PROFILES_FILE).read_bytes() == SHIPPED.read_bytes()
    assert profiles.provenance.generated_by == "tools/convert_gpus.py"
    assert profiles.provenance.sources == ("shared/data/gpu-profiles.tsv",)
    assert set(PITFALL_IDS) <= set(profiles.pitfalls)


def test_load_rules_still_accepts_the_rules_folder():
    # load_rules accepts gpus.toml beside families.toml and leaves it to cuda4amd.host
    from cuda4amd.rules.ruleset import load_rules

    assert load_rules().families


def test_converter_reproduces_the_shipped_file(tmp_path, tsv_rows):
    conv = _converter()
    out = tmp_path / "gpus.toml"
    assert conv.main(["--data", str(DATA), "--out", str(out)]) == 0
    assert out.read_bytes() == SHIPPED.read_bytes(), "re-run tools/convert_gpus.py"


def test_profiles_agree_with_the_shared_table(profiles, tsv_rows):
    assert set(profiles.profiles) == {r["gfx"] for r in tsv_rows}
    for r in tsv_rows:
        p = profiles.get(r["gfx"])
        assert p.generation == r["generation"]
        assert p.wave32 == (r["wave32_rdna"] == "yes")
        assert p.upstream_zluda == (r["upstream_zluda"] == "yes")
        assert p.windows_hip_sdk == r["windows_hip_sdk_current"].startswith("yes")
        assert p.example_models == r["example_models"]
        assert p.notes == r["notes"]
        # every editorial model's number appears in the TSV's example models
        for m in p.models:
            number = re.search(r"\d{3,4}[A-Z]?\b|VII|\b\d{2}\b", m).group()
            assert number in r["example_models"], (r["gfx"], m)


@pytest.mark.parametrize(("gfx", "zluda", "family", "integrated"), [
    ("gfx1201", True, "rdna4", False), ("gfx1100", True, "rdna3", False), ("gfx1103", True, "rdna3", True),
    ("gfx1031", True, "rdna2", False), ("gfx1036", True, "rdna2", True), ("gfx1010", True, "rdna1", False),
    ("gfx906", False, "gcn5", False), ("gfx803", False, "gcn4", False),
])
def test_profile_facts(profiles, gfx, zluda, family, integrated):
    p = profiles.get(gfx)
    assert (p.upstream_zluda, p.family, p.integrated) == (zluda, family, integrated)
    assert p.is_gcn == (not zluda)


def test_known_pitfalls_are_encoded(profiles):
    assert not profiles.get("gfx1031").official_rocblas("windows")
    assert not profiles.get("gfx1032").official_rocblas("linux")
    assert profiles.get("gfx1100").official_rocblas("windows")
    assert profiles.get("gfx1031").linux_override == "10.3.0"
    assert any("HSA_OVERRIDE_GFX_VERSION" in p for p in profiles.get("gfx1031").pitfalls)
    assert "no effect on Windows" in profiles.pitfall("hsa-override-windows")
    assert "MIOpen" in profiles.pitfall("miopen-windows")
    assert profiles.get("gfx1150").min_windows_hip_sdk == "7.2"
    assert any("HIP_VISIBLE_DEVICES" in p for p in profiles.get("gfx1036").pitfalls)


@pytest.mark.parametrize(("name", "gfx"), [
    ("AMD Radeon RX 7900 XTX", "gfx1100"),
    ("AMD Radeon RX 7900 XT", "gfx1100"),      # not confused with XTX
    ("AMD Radeon RX 6700 XT", "gfx1031"),
    ("Radeon RX 580 Series", "gfx803"),
    ("AMD Radeon(TM) RX 580", "gfx803"),
    ("AMD Radeon 780M Graphics", "gfx1103"),
    ("AMD Radeon RX 9070 XT", "gfx1201"),
    ("AMD Radeon(TM) Graphics", None),         # generic iGPU name: needs the PCI id
    ("NVIDIA GeForce RTX 4090", None),
])
def test_model_names_map_to_gfx(profiles, name, gfx):
    assert profiles.gfx_for_name(name) == gfx


def test_pci_ids_map_to_gfx(profiles):
    assert profiles.gfx_for_pci_id("744C") == "gfx1100"
    assert profiles.gfx_for_pci_id("0x164e") == "gfx1036"
    assert profiles.gfx_for_pci_id("73df") == "gfx1031"
    assert profiles.gfx_for_pci_id("1234") is None


def test_helpers():
    assert normalize_model("AMD Radeon(TM) RX 580 Series") == "radeon rx 580"
    assert base_gfx("gfx1030:sramecc-:xnack-") == "gfx1030"
    assert base_gfx("gfx906-xnack-") == "gfx906"
    assert gfx_from_target_version(110000) == "gfx1100"
    assert gfx_from_target_version(100301) == "gfx1031"
    assert gfx_from_target_version(90010) == "gfx90a"
    assert gfx_from_target_version(110501) == "gfx1151"
    assert gfx_from_target_version(0) is None


GOOD_ROW = """
[[gpu]]
gfx = "gfx1100"
generation = "RDNA3"
family = "rdna3"
integrated = false
wave32 = true
upstream_zluda = true
windows_hip_sdk = true
"""
PITFALLS = "".join(f'\n[[pitfall]]\nid = "{i}"\nplatform = "windows"\ntext = "t"\n' for i in PITFALL_IDS)
PROV = '[provenance]\ngenerated_by = "hand"\nsources = ["test"]\n'


@pytest.mark.parametrize(("text", "message"), [
    (GOOD_ROW + PITFALLS, "missing the mandatory [provenance] table"),
    (PROV + GOOD_ROW.replace('"gfx1100"', '"navi31"', 1) + PITFALLS, "gfx must look like"),
    (PROV + GOOD_ROW.replace('"rdna3"', '"rdna9"') + PITFALLS, "family must be one of"),
    (PROV + GOOD_ROW.replace("wave32 = true", "wave32 = false") + PITFALLS, "upstream_zluda needs wave32"),
    (PROV + GOOD_ROW + GOOD_ROW + PITFALLS, "duplicate gpu 'gfx1100'"),
    (PROV + GOOD_ROW + 'pci_ids = ["744c"]\n' + PITFALLS, "pci id must be 4 upper-case hex digits"),
    (PROV + GOOD_ROW + 'colour = "red"\n' + PITFALLS, "unknown key 'colour'"),
    (PROV + GOOD_ROW, "missing [[pitfall]] rows"),
    (PROV + GOOD_ROW + 'no_official_rocblas = ["macos"]\n' + PITFALLS, "platform must be one of"),
    (PROV + GOOD_ROW + PITFALLS + "\n[extra]\nx = 1\n", "unknown top-level key 'extra'"),
])
def test_invalid_profiles_raise_rules_error(tmp_path, text, message):
    path = tmp_path / "gpus.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RulesError) as info:
        load_profiles(path)
    assert info.value.path == path
    assert message in info.value.message


def test_minimal_valid_file_loads(tmp_path):
    path = tmp_path / "gpus.toml"
    path.write_text(PROV + GOOD_ROW + 'models = ["Radeon RX 7900 XTX"]\n' + PITFALLS, encoding="utf-8")
    p = load_profiles(path)
    assert p.gfx_for_name("AMD Radeon RX 7900 XTX") == "gfx1100"
