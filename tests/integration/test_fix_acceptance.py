"""Acceptance: the fix on a real package tree (cupy-cuda12x 14.2.0 for Windows in a venv-like layout).

The wheel comes from the fix_cache of tests/wheelcache.py and is copied into a
temporary venv layout; the fix_cache is never modified. The ZLUDA release is the
project's fixture release (fixtures/zluda), the host a recorded Windows report.
"""
from __future__ import annotations

import shutil

import pytest
from test_fix_apply import _fault_loop, fix, scan
from test_fix_support import WIN_HOST, WIN_ZIP, changed, fix_cache, snapshot  # noqa: F401 - fix_cache is a fixture
from wheelcache import Unavailable, unpacked

from cuda4amd.fix.journal import load_journal
from cuda4amd.fix.undo import undo_target

pytestmark = pytest.mark.acceptance

CUPY = "cupy-cuda12x==14.2.0"


@pytest.fixture(scope="module")
def cupy_source():
    try:
        return unpacked(CUPY)
    except Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def venv(tmp_path, cupy_source):
    root = tmp_path / "venv"
    shutil.copytree(cupy_source, root / "Lib" / "site-packages")
    (root / "pyvenv.cfg").write_text("home = C:\\Python312\nversion = 3.12.0\n")
    (root / "Scripts").mkdir()
    (root / "Scripts" / "python.exe").write_text("a stand-in: not a binary, so not scanned\n")
    return root


def test_cupy_venv_launcher(rules, tmp_path, venv, fix_cache, cupy_source):
    source_before = snapshot(cupy_source)
    base = snapshot(tmp_path, skip=(fix_cache,))
    result = scan(rules, venv)
    assert result.target.kind == "venv"
    out = []
    outcome = fix(rules, venv, fix_cache, result=result, out=out)
    text = "".join(out)
    assert outcome.status == "applied", text
    plan = outcome.plan
    assert plan.families == ["blas", "driver_api", "sparse"]
    assert plan.passthrough == ["nvrtc"]
    assert [r["family"] for r in plan.not_linked] == ["fft"]  # ZLUDA's cuFFT is stubs only
    left = {r["binary"].rsplit("/", 1)[-1] for r in plan.left_alone}
    assert left == {"curand.cp312-win_amd64.pyd", "cusolver.cp312-win_amd64.pyd", "cutensor.cp312-win_amd64.pyd",
                    "_cusolver.cp312-win_amd64.pyd"}
    env = {e.name: e.values[0][0][1] for e in plan.environment if e.op == "set"}
    assert env["CUPY_COMPILE_WITH_PTX"] == "1" and env["CUPY_ACCELERATORS"] == ""
    assert [p["path"] for p in plan.programs] == ["Scripts/python.exe"]
    cmd = (venv / ".cuda4amd" / "python.cmd").read_text()
    assert 'set "CUPY_COMPILE_WITH_PTX=1"' in cmd
    assert '"%CUDA4AMD_ROOT%\\.cuda4amd\\zluda\\zluda.exe" -- "%CUDA4AMD_ROOT%\\Scripts\\python.exe" %*' in cmd
    checks = [c for c in outcome.verification.checks if c["what"] == "dependency"]
    assert len(checks) >= 8 and all(c["ok"] for c in checks)
    assert all(p.startswith("venv/.cuda4amd") for p in changed(base, snapshot(tmp_path, skip=(fix_cache,))))
    assert load_journal(venv).state == "verified"
    assert undo_target(venv).complete
    assert snapshot(tmp_path, skip=(fix_cache,)) == base
    assert snapshot(cupy_source) == source_before  # the wheel fix_cache is read, never written


def test_cupy_venv_place(rules, tmp_path, venv, fix_cache):
    base = snapshot(tmp_path, skip=(fix_cache,))
    outcome = fix(rules, venv, fix_cache, mode="place")
    assert outcome.status == "applied", outcome.message
    placed = {a.path for a in outcome.plan.actions}
    assert "Lib/site-packages/cupy_backends/cuda/libs/cublas64_12.dll" in placed
    assert "Lib/site-packages/cupy_backends/cuda/libs/cusparse64_12.dll" in placed
    assert "Lib/site-packages/cupy_backends/cuda/api/nvcuda.dll" in placed
    assert not any("cufft" in p or "curand" in p for p in placed)
    assert outcome.verification.ok
    assert undo_target(venv).complete
    assert snapshot(tmp_path, skip=(fix_cache,)) == base


@pytest.mark.parametrize("mode, how", [
    ("launcher", "exception"), ("launcher", "disk-full"), ("launcher", "locked"),
    ("place", "crash"), ("place", "read-only"),
])
def test_cupy_fault_at_every_step(rules, tmp_path, venv, fix_cache, mode, how):
    _fault_loop(rules, venv, fix_cache, tmp_path, how=how, mode=mode, host=WIN_HOST, zluda=WIN_ZIP,
                resume=how == "crash")
