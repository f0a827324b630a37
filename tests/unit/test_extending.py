"""The extension points of docs/design.md ("Where to add ..."), each done once.

A rule kind's data in an extra rules folder (a family, a GPU profile, a
framework) is done end to end in test_fix_options.py; here: a ZLUDA release
added by an extra rules folder, an output format registered in one place, and
a host probe written against the probe doubles.
"""
from __future__ import annotations

import json
import sys
import types

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from cuda4amd import report
from cuda4amd.cli import main
from cuda4amd.host import ProbeRecord
from cuda4amd.host.testing import windows_probes
from cuda4amd.rules import RulesError, load_rules, shipped_rules_dir

DEMO = FIXTURES / "demo" / "Tool"


def test_a_zluda_release_from_an_extra_rules_folder(tmp_path):
    """A release table is one file, zluda/<tag>.toml; an extra folder's is judged with --zluda-release."""
    shipped = shipped_rules_dir() / "zluda" / "v6-preview.69.toml"
    (tmp_path / "zluda").mkdir()
    text = shipped.read_text(encoding="utf-8").replace("tag = 'v6-preview.69'", "tag = 'v6-site.1'", 1)
    (tmp_path / "zluda" / "v6-site.1.toml").write_text(text, encoding="utf-8")
    assert "v6-site.1" in load_rules([tmp_path]).release_tags
    done = CliRunner().invoke(main, ["scan", str(DEMO), "--host", "none", "--format", "json",
                                     "--rules", str(tmp_path), "--zluda-release", "v6-site.1"])
    assert done.exit_code == 3, done.output
    document = json.loads(done.output)
    assert document["zluda"]["release"] == "v6-site.1"
    shipped_run = CliRunner().invoke(main, ["scan", str(DEMO), "--host", "none", "--format", "json"])
    assert [b["verdict"] for b in document["binaries"]] == [b["verdict"] for b in json.loads(shipped_run.output)["binaries"]]


def test_an_output_format_is_one_module_and_one_entry(tmp_path, monkeypatch):
    """A format is a module of cuda4amd.report with render(document, **options) -> str, named in
    report.FORMATS (and in report.EXTENSIONS for the file extension -o picks it by)."""
    module = types.ModuleType("cuda4amd.report.lines_format")

    def render(document: dict, verbose: bool = False) -> str:
        return "".join(f"{b['path']}\t{b['verdict']}\n" for b in document["binaries"])

    module.render = render  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(report.FORMATS, "lines", "lines_format")
    monkeypatch.setitem(report.EXTENSIONS, ".lines", "lines")
    out = tmp_path / "scan.lines"
    done = CliRunner().invoke(main, ["scan", str(DEMO), "--host", "none", "-o", str(out)])
    assert done.exit_code == 3, done.output
    assert out.read_text(encoding="utf-8").splitlines() == [
        "plugins/denoise.dll\tready", "plugins/trt_export.dll\tblocked", "render.dll\tdegraded", "tool.exe\tdegraded"]


def test_a_host_probe_reads_the_machine_through_probes(tmp_path):
    """A host probe is a function of `Probes` (environment, file system, commands, HIP runtime) that
    returns its findings and a ProbeRecord; the doubles in cuda4amd.host.testing make it testable
    without the machine. This one asks whether the AMD display driver's DLL is in System32."""

    def adrenalin_probe(probes) -> tuple[bool, ProbeRecord]:
        system32 = (probes.env.get("SystemRoot") or "C:\\Windows") + "\\System32"
        found = probes.fs.is_file(system32 + "\\amdhip64_6.dll")
        return found, ProbeRecord("adrenalin", "ok" if found else "not-found", system32)

    system32 = tmp_path / "System32"
    system32.mkdir()
    (system32 / "amdhip64_6.dll").write_bytes(b"MZ")
    with_driver = windows_probes(mounts={"C:\\Windows\\System32": system32}, env={"SystemRoot": "C:\\Windows"})
    without = windows_probes(env={"SystemRoot": "C:\\Windows"})
    assert adrenalin_probe(with_driver) == (True, ProbeRecord("adrenalin", "ok", "C:\\Windows\\System32"))
    assert adrenalin_probe(without)[0] is False


def test_ptx_facts_from_an_extra_rules_folder(tmp_path):
    """kernels/*.toml of every rules folder reach RuleSet.ptx: a later folder's row for a tag wins;
    a broken one is the user's error at load time."""
    shipped = load_rules()
    assert shipped.ptx.get("v6-preview.69").debug_target is False
    (tmp_path / "kernels").mkdir()
    text = (shipped_rules_dir() / "kernels" / "zluda-ptx.toml").read_text(encoding="utf-8")
    row = text[text.index("[[release]]\ntag = 'v6-preview.69'"):]
    row = row[:row.index("\n[[release]]", 1)].replace("debug_target = false", "debug_target = true", 1)
    head = text[:text.index("[[release]]")]
    (tmp_path / "kernels" / "site.toml").write_text(head + row, encoding="utf-8")
    extended = load_rules([tmp_path])
    assert extended.ptx.get("v6-preview.69").debug_target is True
    assert extended.ptx.get("v6").debug_target is True  # the shipped rows stay
    (tmp_path / "kernels" / "site.toml").write_text(head + row.replace("debug_target = true", "debug_target = 1"),
                                                    encoding="utf-8")
    with pytest.raises(RulesError, match="debug_target"):
        load_rules([tmp_path])
