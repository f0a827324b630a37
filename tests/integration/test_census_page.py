"""The census page (cuda4amd.census.page) opened in a real headless browser, over a census of fixture wheels and a
few small real CUDA wheels from PyPI run on a LocalCluster of 2 workers.

The census: fixture wheels (one ready, one mixed, a Linux cuBLAS stub, one whose METADATA names it with markup,
one that is no zip at all) and three small real wheels (tests/wheelcache.py: the CUDA runtime and ctranslate2
for Windows, the JAX CUDA plugin for Linux), each for two ZLUDA releases, on a LocalCluster of 2 workers; its
reports must equal the serial census's, byte for byte.

The page is read from the DOM Chromium holds after the page's own script ran (``--dump-dom``, with
``--virtual-time-budget`` so that the dump waits for the page to settle), never from the HTML file: the table
must have one row per artifact and release, each cell the matrix's value (a verdict a mark and a word as well as
a colour), each row linked to its reports, the hostile name text and no element.

Sorting and filtering are checked by driving the page's own controls from a tiny script appended to a copy of
the page: it clicks a column head (``th.click()``, a real click event to the page's listener) or types into the
filter box (sets its value and fires the ``input`` event the page listens to), then Chromium dumps the DOM and
the rows' order, their ``hidden`` attributes and the "N rows shown" count are read from it. Why this way: it
runs the shipped script unchanged through the events a user's click and typing fire, it needs no
``--remote-debugging-port`` session (no port, no websocket client, no timing races: the appended script runs
after the page's at parse time, and the dump comes after both), and the page's Content-Security-Policy allows
inline scripts only, which the appended one is; a filter read from the URL would have been a feature of the page
written only for its test.

``UPDATE_SCREENSHOT=1`` writes the screenshot docs/census-page.png (checked in; README and docs/census.md show it)
of the page without the hostile-name fixture. Needs `chromium` (Debian: ``apt-get install chromium``; .ci/run
installs it where it can) and Dask (the census extra); skips, saying which, when either is missing.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from census_wheels import HOSTILE, fixture_wheels
from conftest import REPO
from wheelcache import LINUX, Unavailable, wheel

# none of these imports Dask (only run_census's cluster does, when it runs)
from cuda4amd.census.outputs import census_matrix, report_links, write_outputs
from cuda4amd.census.page import render_page
from cuda4amd.census.plan import plan
from cuda4amd.census.run import run_census, tasks_of
from cuda4amd.census.task import rules_version
from cuda4amd.evidence.matrix import COLUMNS

pytestmark = pytest.mark.acceptance
distributed = pytest.importorskip("distributed", reason='the census extra: pip install ".[census]"')

REAL = (("nvidia-cuda-runtime-cu12==12.9.79", "win_amd64"), ("ctranslate2==4.8.5", "win_amd64"),
        ("jax-cuda12-plugin==0.7.0", LINUX))
RELEASES = ("v5", "v6")
SCREENSHOT = REPO / "docs" / "census-page.png"
CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
HEADS = [{"zluda": "ZLUDA"}.get(c, c) for c in COLUMNS]


def chromium() -> str:
    for name in CHROMIUM:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no chromium to open the census page with (Debian: apt-get install chromium)")


def run_chromium(url: str, *args: str) -> str:
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--virtual-time-budget=10000", *args, url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Dom(HTMLParser):
    """The census table as the browser holds it: per body row its `hidden` flag, cells' text and classes and the
    links; the heads' text and aria-sort; the count of rows shown; the page's script elements."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.heads: list[str] = []
        self.sort: dict[str, str] = {}
        self.rows: list[dict[str, Any]] = []
        self.scripts = 0
        self.shown = ""
        self._cell: list[str] | None = None
        self._in: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        elif tag == "span" and a.get("id") == "shown":
            self._in = "shown"
        elif tag == "th":
            self._in, self._cell = "th", []
            if a.get("aria-sort"):
                self.sort["?"] = a["aria-sort"] or ""
        elif tag == "tr" and self.heads:
            self.rows.append({"hidden": "hidden" in a, "cells": [], "classes": [], "links": []})
        elif tag == "td":
            self._in, self._cell = "td", []
            self.rows[-1]["classes"].append(a.get("class") or "")
        elif tag == "a" and self._in == "td":
            self.rows[-1]["links"].append(a.get("href"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "th" and self._cell is not None:
            self.heads.append("".join(self._cell).strip())
            if "?" in self.sort:
                self.sort[self.heads[-1]] = self.sort.pop("?")
            self._in, self._cell = None, None
        elif tag == "td" and self._cell is not None:
            self.rows[-1]["cells"].append("".join(self._cell))
            self._in, self._cell = None, None
        elif tag == "span" and self._in == "shown":
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "shown":
            self.shown += data
        elif self._cell is not None:
            self._cell.append(data)

    def column(self, head: str, shown_only: bool = False) -> list[str]:
        return [r["cells"][self.heads.index(head)] for r in self.rows if not (shown_only and r["hidden"])]


def natural(text: str) -> list[Any]:
    """The page's order (localeCompare, numeric, base sensitivity) for these values: digit runs as numbers."""
    return [(0, int(part)) if part.isdigit() else (1, part.casefold()) for part in re.split(r"(\d+)", text) if part]


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("census")
    folder = fixture_wheels(root / "wheels")
    specs = [str(folder)]
    for spec, platform in REAL:
        try:
            specs.append(str(wheel(spec, platform)))
        except Unavailable as exc:
            pytest.skip(str(exc))
    planned = plan(specs)
    tasks = tasks_of(planned.artifacts, RELEASES, rules_version())
    out = root / "out"
    outcome = run_census(tasks, out, workers=2)
    assert (outcome.scanned, outcome.failed) == (len(tasks), len(RELEASES))  # the broken wheel, at each release
    serial = run_census(tasks, root / "serial", serial=True)
    assert serial.scanned == len(tasks)

    def reports(where: Path) -> dict[str, bytes]:
        return {p.relative_to(where).as_posix(): p.read_bytes() for p in (where / "reports").rglob("*.json")}

    assert reports(out) == reports(root / "serial")
    matrix = census_matrix(tasks, out, planned.problems)
    write_outputs(matrix, tasks, out)
    return {"out": out, "tasks": tasks, "matrix": matrix, "artifacts": planned.artifacts}


def _with_script(out: Path, name: str, script: str) -> str:
    """A copy of the page with `script` run after the page's own; its file:// address."""
    page = (out / "index.html").read_text(encoding="utf-8")
    copy = out / name
    copy.write_text(page.replace("</body>", f"<script>{script}</script>\n</body>"), encoding="utf-8")
    return copy.as_uri()


def test_the_table_in_the_browser_is_the_matrix_with_links_to_the_reports(census: dict[str, Any]) -> None:
    out, matrix = census["out"], census["matrix"]
    dom = Dom(run_chromium((out / "index.html").as_uri(), "--dump-dom"))
    assert dom.heads == HEADS
    assert dom.scripts == 1  # the page's own: the hostile name stayed text
    assert len(dom.rows) == len(census["artifacts"]) * len(RELEASES) == len(matrix["rows"])
    assert dom.shown == str(len(dom.rows)) and not any(r["hidden"] for r in dom.rows)
    for row, expected in zip(dom.rows, matrix["rows"], strict=True):
        for column in ("application", "version", "platform", "zluda"):
            assert row["cells"][COLUMNS.index(column)] == (str(expected[column]) or "\N{EM DASH}")
        verdict = row["cells"][COLUMNS.index("verdict")]
        kind = row["classes"][COLUMNS.index("verdict")]
        assert verdict.endswith(" " + expected["verdict"])  # a mark, then the word (not only a colour)
        assert kind.startswith("v-") and (kind[2:] in expected["verdict"] or kind == "v-mixed")
        assert row["links"], row
        for link in row["links"]:  # each link a report of this row's release
            report = json.loads((out / link).read_text(encoding="utf-8"))
            assert report["zluda"]["release"] == expected["zluda"]
    assert sorted({r["cells"][COLUMNS.index("zluda")] for r in dom.rows}) == list(RELEASES)
    assert dom.column("application").count(HOSTILE) == len(RELEASES)
    applications = set(dom.column("application"))
    assert {"appready", "blasmix", "cublas", "broken"} <= applications
    assert {"nvidia-cuda-runtime-cu12", "ctranslate2", "jax-cuda12-plugin"} <= {a.lower() for a in applications}
    broken = [r for r in dom.rows if r["cells"][0] == "broken"]
    assert all(r["cells"][COLUMNS.index("verdict")].startswith("! unreadable: ") for r in broken)
    assert set(report_links(census["tasks"]).values()) == {link for r in dom.rows for link in r["links"]}


def test_a_click_on_a_head_sorts_the_rows(census: dict[str, Any]) -> None:
    out = census["out"]
    before = Dom(run_chromium((out / "index.html").as_uri(), "--dump-dom"))
    click = "var th=[...document.querySelectorAll('#census th')].find(function(h){return h.textContent==='%s';});"
    up = Dom(run_chromium(_with_script(out, "sorted-up.html", click % "version" + "th.click();"), "--dump-dom"))
    versions = up.column("version")
    assert up.sort == {"version": "ascending"}
    assert [natural(v) for v in versions] == sorted(natural(v) for v in versions)
    assert versions.index("2.0") < versions.index("12.0")  # by number: 2 before 12, as text it would be after
    assert sorted(map(str, up.rows)) == sorted(map(str, before.rows))  # the same rows, moved
    down = Dom(run_chromium(_with_script(out, "sorted-down.html", click % "application" + "th.click();th.click();"),
                            "--dump-dom"))
    assert down.sort == {"application": "descending"}
    names = down.column("application")
    assert [natural(n) for n in names] == sorted((natural(n) for n in names), reverse=True)


def test_typing_in_the_filter_box_hides_the_other_rows(census: dict[str, Any]) -> None:
    out = census["out"]
    before = Dom(run_chromium((out / "index.html").as_uri(), "--dump-dom"))
    words = "WINDOWS v6"  # every word must match, in any case
    typed = (f"var box=document.getElementById('filter');box.value={json.dumps(words)};"
             "box.dispatchEvent(new Event('input',{bubbles:true}));")
    dom = Dom(run_chromium(_with_script(out, "filtered.html", typed), "--dump-dom"))
    # the page matches a row's text, its cells' text run together (tr.textContent)
    expected = [all(w in "".join(r["cells"]).lower() for w in words.lower().split()) for r in before.rows]
    assert [not r["hidden"] for r in dom.rows] == expected
    shown = [r for r in dom.rows if not r["hidden"]]
    assert 0 < len(shown) < len(dom.rows) and dom.shown == str(len(shown))
    assert {r["cells"][COLUMNS.index("platform")] for r in shown} == {"windows"}
    assert {r["cells"][COLUMNS.index("zluda")] for r in shown} == {"v6"}


def test_the_screenshot_of_the_page(census: dict[str, Any]) -> None:
    """The page without the hostile-name fixture (its rows are for the escaping checks, not for the README)."""
    out, matrix = census["out"], census["matrix"]
    shown = dict(matrix, rows=[r for r in matrix["rows"] if r["application"] != HOSTILE])
    (out / "screenshot.html").write_text(render_page(shown, report_links(census["tasks"])), encoding="utf-8")
    shot = out / "census-page.png"
    run_chromium((out / "screenshot.html").as_uri(), f"--screenshot={shot}", "--window-size=1280,850")
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    if os.environ.get("UPDATE_SCREENSHOT") == "1":
        SCREENSHOT.write_bytes(data)
    assert SCREENSHOT.is_file(), "run with UPDATE_SCREENSHOT=1 to write docs/census-page.png"
