"""Harness behind the "where a command's time goes" figures of docs/performance.md (2026-12-02): fresh
`cuda4amd scan TREE --format json` processes, each stamping the moments it passes (interpreter up, cuda4amd.cli
imported, run_scan entered and left with its own timings, the report written, SystemExit), against the parent's
clock before the process started and after it ended. Kept as the provenance of those figures, not a tool.

    CUDA4AMD_FACTS_CACHE=DIR python phases-2026-12-02.py PYTHON TREE ROUNDS [scan options...]

PHASES_HARD_EXIT=1: each process ends by os._exit once its report is out, skipping the interpreter's shutdown.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import os, sys, time
stamps = {"up": time.time()}
def save():
    with open(os.environ["PHASES_OUT"], "w") as out:
        out.write(json.dumps(stamps))
import importlib.abc, importlib.machinery, json

class Wrap(importlib.abc.MetaPathFinder):
    # wraps run_scan and emit once their modules load, without importing them early
    targets = {"cuda4amd.scan.pipeline": "run_scan", "cuda4amd.cli.output": "emit"}
    def find_spec(self, name, path, target=None):
        if name not in self.targets:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
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
sys.meta_path.insert(0, Wrap())
sys.argv = ["cuda4amd"] + sys.argv[1:]
from cuda4amd.cli import entry_point
stamps["imported"] = time.time()
try:
    entry_point()
except SystemExit as exit:
    stamps["exit"] = time.time()
    save()
    if os.environ.get("PHASES_HARD_EXIT"):  # what the interpreter's shutdown costs: none of it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit.code if isinstance(exit.code, int) else 1)
    raise
"""


def main() -> None:
    python, tree, rounds, *options = sys.argv[1:]
    out = tempfile.mktemp(prefix="phases-")
    rows = []
    for _ in range(int(rounds)):
        before = __import__("time").time()
        subprocess.run([python, "-c", CHILD, "scan", tree, "--format", "json", *options], stdout=subprocess.DEVNULL,
                       env={**os.environ, "PHASES_OUT": out}, check=False)
        after = __import__("time").time()
        stamps = json.load(open(out))
        rows.append({
            "start to interpreter up": stamps["up"] - before,
            "imports (cuda4amd.cli)": stamps["imported"] - stamps["up"],
            "to run_scan": stamps["run_scan in"] - stamps["imported"],
            "run_scan": stamps["run_scan out"] - stamps["run_scan in"],
            "to the report written": stamps["emit out"] - stamps["run_scan out"],
            "to SystemExit": stamps["exit"] - stamps["emit out"],
            "exit": after - stamps["exit"],
            "total": after - before,
            **{f"  run_scan: {k}": v for k, v in stamps["timings"].items()},
        })
    print(f"# {python} scan {tree} {' '.join(options)}: {rounds} fresh processes, median (min, max) ms")
    for key in rows[0]:
        values = [row[key] * 1000 for row in rows]
        print(f"{key:32} {statistics.median(values):8.1f} ({min(values):.1f}, {max(values):.1f})")


main()
