"""Counted nouns read as English in every output."""
from __future__ import annotations

import json
from pathlib import Path

from cuda4amd.report.console import render
from cuda4amd.words import counted

SAVED = Path(__file__).parents[1] / "goldens" / "demo-tool" / "scan.json"


def test_counted():
    assert counted(1, "binary", "binaries") == "1 binary"
    assert counted(0, "binary", "binaries") == "0 binaries"
    assert counted(2, "file") == "2 files"


def test_one_binary_in_one_file_reads_as_english():
    doc = json.loads(SAVED.read_text(encoding="utf-8"))
    doc["summary"].update(binaries=1, files=1, cuda_binaries=1)
    assert "1 binary in 1 file: 1 uses CUDA" in render(doc)
