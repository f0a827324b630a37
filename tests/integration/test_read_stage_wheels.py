"""The real-wheel (acceptance) tests of tests/unit/test_read_stage.py: CUDA wheels from PyPI, downloaded on demand."""
from __future__ import annotations

import json

import pytest
from test_read_stage import ACCEPTANCE_WHEELS, scan_json


@pytest.mark.acceptance
@pytest.mark.parametrize("spec", ACCEPTANCE_WHEELS)
@pytest.mark.parametrize("form", ["tree", "wheel"])
def test_real_wheels_read_by_workers_and_cache_match_one_process(spec, form, tmp_path):
    from wheelcache import Unavailable, unpacked, wheel

    try:
        target = unpacked(spec) if form == "tree" else wheel(spec)
    except Unavailable as exc:
        pytest.skip(str(exc))
    serial = scan_json(target, "--jobs", "1", "--no-cache")
    assert json.loads(serial)["binaries"]
    assert scan_json(target, "--jobs", "2", "--no-cache") == serial
    assert scan_json(target, "--jobs", "4", cache_dir=tmp_path) == serial
    assert scan_json(target, "--jobs", "1", cache_dir=tmp_path) == serial
