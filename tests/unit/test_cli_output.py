"""Where reports go and what the terminal gets: -o, -, doctor's formats, diff --exit-code, errors."""
from __future__ import annotations

import copy
import json

from click.testing import CliRunner
from conftest import FIXTURES
from test_goldens import GOLDENS

from cuda4amd.cli import main
from cuda4amd.report.diff import compare, render_text, verdicts_changed

DEMO = FIXTURES / "demo" / "Tool"
SAVED = GOLDENS / "demo-tool" / "scan.json"
SAVED_HOST = GOLDENS / "demo-tool-rx6700xt" / "scan.json"


def run(*args):
    return CliRunner(env={"COLUMNS": "160"}).invoke(main, list(map(str, args)))


def test_output_file_gets_the_report_and_the_terminal_the_summary(tmp_path):
    result = run("scan", DEMO, "-o", tmp_path / "scan.md")
    lines = result.output.splitlines()
    assert result.exit_code == 3
    assert lines[0].startswith("PARTIAL") and lines[-1] == f"report written to {tmp_path / 'scan.md'}"
    assert len(lines) == 3 and "trt_export" not in result.output  # verdict, counts, where: no table
    assert (tmp_path / "scan.md").read_text().startswith("# cuda4amd: PARTIAL")
    quiet = run("scan", DEMO, "-o", tmp_path / "scan.json", "-q")
    assert len(quiet.output.splitlines()) == 1


def test_dash_is_stdout(tmp_path):
    result = run("scan", DEMO, "-o", "-", "--format", "json", "--host", "none")
    assert json.loads(result.output)["verdict"] == "partial"
    assert not (tmp_path / "-").exists()
    assert run("scan", DEMO, "-o", "-").output.startswith("PARTIAL")  # console by default


def test_unknown_extensions_are_usage_errors(tmp_path):
    for args in (("scan", DEMO, "-o", tmp_path / "x.yaml"), ("doctor", "-o", tmp_path / "host.html"),
                 ("diff", SAVED, SAVED, "-o", tmp_path / "d.toml"), ("report", SAVED, "-o", tmp_path / "r.pdf")):
        result = run(*args)
        assert result.exit_code == 2 and "cannot tell the format" in result.output, args


def test_doctor_markdown(tmp_path):
    result = run("doctor", "--format", "markdown")
    assert result.exit_code == 0 and result.output.startswith("# cuda4amd doctor: ")
    assert "## Host" in result.output and "| component | found |" in result.output
    written = run("doctor", "-o", tmp_path / "host.md")
    assert written.exit_code == 0
    assert (tmp_path / "host.md").read_text() == result.output
    assert run("doctor", "-q").output.count("\n") == 1


def test_diff_exit_code_as_git_diff():
    assert run("diff", SAVED, SAVED, "--exit-code").exit_code == 0
    assert run("diff", SAVED, SAVED_HOST, "--exit-code").exit_code == 1  # partial → blocked
    assert run("diff", SAVED, SAVED_HOST).exit_code == 0  # without the flag the differences are the answer


def _with_moved_functions(document: dict) -> dict:
    """`document` with its stub function of each CUDA dependency now implemented, in several binaries."""
    after = copy.deepcopy(document)
    for binary in after["binaries"]:
        for dep in binary["dependencies"]:
            symbols = dep["symbols"]
            if symbols.get("stub"):
                symbols["implemented"] = sorted(symbols.get("implemented", []) + symbols.pop("stub"))
    return after


def test_diff_says_each_change_once_and_collapses_repeats():
    before = json.loads(SAVED.read_text())
    # two near-identical DLLs that change the same way
    twin = copy.deepcopy(next(b for b in before["binaries"] if b["path"] == "render.dll"))
    twin["path"] = "render2.dll"
    before["binaries"].append(twin)
    after = _with_moved_functions(before)
    differences = compare(before, after)
    text = render_text(differences)
    assert "functions stub → implemented: 1 (cublasDgemm_v2)" in text
    assert "implemented functions" not in text and "stub functions" not in text  # a move, not +1 and -1
    assert "2 binaries (render.dll, render2.dll)" in text
    assert text.count("stub → implemented") == 1
    assert not verdicts_changed(compare(before, before))


def test_release_tags_in_help_and_no_install_path_in_errors():
    from cuda4amd.cli.scan import shipped_release_tags
    from cuda4amd.rules.ruleset import load_rules

    tags = shipped_release_tags()
    assert "v6" in tags and "releases" not in tags
    assert tags == sorted(load_rules().release_tags)  # the folder listing is the loader's list
    help_text = " ".join(run("scan", "--help").output.split())
    assert all(tag in help_text for tag in tags)
    result = run("scan", FIXTURES / "pe", "--zluda-release", "v0")
    assert result.exit_code == 2 and "unknown ZLUDA release 'v0'" in result.output
    import cuda4amd

    assert str(cuda4amd.__file__).rsplit("/", 2)[0] not in result.output


def test_host_hint_for_a_raw_probe_capture():
    capture = next((FIXTURES / "host" / "rocminfo").iterdir())
    result = run("scan", DEMO, "--host", capture)
    assert result.exit_code == 2
    assert "fixtures/zluda/hosts/" in result.output and "fixtures/host/" in result.output


def test_forward_slash_windows_path_gets_the_hint():
    result = run("scan", "C:/Apps/Tool")
    assert result.exit_code == 2 and "a Windows path" in result.output


def test_schema_is_shipped_and_printed():
    result = run("schema", "scan")
    schema = json.loads(result.output)
    from cuda4amd.report.document import SCHEMA

    assert schema["$id"] == "urn:cuda4amd:report-schema:" + SCHEMA.removeprefix("cuda4amd.")
    assert run("schema", "nope").exit_code == 2


def test_dry_run_on_another_platform_shows_the_plan(tmp_path):
    host = FIXTURES / "zluda" / "hosts" / "linux-rx7900xtx-rocm641.json"
    result = run("scan", DEMO, "--fix", "--dry-run", "--host", host)
    assert result.exit_code == 0, result.output
    assert "cuda4amd fix plan:" in result.output
    assert "warning: the host is Linux but the application is Windows" in result.output
    assert "nothing was written" in result.output
    assert not (DEMO / ".cuda4amd").exists()


def test_verbose_diff_lists_every_name_and_verbose_doctor_every_probe(tmp_path):
    before = json.loads(SAVED.read_text())
    after = copy.deepcopy(before)
    render = next(b for b in after["binaries"] if b["path"] == "render.dll")
    dep = next(d for d in render["dependencies"] if d["name"] == "cublas64_12.dll")
    dep["symbols"]["missing"] = [f"cublasFunction{i:02}" for i in range(15)]
    (tmp_path / "a.json").write_text(json.dumps(before))
    (tmp_path / "b.json").write_text(json.dumps(after))
    short = run("diff", tmp_path / "a.json", tmp_path / "b.json").output
    full = run("diff", tmp_path / "a.json", tmp_path / "b.json", "-v").output
    assert "… and 5 more" in short and "cublasFunction14" not in short
    assert "cublasFunction14" in full and "… and" not in full
    probes = run("doctor", "-v").output
    assert "probes: " in probes and len(probes.splitlines()) > len(run("doctor").output.splitlines())


def test_toml_reads_back_as_the_json_report_for_every_golden():
    from cuda4amd.report.diff import load_report

    for case in sorted(p.name for p in GOLDENS.iterdir() if (p / "scan.toml").is_file()):
        assert load_report(GOLDENS / case / "scan.toml") == load_report(GOLDENS / case / "scan.json"), case
