"""The Markdown report: GitHub-flavoured structure, escaping, and the size limit.

Rendered to HTML with markdown-it-py (installed with rich) to check what a
reader sees: the summary table, one <details> per CUDA binary, the Mermaid
block. The acceptance test does the same on a real package (cupy).
"""
from __future__ import annotations

import copy
import json
import re

import pytest
from markdown_it import MarkdownIt
from test_goldens import GOLDENS

from cuda4amd.report.grouping import reason_groups
from cuda4amd.report.markdown import BUDGET, GITHUB_LIMIT, LEVELS, code, render, text


def html_of(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def golden(case: str) -> dict:
    return json.loads((GOLDENS / case / "scan.json").read_text(encoding="utf-8"))


def mermaid_blocks(markdown: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)\n```", markdown, re.S)


def check_mermaid(block: str) -> tuple[set[str], list[tuple[str, str]]]:
    """Every edge joins declared nodes; every class used is defined. Returns (nodes, edges)."""
    lines = block.splitlines()
    assert lines[0] == "flowchart LR"
    nodes = {m.group(1) for m in re.finditer(r"^(?:  |    )([bl]\d+)[\[(]", block, re.M)}
    edges = re.findall(r"^  ([bl]\d+) (?:-->|-\.->|-\. delay \.->) ([bl]\d+)$", block, re.M)
    subgraphs = re.findall(r'^  subgraph p\d+\["[^"]*"\]$', block, re.M)
    assert block.count("\n  end") == len(subgraphs)
    body = [line for line in lines[1:] if not line.startswith("  classDef")]
    other = [line for line in body if not re.match(r"^(?:  |    )[bl]\d+[\[(]|^  [bl]\d+ -|^  subgraph |^  end$", line)]
    assert not other, f"every line is a node, an edge or a package box: {other}"
    assert len(body) == len(nodes) + len(edges) + 2 * len(subgraphs), "every line is a node, an edge or a package box"
    assert all(s in nodes and t in nodes for s, t in edges)
    used = set(re.findall(r":::(\w+)", block))
    defined = set(re.findall(r"^  classDef (\w+) ", block, re.M))
    assert used == defined
    for label in re.findall(r'\["(.*?)"\]|\(\["(.*?)"\]\)', block):
        assert '"' not in "".join(label)
    return nodes, edges


def check_report(markdown: str, document: dict) -> str:
    html = html_of(markdown)
    cuda = [b for b in document["binaries"] if b["verdict"] != "no-cuda"]
    assert markdown.startswith(f"# cuda4amd: {document['verdict'].upper()} — ")
    assert "<th>binary</th>" in html and "<th>verdict</th>" in html and "<th>deciding reason</th>" in html
    assert html.count("<details>") == html.count("</details>")
    assert html.count('<code class="language-mermaid">') == (1 if cuda else 0)
    for block in mermaid_blocks(markdown):
        check_mermaid(block)
    return html


@pytest.mark.parametrize("case", ["demo-tool", "pe", "elf", "byname", "kernels", "demo-tool-rx6700xt"])
def test_golden_reports_render_on_github(case):
    document = golden(case)
    markdown = (GOLDENS / case / "scan.md").read_text(encoding="utf-8")
    html = check_report(markdown, document)
    cuda = [b for b in document["binaries"] if b["verdict"] != "no-cuda"]
    # a collapsible section per CUDA-using binary, its path in the summary line
    assert html.count("<details>") == len(cuda)
    for binary in cuda:
        assert f"<code>{binary['path']}</code>" in html
    # the summary table has a row per deciding reason (one binary, or the binaries it decides), worst first
    rows = re.findall(r"<tr>\n<td>(.*?)</td>\n<td><strong>(\w[\w-]*)</strong></td>", html)
    groups = reason_groups(cuda)
    assert [r[1] for r in rows if r[1] in ("blocked", "degraded", "ready")][-len(groups):] == [g[0] for g in groups]
    singles = [f"<code>{members[0]['path']}</code>" for _, _, members in groups if len(members) == 1]
    assert [r[0] for r in rows if r[0].startswith("<code>")][-len(singles):] == singles


def test_details_carry_routes_symbols_and_the_host_block():
    markdown = (GOLDENS / "pe" / "scan.md").read_text(encoding="utf-8")
    assert "Missing from ZLUDA in `cublas64_12.dll` (2): `cublasSgemm`, `cublasXtCreate`" in markdown
    assert "Stubs (return NOT_SUPPORTED) in `cublas64_12.dll` (2): `cublasDgemm_v2`, `cublasSaxpy_v2`" in markdown
    assert "| `cusolver64_11.dll` | delay | solver | **blocked** |" in markdown
    assert re.search(r"b5 -\. delay \.-> l\d+\n", markdown)  # delay loads are dashed in the diagram, and say so
    host = (GOLDENS / "demo-tool-rx6700xt" / "scan.md").read_text(encoding="utf-8")
    assert "| GPU | **AMD Radeon RX 6700 XT** · `gfx1031` · HIP device 0 |" in host
    assert "| rocBLAS kernels | `gfx1031`: **none** |" in host
    assert "| ZLUDA found | `D:\\ZLUDA` (PATH): v6-preview.69, v6, v7-preview.9 |" in host
    assert "## ZLUDA\n\nJudged against ZLUDA **v6-preview.69**" in host
    kernels = (GOLDENS / "kernels" / "scan.md").read_text(encoding="utf-8")
    assert "Kernels: carries PTX, which ZLUDA compiles for the AMD GPU. PTX: sm_75 (ISA 9.0); SASS: sm_75." in kernels


def test_text_and_code_escape_what_would_break_the_page():
    assert text("<home>/a_b/__init__ *x* [y](z) a|b #1") == "&lt;home&gt;/a_b/\\_\\_init\\_\\_ \\*x\\* \\[y\\](z) a\\|b \\#1"
    assert code("a|b") == "`a\\|b`"
    assert code("has `tick`") == "`` has `tick` ``"
    document = golden("demo-tool")
    odd = document["binaries"][1]
    odd["path"] = "we|ird/<user>/`x`_y_.dll"
    odd["reasons"] = ["needs <b>bold</b> | pipes & __dunder__"]
    markdown = render(document)
    html = html_of(markdown)
    # every row of every table has as many cells as its header: no pipe broke a row
    for table in re.findall(r"<table>(.*?)</table>", html, re.S):
        columns = table.count("<th>")
        for row in re.findall(r"<tr>(.*?)</tr>", table, re.S):
            assert row.count("<td>") in (0, columns)
    assert "we|ird/&lt;user&gt;/`x`_y_.dll" in html
    assert "needs &lt;b&gt;bold&lt;/b&gt; | pipes &amp; __dunder__" in html
    assert "<b>bold</b>" not in html


def big_document(copies: int) -> dict:
    """The pe fixture report repeated `copies` times (as many packages), plus unreadable files: a huge venv."""
    base = golden("pe")
    big = copy.deepcopy(base)
    big["binaries"], big["packages"] = [], []
    for i in range(copies):
        paths = []
        for binary in base["binaries"]:
            b = copy.deepcopy(binary)
            b["path"] = f"site-packages/pkg{i:03d}/{binary['path']}"
            b["distribution"] = f"pkg{i:03d}"
            for dep in b["dependencies"]:
                if dep["resolved"] and not dep["resolved"].startswith("/"):
                    dep["resolved"] = f"site-packages/pkg{i:03d}/{dep['resolved']}"
                dep["symbols"] = {k: v * 40 for k, v in dep["symbols"].items()}
            big["binaries"].append(b)
            paths.append(b["path"])
        big["packages"].append({"name": f"pkg{i:03d}", "version": "1.0", "verdict": "partial", "framework": None,
                                "reasons": [base["binaries"][1]["reasons"][0]], "advice": ["do the thing"], "binaries": paths})
    big["errors"] = [{"path": f"broken/{i}.dll", "stage": "read", "message": "truncated " * 10} for i in range(400)]
    big["summary"]["binaries"] = len(big["binaries"])
    return big


@pytest.mark.parametrize("copies", [1, 20, 300])
def test_large_targets_stay_under_githubs_limit(copies):
    document = big_document(copies)
    markdown = render(document)
    assert len(markdown) <= BUDGET < GITHUB_LIMIT
    html = check_report(markdown, document)
    nodes, _ = check_mermaid(mermaid_blocks(markdown)[0])
    assert len(nodes) <= LEVELS[0].graph_nodes
    if copies == 300:
        # cut with counts, and said so
        assert "more binaries left out to keep this report under GitHub's 65,536-character limit" in markdown
        assert re.search(r"… and \d+ more \(\d+ partial\)", markdown)  # packages table
        # binaries with the same deciding reason are one row, their names said once
        assert "| 600 binaries of 300 packages: app_ready.exe ×300, runtime_user.exe ×300 | **ready** | — |" in markdown  # noqa: RUF001 - the report counts with U+00D7
        assert "- **pkg000, pkg001, pkg002 and 297 more packages**: do the thing" in markdown
        assert "Ready (600): " in markdown
        assert html.count("<details>") > 10


def test_lists_are_cut_with_counts_before_sections_are_dropped():
    document = big_document(3)
    markdown = render(document)
    assert len(markdown) <= BUDGET
    assert re.search(r"\(80\): `cublasSgemm`, .* … and \d+ more", markdown)
    assert "left out to keep this report" not in markdown


def test_even_a_tiny_budget_is_kept_and_leaves_valid_markdown():
    document = big_document(5)
    for budget in (20_000, 5_000, 1_500):
        markdown = render(document, budget=budget)
        assert len(markdown) <= budget
        assert markdown.count("```") % 2 == 0
        assert markdown.count("<details>") == markdown.count("</details>")


def test_no_cuda_target():
    document = golden("corrupt")
    markdown = render(document)
    assert "No binaries were found." in markdown and "```mermaid" not in markdown
    assert "## Files that could not be read" in markdown and "| `truncated.so` | read |" in markdown


def test_markdown_is_a_registered_format_with_the_md_extension():
    from cuda4amd.report import FORMATS, format_for_path
    from cuda4amd.report import render as render_any

    assert "markdown" in FORMATS and format_for_path("Report.MD") == "markdown"
    assert render_any("markdown", golden("elf"), verbose=True, width=80) == (GOLDENS / "elf" / "scan.md").read_text(encoding="utf-8")


