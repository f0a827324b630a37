"""The real-wheel (acceptance) tests of tests/unit/test_markdown.py: CUDA wheels from PyPI, downloaded on demand."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO
from test_goldens import strict_validator
from test_markdown import check_mermaid, check_report, mermaid_blocks
from wheelcache import Unavailable, unpacked

from cuda4amd.report.markdown import BUDGET, GITHUB_LIMIT, LEVELS


@pytest.mark.acceptance
def test_cupy_report_reads_well_on_github(tmp_path):
    """A real package: cupy-cuda12x 14.2.0 scanned as an unpacked wheel, through the CLI."""
    from click.testing import CliRunner

    from cuda4amd.cli import main
    from cuda4amd.report.diff import compare, load_report

    try:
        tree = unpacked("cupy-cuda12x==14.2.0")
    except Unavailable as exc:
        pytest.skip(str(exc))
    saved, md = tmp_path / "scan.json", tmp_path / "scan.md"
    for out in (saved, md):
        result = CliRunner().invoke(main, ["scan", str(tree), "--host", "none", "-o", str(out)])
        assert result.exit_code == 3, result.output
    markdown = md.read_text(encoding="utf-8")
    document = load_report(saved)

    # the JSON report is what the schema documents, strictly
    errors = list(strict_validator().iter_errors(json.loads(saved.read_text(encoding="utf-8"))))
    assert not errors, errors[:3]
    # redacted with this machine's real names: no home folder in what would be attached
    for content in (markdown, saved.read_text(encoding="utf-8")):
        assert str(Path.home()) not in content and str(REPO) not in content

    assert len(markdown) <= BUDGET < GITHUB_LIMIT
    html = check_report(markdown, document)
    assert "<th>package</th>" in html and "cupy-cuda12x 14.2.0" in html
    assert html.count("<details>") == 13 + 2  # every CUDA-using binary of cupy; the distributions; the command
    assert "<summary>Installed distributions (1)</summary>" in html and "<summary>Command line</summary>" in html
    assert "<code>cupy_backends/cuda/libs/cusolver.cp312-win_amd64.pyd</code>" in html
    assert "Stubs (return NOT_SUPPORTED) in <code>cublas64_12.dll</code> (94): " in html
    assert "CUPY_COMPILE_WITH_PTX=1" in html  # the framework's advice
    (block,) = mermaid_blocks(markdown)
    nodes, _edges = check_mermaid(block)
    assert 'l' in "".join(nodes) and len(nodes) <= LEVELS[0].graph_nodes
    assert "51 binaries without CUDA" in markdown

    # re-render and compare round-trip the saved report
    result = CliRunner().invoke(main, ["report", str(saved), "--format", "markdown"])
    # the same report, but for the command line it was made with (-o scan.json, not -o scan.md)
    assert result.exit_code == 3 and result.output == markdown.replace(f"{md.name}\n```", f"{saved.name}\n```")
    assert compare(document, load_report(saved))["changed"] is False
    result = CliRunner().invoke(main, ["diff", str(saved), str(saved)])
    assert result.exit_code == 0 and "no differences" in result.output
