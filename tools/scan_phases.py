#!/usr/bin/env python3
"""Where a command-line scan's time goes: fresh `cuda4amd scan TREE --format json` processes, phase by phase.

    python tools/scan_phases.py [--python PY] [--rounds N] [--hard-exit] TREE [-- SCAN OPTIONS...]
    python tools/scan_phases.py --rounds 7 /opt/torch/.venv -- --no-cache

Each round starts a fresh interpreter that stamps, on the wall clock, the moments it passes: the
interpreter up, `cuda4amd.cli` imported, `run_scan` entered and left (with the `ScanResult.timings`
of its stages), the report written (`cli.output.emit`), and the command's `SystemExit`. The parent
stamps the moment before it starts the process and after the process has ended, so the first phase
holds the interpreter's start-up and its site, and the last one the interpreter's shutdown. Prints,
per phase, the median, min and max in ms over the rounds (docs/performance.md, "Method").

--hard-exit: each process ends with `os._exit` once its report is out, so the last phase shows what
the interpreter's shutdown would cost without it (no atexit handler or finalizer runs then).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Runs in the scanned process. The import hook wraps run_scan and emit once their modules load, so
# that nothing is imported earlier than the command itself would import it.
CHILD = r"""
import os, sys, time
stamps = {"up": time.time()}
import importlib.abc, importlib.machinery, json

class Wrap(importlib.abc.MetaPathFinder):
    targets = {"cuda4amd.scan.pipeline": "run_scan", "cuda4amd.cli.output": "emit"}
    def find_spec(self, name, path, target=None):
        if name not in self.targets:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        execute = spec.loader.exec_module
        attribute = self.targets[name]
        def exec_module(module):
            execute(module)
            inner = getattr(module, attribute)
            def timed(*args, **kwargs):
                stamps[attribute + " in"] = time.time()
                try:
                    value = inner(*args, **kwargs)
                finally:
                    stamps[attribute + " out"] = time.time()
                if attribute == "run_scan":
                    stamps["timings"] = dict(value.timings)
                return value
            setattr(module, attribute, timed)
        spec.loader.exec_module = exec_module
        return spec

def save():
    with open(os.environ["PHASES_OUT"], "w") as out:
        out.write(json.dumps(stamps))

sys.meta_path.insert(0, Wrap())
sys.argv = ["cuda4amd"] + sys.argv[1:]
from cuda4amd.cli import entry_point
stamps["imported"] = time.time()
try:
    entry_point()
except SystemExit as exit:
    stamps["exit"] = time.time()
    save()
    if os.environ.get("PHASES_HARD_EXIT"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit.code if isinstance(exit.code, int) else 1)
    raise
"""

NEEDED = ("up", "imported", "run_scan in", "run_scan out", "emit out", "exit")


class PhasesError(RuntimeError):
    """A scanned process did not pass every moment the table needs."""


def seconds(value: object) -> float:
    """A stamp or a stage's time as written by the scanned process (JSON numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PhasesError(f"not a time: {value!r}")
    return float(value)


def phases(stamps: dict[str, object], before: float, after: float) -> dict[str, float]:
    """One process's phases in seconds, from its stamps and the parent's clock around it."""
    missing = [name for name in NEEDED if name not in stamps]
    if missing:
        raise PhasesError(f"the scan did not stamp {', '.join(missing)}: did it fail, or did "
                          "cuda4amd.scan.pipeline.run_scan or cuda4amd.cli.output.emit move?")
    at = {name: seconds(stamps[name]) for name in NEEDED}
    timings = stamps.get("timings", {})
    if not isinstance(timings, dict):
        raise PhasesError(f"run_scan's timings are not a mapping: {timings!r}")
    return {
        "start to interpreter up": at["up"] - before,
        "imports (cuda4amd.cli)": at["imported"] - at["up"],
        "to run_scan": at["run_scan in"] - at["imported"],
        "run_scan": at["run_scan out"] - at["run_scan in"],
        "to the report written": at["emit out"] - at["run_scan out"],
        "to SystemExit": at["exit"] - at["emit out"],
        "exit": after - at["exit"],
        "total": after - before,
        **{f"  run_scan: {stage}": seconds(value) for stage, value in timings.items()},
    }


def summary(rows: list[dict[str, float]]) -> list[str]:
    """Median (min, max) in ms of each phase over the rounds, in the first round's order."""
    lines = []
    for phase in rows[0]:
        values = [row[phase] * 1000 for row in rows if phase in row]
        lines.append(f"{phase:32} {statistics.median(values):8.1f} ({min(values):.1f}, {max(values):.1f})")
    return lines


def one_round(python: str, tree: str, options: list[str], *, hard_exit: bool, stamps_file: Path) -> dict[str, float]:
    env = {**os.environ, "PHASES_OUT": str(stamps_file)}
    if hard_exit:
        env["PHASES_HARD_EXIT"] = "1"
    stamps_file.unlink(missing_ok=True)
    before = time.time()
    done = subprocess.run([python, "-c", CHILD, "scan", tree, "--format", "json", *options],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, check=False)
    after = time.time()
    if not stamps_file.exists():
        raise PhasesError(f"the scan ended with status {done.returncode} before its exit: {done.stderr.strip()}")
    return phases(json.loads(stamps_file.read_text()), before, after)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, scan_options = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tree", help="the folder, venv or wheel to scan")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the scans (default: this one)")
    parser.add_argument("--rounds", type=int, default=7, help="fresh processes (default 7)")
    parser.add_argument("--hard-exit", action="store_true", help="end each process by os._exit after its report")
    args = parser.parse_args(ours)
    with tempfile.TemporaryDirectory(prefix="cuda4amd-phases-") as folder:
        stamps_file = Path(folder) / "stamps.json"
        try:
            rows = [one_round(args.python, args.tree, scan_options, hard_exit=args.hard_exit, stamps_file=stamps_file)
                    for _ in range(args.rounds)]
        except PhasesError as error:
            print(f"scan_phases: {error}", file=sys.stderr)
            return 1
    print(f"# {args.python} scan {args.tree} {' '.join(scan_options)}: {args.rounds} fresh processes, "
          "median (min, max) ms")
    print("\n".join(summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
