"""tools/bench.py runs end to end on a small tree and reports every goal row (no timing is asserted)."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import FIXTURES, REPO


def test_bench_reports_each_goal_on_a_fixture_tree(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "bench.py"), "--tree", str(FIXTURES / "byname"),
         "--runs", "1", "--lief-runs", "1", "--cold", "0"],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    table = done.stdout
    assert "| measurement | runs | min | median | max | goal | met | disk reads |" in table
    timed = [line for line in table.splitlines()
             if line.startswith(("| full scan, warm", "| re-scan", "| the same in"))]
    assert len(timed) == 5, table
    for row in timed:  # each says how many page faults of its runs read the disk
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert len(cells) == 8 and (cells[7] == "0" or " of 1 runs" in cells[7]), row
    for row in ("full scan, warm, `--no-cache` (jobs =", "full scan, warm, `--no-cache --jobs 1`",
                "`--no-cache --engine lief --jobs", "lief ÷ fast (medians, same run)",
                "re-scan, unchanged tree, warm facts cache",
                "the same in one process, as `--fix` verification re-scans",
                "floor: walk + magic + import names, one process", "full scan ÷ floor (medians)"):
        assert row in table, row
    if os.path.exists("/proc/self/smaps_rollup"):
        assert "peak memory, main process (VmHWM)" in table and "summed PSS" in table
    assert "output identical to `--jobs 1 --no-cache` in every fast run: yes" in table


def test_ab_bench_compares_two_builds_and_lists_every_run(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "ab_bench.py"), str(FIXTURES / "byname"),
         "--a", sys.executable, "--b", sys.executable, "--runs", "2"],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("warm full scan, --no-cache: A median") and "B / A" in lines[0]
    # a line on the runs that read nothing from the disk comes between where some did (a machine paging out)
    orders = [line for line in lines if line.startswith("  runs in order: ")]
    assert [line for line in lines if not line.startswith("  ")][1].startswith("re-scan, warm facts cache: A median")
    # two rounds, the order flipped in the second: A B B A
    assert len(orders) == 2
    assert [word for word in orders[0].split() if word in ("A", "B")] == ["A", "B", "B", "A"]


def test_ab_bench_stops_when_a_build_fails(tmp_path):
    broken = tmp_path / "broken" / "cuda4amd"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    (broken / "__main__.py").write_text("raise SystemExit(70)\n")  # a build that does not scan at all
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "ab_bench.py"), str(FIXTURES / "byname"),
         "--a", sys.executable, "--b", sys.executable, "--b-path", str(broken.parent), "--runs", "1"],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode != 0
    assert "build B exited 70" in done.stderr


def bench_module():
    """tools/bench.py imported as a module (tools/ is not a package)."""
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import bench
    finally:
        sys.path.remove(str(REPO / "tools"))
    return bench


def test_bench_says_whether_the_package_has_its_bytecode(tmp_path):
    """Without bytecode, where Python may not write it, every run compiles the sources: the table says so."""
    import py_compile

    bench = bench_module()
    package = tmp_path / "cuda4amd"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "part.py").write_text("X = 1\n")
    py_compile.compile(str(package / "__init__.py"), doraise=True)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    line = bench.bytecode(env)
    assert line.startswith(f"bytecode: 1 of 2 modules of {package} compiled and Python may not write the rest")
    py_compile.compile(str(package / "part.py"), doraise=True)
    assert bench.bytecode(env) == f"bytecode: 2 of 2 modules of {package} compiled"


def test_bench_tells_the_runs_that_read_the_disk_from_those_that_did_not():
    """A warm row's runs with major page faults waited on the disk: the table counts them, and keeps apart
    the runs served from the page cache alone (what the warm goals mean)."""
    bench = bench_module()
    runs = bench.Runs(wall=[0.5, 2.0, 0.7, 0.6], faults=[0, 120, 0, 3])
    assert runs.disk() == "123 in 2 of 4 runs"
    warm = runs.from_memory()
    assert warm.wall == [0.5, 0.7] and warm.disk() == "0"
    assert warm.cells() == "| 0.500 s | 0.600 s | 0.700 s |"
    assert bench.Runs(wall=[1.0], faults=[0]).disk() == "0"
    assert bench.Runs().disk() == ""
    # the row below a warm row: judged against the goal on the runs served from memory alone
    assert bench.warm_row(runs, 0.65) == ("| … of them, the runs that read nothing from the disk | 2 "
                                          "| 0.500 s | 0.600 s | 0.700 s | ≤ 0.65 s | yes | 0 |")
    assert bench.warm_row(runs, None) == ("| … of them, the runs that read nothing from the disk | 2 "
                                          "| 0.500 s | 0.600 s | 0.700 s | | | 0 |")
    assert bench.warm_row(warm, 0.65) is None  # every run from memory: the row above says it all
    assert bench.warm_row(bench.Runs(wall=[2.0], faults=[9]), 0.65) is None  # no run from memory
