"""The census (cuda4amd.census, `cuda4amd census`): fixture wheels on a LocalCluster of 2 workers and serially,
a worker killed mid-census, a resumed census, the page parsed (and in Chromium when it is installed)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from census_wheels import HOSTILE, fixture_wheels, write_wheel
from click.testing import CliRunner
from conftest import FIXTURES, REPO

from cuda4amd.census.outputs import census_matrix, write_outputs
from cuda4amd.census.plan import Artifact, plan
from cuda4amd.census.run import local_cluster, run_census, tasks_of, worker_memory
from cuda4amd.census.task import FAILURE_SCHEMA, rules_version
from cuda4amd.evidence.matrix import COLUMNS

distributed = pytest.importorskip("distributed", reason='the census extra: pip install ".[census]"')



@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    """Two good wheels of fixture binaries (Windows and Linux), one with a hostile name, a broken one."""
    return fixture_wheels(tmp_path / "wheels")


def _reports(outdir: Path) -> dict[str, bytes]:
    return {p.relative_to(outdir).as_posix(): p.read_bytes() for p in sorted((outdir / "reports").rglob("*.json"))}


def _census(specs: list[str], outdir: Path, **kwargs: object) -> tuple[list, object]:
    planned = plan(specs)
    tasks = tasks_of(planned.artifacts, ["v5", "v6"], rules_version())
    return tasks, run_census(tasks, outdir, **kwargs)  # type: ignore[arg-type]


def test_plan_names_each_content_once_and_reads_requirements(wheels: Path, tmp_path: Path) -> None:
    shutil.copy(wheels / "appready-1.0-py3-none-win_amd64.whl", tmp_path / "same-content.whl")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# pinned\nfoo==1.2\n--index-url https://example.invalid\nnot a pin\n")
    asked = []

    def download(name: str, version: str, platforms: object, dest: Path) -> list[Path]:
        asked.append((name, version))
        return [wheels / "blasmix-2.0-py3-none-win_amd64.whl"]

    planned = plan([str(wheels), str(tmp_path / "same-content.whl"), str(requirements), "bar==3"],
                   ("win_amd64",), tmp_path / "cache", download)
    assert asked == [("foo", "1.2"), ("bar", "3")]
    assert len(planned.artifacts) == 5 == len({a.sha256 for a in planned.artifacts})
    assert [p["reason"].split(":")[0] for p in planned.problems] == ["not a wheel, folder, requirements file or "
                                                                    "name==version"]


def test_serial_census_a_broken_wheel_is_a_row_with_its_reason(wheels: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    tasks, outcome = _census([str(wheels)], out, serial=True)
    assert (outcome.scanned, outcome.failed, outcome.skipped) == (10, 2, 0)
    matrix = census_matrix(tasks, out)
    broken = [r for r in matrix["rows"] if r["application"] == "broken"]
    assert [r["zluda"] for r in broken] == ["v5", "v6"]
    assert all(r["verdict"].startswith("unreadable: TargetError: broken-1.0-py3-none-any.whl") for r in broken)
    assert str(tmp_path) not in json.dumps(matrix)  # reports name artifacts by file name, not this folder
    platforms = {r["application"]: r["platform"] for r in matrix["rows"]}
    assert platforms["appready"] == "windows" and platforms["cublas"] == "linux"
    record = json.loads(next(p for p in (out / "reports").rglob("*.json") if b"census-failure" in p.read_bytes())
                        .read_text())
    assert record["schema"] == FAILURE_SCHEMA


def test_resumed_census_skips_what_is_done(wheels: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    tasks, _ = _census([str(wheels)], out, serial=True)
    before = _reports(out)
    _, again = _census([str(wheels)], out, serial=True)
    assert (again.scanned, again.skipped) == (0, len(tasks))
    (out / tasks[0].relative()).unlink()
    _, third = _census([str(wheels)], out, serial=True)
    assert (third.scanned, third.skipped) == (1, len(tasks) - 1)
    assert _reports(out) == before


def test_local_cluster_of_two_workers_equals_the_serial_census(wheels: Path, tmp_path: Path) -> None:
    _census([str(wheels)], tmp_path / "serial", serial=True)
    _, outcome = _census([str(wheels)], tmp_path / "dask", workers=2)
    assert (outcome.scanned, outcome.failed) == (10, 2)
    assert _reports(tmp_path / "dask") == _reports(tmp_path / "serial")


def test_each_local_worker_gets_its_share_of_the_memory_and_glibc_defaults() -> None:
    from distributed.system import MEMORY_LIMIT

    assert worker_memory(2) == 0.5 and worker_memory(4, "3GB") == "3GB"
    with local_cluster(2, worker_memory(2)) as cluster, distributed.Client(cluster) as client:
        limits = [w["memory_limit"] for w in client.scheduler_info()["workers"].values()]
        assert limits == [int(MEMORY_LIMIT / 2)] * 2  # bounded: the two shares make the machine's memory
        environment = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
        assert set(environment.values()) == {os.environ.get("MALLOC_TRIM_THRESHOLD_")}  # Dask's 65536 not added
        assert not any(client.run(lambda: __import__("dask").config.get("distributed.worker.profile.enabled"))
                       .values())


def test_a_worker_killed_mid_census_still_gives_the_serial_result(wheels: Path, tmp_path: Path) -> None:
    blas = (FIXTURES / "pe/blas_mixed.dll").read_bytes()
    for n in range(3):  # a few hundred members: a task long enough (~0.5 s) to be killed while it runs
        write_wheel(wheels, f"slow{n}", "1.0", {f"slow{n}/b{i}.dll": blas + bytes([n]) for i in range(300)})
    _census([str(wheels)], tmp_path / "serial", serial=True)
    cluster = local_cluster(2, worker_memory(2))  # as the command's, on a scheduler address of its own
    client = distributed.Client(cluster)
    try:
        result: dict[str, object] = {}
        census = threading.Thread(target=lambda: result.update(
            outcome=_census([str(wheels)], tmp_path / "dask", scheduler=cluster.scheduler_address)[1]))
        census.start()
        killed = None
        deadline = time.monotonic() + 60
        while killed is None and time.monotonic() < deadline:
            busy = [w for w, keys in client.processing().items() if keys]
            if busy:
                killed = client.run(os.getpid, workers=busy[:1])[busy[0]]
                os.kill(killed, signal.SIGKILL)  # the nanny starts a new worker; the scheduler reruns its task
            time.sleep(0.05)
        census.join(timeout=120)
        assert killed is not None and not census.is_alive()
    finally:
        client.close()
        cluster.close()
    outcome = result["outcome"]
    assert outcome.failed == 2 and outcome.scanned == 16  # type: ignore[attr-defined]
    assert _reports(tmp_path / "dask") == _reports(tmp_path / "serial")


class _Table(HTMLParser):
    """The page's table rows, links and script elements, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.heads: list[str] = []
        self.links: list[str] = []
        self.scripts = 0
        self._cell: list[str] | None = None
        self._in_body = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "a":
            self.links.append(dict(attrs)["href"] or "")
        elif tag == "script":
            self.scripts += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell).strip()
            (self.rows[-1] if tag == "td" and self._in_body else self.heads).append(text)
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _page(wheels: Path, out: Path) -> tuple[dict, _Table]:
    tasks, _ = _census([str(wheels)], out, serial=True)
    matrix = census_matrix(tasks, out)
    written = write_outputs(matrix, tasks, out)
    table = _Table()
    table.feed(written["html"].read_text(encoding="utf-8"))
    return matrix, table


def test_the_page_is_one_table_of_escaped_text_linked_to_the_reports(wheels: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    matrix, table = _page(wheels, out)
    assert table.scripts == 1  # the page's own; the hostile name is text
    assert table.heads == [{"zluda": "ZLUDA"}.get(c, c) for c in COLUMNS]
    assert len(table.rows) == len(matrix["rows"]) and all(len(r) == len(COLUMNS) for r in table.rows)
    assert any(r[0] == HOSTILE for r in table.rows)
    verdicts = {r[0]: r[COLUMNS.index("verdict")] for r in table.rows}
    assert verdicts["appready"] == "\N{CHECK MARK} ready"  # a mark and a word, not only a colour
    assert table.links and all((out / link).is_file() for link in table.links)
    assert "<script>alert" not in (out / "index.html").read_text() and "<script>alert" not in \
        (out / "matrix.md").read_text()


def test_the_page_in_headless_chromium(wheels: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium): the DOM check needs it")
    out = tmp_path / "out"
    matrix, _ = _page(wheels, out)
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          (out / "index.html").as_uri()], capture_output=True, text=True, timeout=120).stdout
    table = _Table()
    table.feed(dom)
    assert len(table.rows) == len(matrix["rows"]) and table.scripts == 1
    assert any(r[0] == HOSTILE for r in table.rows)
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={tmp_path / 'page.png'}",
                    "--window-size=1400,700", (out / "index.html").as_uri()], capture_output=True, timeout=120)
    assert (tmp_path / "page.png").is_file()


def test_the_command_writes_the_outputs_and_resumes(wheels: Path, tmp_path: Path) -> None:
    from cuda4amd.cli import main

    out = tmp_path / "out"
    first = CliRunner().invoke(main, ["census", str(wheels), "-o", str(out), "--serial", "--zluda-release", "v6"])
    assert first.exit_code == 0, first.output
    assert "5 scanned (1 failed), 0 done already" in first.output
    assert {p.name for p in out.iterdir()} >= {"matrix.md", "matrix.csv", "matrix.json", "index.html", "reports"}
    again = CliRunner().invoke(main, ["census", str(wheels), "-o", str(out), "--serial", "--zluda-release", "v6",
                                      "-q"])
    assert again.exit_code == 0 and again.output == ""


def test_without_dask_the_command_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    from cuda4amd.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "distributed" else real(name, *a))
    result = CliRunner().invoke(main, ["census", str(tmp_path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and 'pip install "cuda4amd[census]"' in result.output


def test_artifact_name() -> None:
    assert Artifact("/x/y/a-1-py3-none-any.whl", "0" * 64, 1).name == "a-1-py3-none-any.whl"


def test_an_unreachable_scheduler_is_a_usage_error(wheels: Path, tmp_path: Path) -> None:
    import dask

    from cuda4amd.cli import main

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        result = CliRunner().invoke(main, ["census", str(wheels), "-o", str(tmp_path / "out"), "-q",
                                           "--scheduler", "tcp://127.0.0.1:9"])
    assert result.exit_code == 2 and "cannot reach the Dask scheduler tcp://127.0.0.1:9" in result.output


def test_a_memory_limit_that_is_no_size_is_a_usage_error(wheels: Path, tmp_path: Path) -> None:
    from cuda4amd.cli import main

    result = CliRunner().invoke(main, ["census", str(wheels), "-o", str(tmp_path / "out"), "--memory-limit", "lots"])
    assert result.exit_code == 2 and "not a size: 'lots'" in result.output


def test_the_cluster_settings_of_docs_census_md_are_the_local_clusters() -> None:
    """docs/census.md gives `dask worker` machines a config file: it must say what QUIET says."""
    import re

    import yaml

    from cuda4amd.census.run import QUIET

    text = (REPO / "docs" / "census.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block is not None

    def flat(tree: dict, prefix: str = "") -> dict:
        out: dict = {}
        for key, value in tree.items():
            out.update(flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
        return out

    assert flat(yaml.safe_load(block.group(1))) == QUIET
