"""The Markdown report of a real site-packages scan, drawn by Mermaid in headless Chromium.

GitHub draws ```mermaid blocks with Mermaid; a diagram Mermaid cannot parse
shows as an error box in the issue. This test scans a site-packages folder
made of real CUDA wheels from PyPI (cupy, cuBLAS, cuFFT, ctranslate2, …;
tests/wheelcache.py), renders the Markdown to HTML (markdown-it, GitHub's
CommonMark + tables), lets Mermaid parse and draw every diagram in headless
Chromium, and checks that each parsed and became an SVG with a node per
declared node. It also takes a screenshot of the diagram:
``UPDATE_SCREENSHOT=1`` writes it to docs/report-graph.png (checked in).

Needs `chromium` (Debian: ``apt-get install chromium``) and Mermaid from the
npm registry (``npm pack mermaid@MERMAID``, unpacked into the test cache
next to the wheels, never committed); it skips, saying which, when either
cannot be had.
"""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO
from markdown_it import MarkdownIt
from wheelcache import Unavailable, cache_dir, unpacked

from cuda4amd.cli import main

MERMAID = "11.17.2"  # the npm release the test draws with
WHEELS = ("cupy-cuda12x==14.2.0", "nvidia-cublas-cu12==12.9.2.10", "nvidia-cufft-cu12==11.4.1.4",
          "nvidia-cuda-runtime-cu12==12.9.79", "nvidia-curand-cu12==10.3.5.147", "ctranslate2==4.8.5")
SCREENSHOT = REPO / "docs" / "report-graph.png"
CHROMIUM = ("chromium", "chromium-browser", "google-chrome")

pytestmark = pytest.mark.acceptance

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>cuda4amd report</title>
<style>body {{ font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1400px;
margin: 16px; color: #1f2328 }} table {{ border-collapse: collapse }} td, th {{ border: 1px solid #d1d9e0;
padding: 4px 8px }} pre.mermaid {{ background: #fff }}</style>
<script src="mermaid.min.js"></script></head><body>
{body}
<script>
(async () => {{
  const out = document.createElement("pre");
  out.id = "mermaid-result";
  out.hidden = true;  // read by --dump-dom, not shown in the screenshot
  try {{
    mermaid.initialize({{ startOnLoad: false, securityLevel: "strict" }});
    const blocks = [...document.querySelectorAll("pre.mermaid")];
    for (const block of blocks) {{ await mermaid.parse(block.textContent); }}
    await mermaid.run({{ nodes: blocks }});
    out.textContent = "drawn " + blocks.filter(b => b.querySelector("svg")).length + " of " + blocks.length;
  }} catch (error) {{
    out.textContent = "error " + (error && error.message ? error.message : error);
  }}
  document.body.appendChild(out);
}})();
</script></body></html>
"""


def chromium() -> str:
    for name in CHROMIUM:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no chromium to render the page with (Debian: apt-get install chromium)")


def mermaid_js() -> Path:
    """mermaid.min.js of MERMAID, from the npm registry into the test cache (once)."""
    folder = cache_dir().parent / "mermaid" / MERMAID
    script = folder / "mermaid.min.js"
    if script.is_file():
        return script
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("no npm to fetch Mermaid with")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([npm, "pack", f"mermaid@{MERMAID}", "--pack-destination", str(folder)],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"could not fetch mermaid@{MERMAID} from npm: {exc}")
    archive = folder / f"mermaid-{MERMAID}.tgz"
    if done.returncode != 0 or not archive.is_file():
        pytest.skip(f"could not fetch mermaid@{MERMAID} from npm: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    with tarfile.open(archive) as tar:
        member = tar.extractfile("package/dist/mermaid.min.js")
        assert member is not None
        script.write_bytes(member.read())
    archive.unlink()
    return script


def site_packages(tmp_path: Path) -> Path:
    """A site-packages folder of the real wheels (hard links into the cache where the file system allows)."""
    target = tmp_path / "venv" / "Lib" / "site-packages"
    target.mkdir(parents=True)
    for spec in WHEELS:
        try:
            tree = unpacked(spec)
        except Unavailable as exc:
            pytest.skip(str(exc))

        def link(source, dest):
            try:
                os.link(source, dest)
            except OSError:
                shutil.copy2(source, dest)

        shutil.copytree(tree, target, copy_function=link, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
    return target


def page(markdown: str) -> str:
    """The report as GitHub shows it, roughly: CommonMark + tables, ```mermaid blocks left to Mermaid."""
    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    body = re.sub(r'<pre><code class="language-mermaid">(.*?)</code></pre>',
                  lambda m: f'<pre class="mermaid">{m.group(1)}</pre>', body, flags=re.S)
    return PAGE.format(body=body)


def run_chromium(browser: str, url: str, *args: str) -> subprocess.CompletedProcess:
    command = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--virtual-time-budget=30000", *args, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_the_report_of_a_real_site_packages_draws_on_the_page(tmp_path):
    browser = chromium()
    script = mermaid_js()
    target = site_packages(tmp_path)
    report = tmp_path / "scan.md"
    result = CliRunner().invoke(main, ["scan", str(target), "--host", "none", "-o", str(report)])
    assert result.exit_code in (3, 4), result.output
    markdown = report.read_text(encoding="utf-8")
    blocks = re.findall(r"```mermaid\n(.*?)\n```", markdown, re.S)
    assert len(blocks) == 1
    declared = set(re.findall(r"^\s+([bl]\d+)[\[(]", blocks[0], re.M))
    assert 5 <= len(declared) <= 25  # a venv's graph, cut down until it can be read
    assert "subgraph" in blocks[0]  # binaries are framed by their package

    shutil.copy(script, tmp_path / "mermaid.min.js")
    (tmp_path / "page.html").write_text(page(markdown), encoding="utf-8")
    done = run_chromium(browser, (tmp_path / "page.html").as_uri(), "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = re.search(r'<pre id="mermaid-result" hidden="">(.*?)</pre>', done.stdout, re.S)
    assert outcome is not None, "the page script did not finish: " + done.stderr[-2000:]
    assert html.unescape(outcome.group(1)) == "drawn 1 of 1", html.unescape(outcome.group(1))
    svg = done.stdout[done.stdout.index("<svg"):done.stdout.index("</svg>")]
    assert "Syntax error" not in svg
    assert len(re.findall(r'<g class="node ', svg)) == len(declared)  # every node drawn

    # the diagram alone, for docs/report-graph.png
    section = markdown[markdown.index("## Dependency graph"):]
    section = section[: section.index("\n## ", 3)]
    (tmp_path / "graph.html").write_text(page(section), encoding="utf-8")
    shot = tmp_path / "report-graph.png"
    done = run_chromium(browser, (tmp_path / "graph.html").as_uri(), f"--screenshot={shot}", "--window-size=1400,1500")
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    if os.environ.get("UPDATE_SCREENSHOT") == "1":
        SCREENSHOT.write_bytes(data)
    assert SCREENSHOT.is_file(), "run with UPDATE_SCREENSHOT=1 to write docs/report-graph.png"
