"""Run one workload operation in this process and print what happened as one JSON line.

    python tools/gpu_truth/probe.py torch.matmul

Standard library only until the workload imports its framework. The JSON
line (prefixed with PROBE_MARK) holds: op, ok, error (last line of the
exception), seconds, and `maps`: every file mapped into this process whose
path looks like a shared library (from /proc/self/maps), before and after
the operation, so the runner can tell what the operation itself loaded.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

PROBE_MARK = "GPU-TRUTH-PROBE "

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def mapped_libraries() -> list[str]:
    """Paths of the shared objects mapped into this process."""
    paths = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    if path.startswith("/") and ".so" in os.path.basename(path):
                        paths.add(path)
    except OSError:
        pass
    return sorted(paths)


def main(argv: list[str]) -> int:
    from workloads import OPERATIONS

    op = argv[1]
    setup, run = OPERATIONS[op]
    result: dict = {"op": op, "ok": False, "error": None, "seconds": None, "stage": "setup"}
    before: list[str] = []
    start = time.perf_counter()
    try:
        state = setup()
        before = mapped_libraries()
        result["stage"] = "run"
        run(state)
        result["ok"] = True
    except BaseException as exc:  # every failure is a finding
        lines = traceback.format_exception_only(type(exc), exc)
        result["error"] = (lines[-1] if lines else repr(exc)).strip()[:600]
    result["seconds"] = round(time.perf_counter() - start, 3)
    after = mapped_libraries()
    result["maps_before"] = before
    result["maps"] = after
    sys.stdout.flush()
    print(PROBE_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
