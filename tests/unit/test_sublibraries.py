"""Issue 30 items 9 and 7b: sub-libraries only a replaced front-end loads, and the host library ZLUDA's
replacement needs (fixtures/sublibs/, built by fixtures/sublibs/build.sh with mingw-w64 and gcc)."""
from __future__ import annotations

import pytest
from conftest import FIXTURES, by_path

from cuda4amd.host import HipDevice, HipRuntimeResult, detect_host
from cuda4amd.host.testing import build_tree, windows_probes
from cuda4amd.rules import RulesError, load_rules

SUBLIBS = FIXTURES / "sublibs"
NOT_LOADED = ("cuDNN 9 sub-library loaded only by NVIDIA's {front} (or another sub-library), which ZLUDA's "
              "{front} replaces: it is not loaded under ZLUDA")
ROCM = "C:\\Program Files\\AMD\\ROCm"


def test_sub_libraries_only_the_replaced_front_end_loads_are_not_blockers(scan):
    report = scan(SUBLIBS / "front")
    binaries = by_path(report)
    for name in ("cudnn_graph64_9.dll", "cudnn_ops64_9.dll"):
        assert binaries[name]["verdict"] == "ready"
        assert binaries[name]["reasons"] == [NOT_LOADED.format(front="cudnn64_9.dll")]
        # what the release does with the file's own name is still said as it is
        assert binaries[name]["nvidia_library"]["route"] == "blocked"
    assert binaries["app.exe"]["verdict"] == "ready"
    assert report["verdict"] == "ready"


def test_the_same_on_linux(scan):
    report = scan(SUBLIBS / "linux")
    binaries = by_path(report)
    for name in ("libcudnn_graph.so.9", "libcudnn_ops.so.9"):
        assert binaries[name]["reasons"] == [NOT_LOADED.format(front="libcudnn.so.9")]
    assert report["verdict"] == "ready"


def test_a_sub_library_an_application_uses_directly_is_judged_with_what_it_loads(scan):
    """direct.exe imports cudnn_graph64_9.dll: it loads, and so does cudnn_ops64_9.dll, which it imports
    (the fixed point: an importer that loads keeps its imports judged)."""
    binaries = by_path(scan(SUBLIBS / "direct"))
    assert binaries["cudnn_graph64_9.dll"]["verdict"] == "blocked"
    assert binaries["cudnn_ops64_9.dll"]["verdict"] == "blocked"
    assert binaries["direct.exe"]["verdict"] == "blocked"
    assert "not loaded under ZLUDA" not in " ".join(binaries["cudnn_ops64_9.dll"]["reasons"])


def recorded_host(tmp_path, miopen: bool) -> str:
    """A Windows machine with HIP SDK 6.4 (real file names) and an RX 7900 XTX, with or without MIOpen.dll."""
    build_tree(tmp_path / "rocm" / "6.4", FIXTURES / "host" / "sdk" / "win-hipsdk-6.4.manifest")
    if miopen:
        (tmp_path / "rocm" / "6.4" / "bin" / "MIOpen.dll").write_bytes(b"MZ")
    windir = tmp_path / "windows"
    (windir / "System32").mkdir(parents=True)
    (windir / "System32" / "amdhip64_6.dll").write_bytes(b"MZ")
    hip = HipRuntimeResult(library="amdhip64_6.dll", version="6.2.41512",
                           devices=(HipDevice("AMD Radeon RX 7900 XTX", "gfx1100"),))
    probes = windows_probes(mounts={"C:\\Windows": windir, ROCM: tmp_path / "rocm"},
                            env={"HIP_PATH": ROCM + "\\6.4\\"}, hip=hip)
    path = tmp_path / "host.json"
    path.write_text(detect_host(probes).to_json())
    return str(path)


def test_a_host_without_miopen_is_not_ready_for_cudnn_work(scan, tmp_path):
    """ZLUDA's cuDNN goes to MIOpen: without it every binary of cuDNN work is blocked, the replaced front-end
    and the sub-libraries it stands for included, and the reason says where to get MIOpen."""
    report = scan(SUBLIBS / "front", host=recorded_host(tmp_path, miopen=False))
    binaries = by_path(report)
    assert {b["verdict"] for b in binaries.values()} == {"blocked"}
    reason = binaries["cudnn64_9.dll"]["reasons"][0]
    assert reason.startswith("this host: cuDNN calls go to MIOpen, which this HIP SDK (6.4, Windows) does not "
                             "include: install MIOpen from a HIP SDK build that ships MIOpen.dll")
    assert any(r.startswith("this host: cuDNN calls go to MIOpen") for r in binaries["app.exe"]["reasons"])
    assert report["verdict"] == "blocked"


def test_with_miopen_the_host_serves_cudnn(scan, tmp_path):
    report = scan(SUBLIBS / "front", host=recorded_host(tmp_path, miopen=True))
    assert {b["verdict"] for b in report["binaries"]} == {"ready"}


def test_splits_are_rule_data_and_checked(tmp_path):
    rules = load_rules()
    (split,) = [s for s in rules.splits if s.name == "cuDNN 9" and s.platform == "windows"]
    assert split.front == "cudnn64_9.dll" and split.is_sub("CUDNN_OPS64_9.DLL", "windows")
    assert not split.is_sub("cudnn64_9.dll", "windows")
    runtime = tmp_path / "extra" / "runtime"
    runtime.mkdir(parents=True)
    bad = ("[provenance]\ngenerated_by = 'hand'\nsources = ['test']\n\n[[split]]\nfamily = 'dnn'\nname = 'x'\n"
           "platform = 'windows'\nfront = '{front}'\nsub = ['{sub}']\nsource = 'test'\n")
    (runtime / "sublibraries.toml").write_text(bad.format(front="bin/cudnn64_9.dll", sub="^x\\.dll$"))
    with pytest.raises(RulesError, match="'front' is a file name"):
        load_rules([tmp_path / "extra"])
    (runtime / "sublibraries.toml").write_text(bad.format(front="cudnn64_9.dll", sub="^x(\\.dll$"))
    with pytest.raises(RulesError, match="bad regex"):
        load_rules([tmp_path / "extra"])
    (runtime / "sublibraries.toml").write_text(bad.format(front="cudnn64_9.dll", sub="^acme_sub64_9\\.dll$"))
    assert load_rules([tmp_path / "extra"]).splits[-1].is_sub("acme_sub64_9.dll", "windows")


def test_doctor_names_the_gap_and_where_to_get_miopen(tmp_path):
    from cuda4amd.host import load_host_report
    from cuda4amd.host.gaps import readiness

    ready = readiness(load_host_report(recorded_host(tmp_path, miopen=False)))
    assert "cuDNN calls go to MIOpen" in ready.headline and "install MIOpen from" in ready.headline
    assert any(step.startswith("install MIOpen from a HIP SDK build that ships MIOpen.dll")
               and step.endswith("or turn cuDNN off in the app") for step in ready.next_steps)
    assert ready.gaps["dnn"]
