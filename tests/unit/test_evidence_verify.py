"""`cuda4amd verify DIR [--run]` on a fixed Linux app (the fixture ZLUDA release, whose
libcuda answers cuInit with CUDA_ERROR_NOT_SUPPORTED)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_fix_apply import fix
from test_fix_support import LINUX_HOST, LINUX_TGZ, fix_cache, linux_app  # noqa: F401 - fix_cache is a fixture

from cuda4amd.evidence.after_fix import probe_names, verify_fixed

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="runs Linux programs through the fix")


@pytest.fixture
def fixed(rules, tmp_path, fix_cache):
    app = linux_app(tmp_path)
    outcome = fix(rules, app, fix_cache, host=LINUX_HOST, zluda=LINUX_TGZ)
    assert outcome.status == "applied", outcome.message
    return app


def test_probe_names_are_the_names_the_application_loads(fixed):
    from cuda4amd.fix.journal import load_journal

    plan = load_journal(fixed).plan
    names = probe_names(plan, fixed)
    assert names["blas"] == ["libcublas.so.12"] and names["driver_api"] == ["libcuda.so.1"]


def test_verify_run_goes_through_zlud_as_libcuda(fixed):
    report = verify_fixed(fixed, run=True, limit=30)
    assert report.verification.ok
    by = {o.family: o for o in report.outcomes}
    driver = by["driver_api"]
    # the fixture's libcuda.so.1 (ZLUDA's name, in .cuda4amd/zluda) refuses cuInit: a refusal, not loaded
    assert driver.status == "unsupported" and "cuInit returned 801" in driver.detail and not driver.loaded
    assert set(by) == {"driver_api"} | {f for f in report.journal.plan.families if f in by}
    evidence = report.scan["evidence"]
    assert evidence["through"] == "zluda"
    linked = {c["family"] for c in report.verification.checks if c["what"] == "dependency"}
    for fam in linked:
        assert evidence["families"][fam]["level"] == "linked"  # nothing ran further than the link checks
    assert all(level in ("static", "linked") for level in evidence["binaries"].values())
    doc = report.to_dict()
    assert doc["schema"] == "cuda4amd.verify/1" and doc["probes"]["outcomes"][0]["family"] == "driver_api"


def test_verify_cli_writes_the_report_and_exits_0(fixed, tmp_path):
    out = tmp_path / "v.json"
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_AUDIT")}
    done = subprocess.run([sys.executable, "-m", "cuda4amd", "verify", str(fixed), "--run", "--timeout", "30",
                           "-o", str(out)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "probe driver_api" in done.stdout and "verified:" in done.stdout
    data = json.loads(out.read_text())
    assert data["scan"]["evidence"]["through"] == "zluda"
    md = tmp_path / "v.md"
    done = subprocess.run([sys.executable, "-m", "cuda4amd", "verify", str(fixed), "-o", str(md)],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "## Evidence" in md.read_text()


def test_verify_refuses_an_unfixed_folder(tmp_path):
    done = subprocess.run([sys.executable, "-m", "cuda4amd", "verify", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "no cuda4amd fix" in done.stderr


def test_a_changed_zluda_file_fails_verification(fixed):
    lib = fixed / ".cuda4amd" / "zluda" / "libcublas.so"
    lib.write_bytes(lib.read_bytes() + b"x")  # what an antivirus 'repair' or a partial copy leaves
    report = verify_fixed(fixed, run=False)
    assert not report.verification.ok
    assert report.scan["evidence"]["families"]["blas"]["level"] == "static"


def test_smoke_after_fix_prints_each_probe(fixed):
    from cuda4amd.evidence.after_fix import smoke_after_fix
    from cuda4amd.fix.journal import load_journal

    lines: list[str] = []
    outcomes = smoke_after_fix(load_journal(fixed).plan, echo=lines.append, limit=30)
    assert outcomes is not None and outcomes[0].family == "driver_api"
    assert any("probe driver_api" in line and "unsupported" in line for line in lines)


def test_doctor_run_and_the_fixed_target(fixed):
    from click.testing import CliRunner

    from cuda4amd.cli.doctor import doctor
    from cuda4amd.evidence.runner import STATUSES

    result = CliRunner().invoke(doctor, ["--run", "--timeout", "20", "--format", "json", "--target", str(fixed)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # the probe lines go to stderr, after the report
    outcomes = doc["probes"]["outcomes"]
    assert outcomes[0]["family"] == "driver_api" and all(o["status"] in STATUSES for o in outcomes)
    texts = [c["text"] for c in doc["readiness"]["checks"]]
    assert any("ZLUDA files the fix copied" in t and "unchanged" in t for t in texts)


def test_a_windows_fix_is_verified_here_but_probed_there(rules, tmp_path, fix_cache):
    from test_fix_support import demo_copy

    tool = demo_copy(tmp_path)
    assert fix(rules, tool, fix_cache).status == "applied"  # the Windows fixture release, recorded Windows host
    report = verify_fixed(tool, run=True)
    assert report.verification.ok and report.outcomes is None
    assert report.skipped == "the fix is for Windows; the probes run there"
    assert report.to_dict()["probes"] is None and report.ok


def test_verify_waits_for_no_one_and_reads_no_journal_while_the_target_is_in_use(fixed):
    from click.testing import CliRunner

    from cuda4amd.cli.verify import verify
    from cuda4amd.fix.lock import LockError, target_lock

    with target_lock(fixed, "undo"):
        with pytest.raises(LockError, match="in use by"):
            verify_fixed(fixed, run=False)
        result = CliRunner().invoke(verify, [str(fixed)])
    assert result.exit_code == 2 and "in use by" in result.output
    assert verify_fixed(fixed, run=False).verification.ok  # released: verified as before


def test_verify_rescans_with_the_rules_the_fix_was_made_with(tmp_path, fix_cache):
    """`scan --rules DIR --fix`, then `verify`: its re-scan judges as the fix's scan did, with the
    rules folder the plan recorded, or with the options given to verify instead."""
    from test_fix_options import VENDOR_FAMILY, chain_app, rules_folder
    from test_fix_options import fix as fix_cli

    from cuda4amd.scan.pipeline import ScanOptions

    tool = chain_app(tmp_path)
    custom = rules_folder(tmp_path, {"families.toml": VENDOR_FAMILY})
    assert fix_cli(tool, "--rules", custom).exit_code == 0

    def vendor_family(report) -> set:
        return {d.get("family") for b in report.scan["binaries"] if b["path"] == "chain_app.exe"
                for d in b["dependencies"] if d["name"] == "missing_vendor.dll"}

    ruled = verify_fixed(tool, run=False, options=ScanOptions(target=str(tool), rule_dirs=(custom,)))
    assert ruled.verification.ok and vendor_family(ruled) == {"vendor"}
    from cuda4amd.fix.journal import load_journal

    assert load_journal(tool).plan.scan["rule_dirs"] == [str(custom.resolve())]  # recorded, under the journal's MAC
    assert vendor_family(verify_fixed(tool, run=False)) == {"vendor"}  # the recorded rules, not passed again
    shipped_only = verify_fixed(tool, run=False, options=ScanOptions(target=str(tool)))
    assert vendor_family(shipped_only) != {"vendor"}  # options given replace the recorded ones
    out = tmp_path / "verify.json"
    done = subprocess.run([sys.executable, "-m", "cuda4amd", "verify", str(tool),
                           "-o", str(out), "--no-redact"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    scan = json.loads(out.read_text(encoding="utf-8"))["scan"]
    assert {d.get("family") for b in scan["binaries"] if b["path"] == "chain_app.exe"
            for d in b["dependencies"] if d["name"] == "missing_vendor.dll"} == {"vendor"}
