"""`python -m cuda4amd.evidence`: run every smoke probe against the libraries this
machine's loader finds (NVIDIA's on an NVIDIA machine) and print one line per
probe; ``--json FILE`` also writes the probe-outcome document.

Needs only the standard library, so it runs where cuda4amd's dependencies are
not installed (the NVIDIA evidence run: docs/evidence.md).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from cuda4amd.evidence.record import probe_document
from cuda4amd.evidence.runner import ORDER, Outcome, run_probes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cuda4amd.evidence")
    parser.add_argument("--family", action="append", choices=ORDER, help="probe only these families")
    parser.add_argument("--through", default="default loader", help="what the libraries are (for the record)")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per probe")
    parser.add_argument("--json", metavar="FILE", help="write the probe-outcome document here")
    args = parser.parse_args(argv)

    def show(o: Outcome) -> None:
        print(f"{o.family:<10} {o.status:<11} {o.seconds:6.2f}s  {o.detail}", flush=True)
        if o.status in ("crash", "incorrect") and o.stderr.strip():
            print("           stderr: " + o.stderr.strip().replace("\n", "\n           "), flush=True)

    outcomes = run_probes(args.family or ORDER, limit=args.limit, progress=show)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(probe_document(outcomes, through=args.through), handle, indent=1)
            handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
