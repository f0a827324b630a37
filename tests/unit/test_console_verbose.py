"""-v says each thing once: a function the reasons name is not listed again; a venv's shared
site-packages folder heads the table instead of every row."""
from __future__ import annotations

import json
from pathlib import Path

from cuda4amd.report.console import render

SAVED = Path(__file__).parents[1] / "goldens" / "demo-tool" / "scan.json"


def document() -> dict:
    return json.loads(SAVED.read_text(encoding="utf-8"))


def test_a_stub_the_reasons_name_is_not_listed_again():
    shown = render(document(), verbose=True, width=200)
    assert shown.count("cublasDgemm_v2") == shown.count("NOT_SUPPORTED (cublasDgemm_v2)")
    assert "stub: cublasDgemm_v2" not in shown


def test_stubs_the_reasons_do_not_name_are_still_listed():
    doc = document()
    render_dll = next(b for b in doc["binaries"] if b["path"] == "render.dll")
    dep = next(d for d in render_dll["dependencies"] if d["name"] == "cublas64_12.dll")
    dep["symbols"]["stub"] = ["cublasDgemm_v2", "cublasZgemm_v2"]
    shown = render(doc, verbose=True, width=200)
    assert "stub: cublasZgemm_v2 (and the 1 named above)" in shown


def test_a_venv_s_site_packages_is_said_once():
    doc = document()
    for binary in doc["binaries"]:
        binary["path"] = "lib/python3.12/site-packages/tool/" + binary["path"]
    shown = render(doc, verbose=True, width=200)
    assert shown.count("site-packages") == 1 and "binaries below lib/python3.12/site-packages/" in shown
    assert "│ tool/render.dll" in shown
