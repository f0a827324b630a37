"""Issue 31, item 1: no code from the working folder in a probe, no probes through a fix that fails
verification, and in Linux place mode the probes load the libcuda.so.1 the fix placed (nvlib/)."""
from __future__ import annotations

import sys

import pytest
from test_fix_apply import fix
from test_fix_support import LINUX_HOST, LINUX_TGZ, fix_cache, linux_app  # noqa: F401 - fix_cache is a fixture

from cuda4amd.evidence.after_fix import probe_names, verify_fixed
from cuda4amd.evidence.runner import probe_environment, run_probe

PLANT = 'open(__file__ + ".ran", "w").close()\nraise SystemExit("planted module ran")\n'


def test_a_planted_module_in_the_working_folder_is_not_imported(tmp_path, monkeypatch):
    for name in ("argparse.py", "json.py", "ctypes.py"):
        (tmp_path / name).write_text(PLANT)
    monkeypatch.chdir(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "PYTHONSTARTUP": str(tmp_path / "json.py")}
    outcome = run_probe("driver_api", drivers=["cuda4amd-no-such-driver.so"], env=env, limit=30)
    assert outcome.status == "unsupported", (outcome.detail, outcome.stderr)
    assert "planted" not in outcome.stderr
    assert not list(tmp_path.glob("*.ran"))


def test_the_probe_environment_keeps_what_loading_needs_and_what_the_fix_set():
    base = {"PATH": "/usr/bin", "PYTHONPATH": "/evil", "LD_PRELOAD": "/evil.so", "SECRET_TOKEN": "x",
            "HIP_VISIBLE_DEVICES": "0"}
    env = dict(base, LD_LIBRARY_PATH="/t/.cuda4amd/zluda", ZLUDA_X="1", PYTHONHOME="/evil")
    kept = probe_environment(env, base)
    assert kept == {"PATH": "/usr/bin", "HIP_VISIBLE_DEVICES": "0", "LD_LIBRARY_PATH": "/t/.cuda4amd/zluda",
                    "ZLUDA_X": "1", "PYTHONUNBUFFERED": "1"}


@pytest.mark.skipif(sys.platform != "linux", reason="runs Linux programs through the fix")
def test_no_probe_runs_through_a_fix_that_fails_verification(rules, tmp_path, fix_cache):
    app = linux_app(tmp_path)
    outcome = fix(rules, app, fix_cache, host=LINUX_HOST, zluda=LINUX_TGZ)
    assert outcome.status == "applied", outcome.message
    lib = app / ".cuda4amd" / "zluda" / "libcuda.so.1"
    lib.write_bytes(lib.read_bytes() + b"x")  # not the file the fix placed: nothing vouches for it
    report = verify_fixed(app, run=True, limit=30)
    assert not report.verification.ok
    assert report.outcomes is None and "verification failed" in (report.skipped or "")


@pytest.mark.skipif(sys.platform != "linux", reason="runs Linux programs through the fix")
def test_linux_place_mode_probes_the_placed_driver(rules, tmp_path, fix_cache):
    app = linux_app(tmp_path)
    outcome = fix(rules, app, fix_cache, host=LINUX_HOST, zluda=LINUX_TGZ, mode="place")
    assert outcome.status == "applied", outcome.message
    names = probe_names(outcome.plan, app)
    assert names["driver_api"][0] == str(app / "nvlib" / "libcuda.so.1")
    report = verify_fixed(app, run=True, limit=30)
    driver = {o.family: o for o in report.outcomes}["driver_api"]
    # the fixture's ZLUDA libcuda.so.1 answers cuInit with 801: reached, and refused safely
    assert driver.status == "unsupported" and "cuInit returned 801" in driver.detail, driver.detail



def test_a_probe_needs_no_site_packages_and_no_pythonpath(tmp_path):
    """The NVIDIA evidence run (tools/evidence_nvidia.sh) has cuda4amd only on PYTHONPATH, which -I drops:
    the probe loads the package from where the parent imported it (-S: not even site-packages here)."""
    import subprocess

    from cuda4amd.evidence.runner import probe_bootstrap

    (tmp_path / "argparse.py").write_text(PLANT)
    done = subprocess.run([sys.executable, "-I", "-S", "-c", probe_bootstrap("driver"), "--driver",
                           "cuda4amd-no-such-driver.so"], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env={"PYTHONPATH": str(tmp_path)})
    assert '"status": "unsupported"' in done.stdout, done.stdout + done.stderr
    assert not list(tmp_path.glob("*.ran"))
