"""The probe-outcome document: what a probe run leaves behind (and what tests replay).

Shape (schema ``cuda4amd.probes/1``)::

    {"schema": "cuda4amd.probes/1", "date": "2026-12-01T10:05:00Z",
     "through": "zluda" | "nvidia" | "default loader", "zluda": {"tag", "path"} | null,
     "machine": {"platform", "python"}, "outcomes": [Outcome.to_dict(), ...]}
"""
from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cuda4amd.evidence.runner import Outcome
from cuda4amd.scan.read.engine import open_regular

__all__ = ["SCHEMA", "OutcomeFileError", "outcomes_of", "probe_document", "read_json_file", "read_outcomes"]

SCHEMA = "cuda4amd.probes/1"
MAX_OUTCOME_BYTES = 16 << 20


class OutcomeFileError(Exception):
    pass


def probe_document(outcomes: Sequence[Outcome], *, through: str, zluda: dict[str, Any] | None = None,
                   date: str | None = None) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "date": date or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "through": through,
        "zluda": zluda,
        "machine": {"platform": sys.platform, "system": platform.system(), "release": platform.release(),
                    "python": platform.python_version()},
        "outcomes": [o.to_dict() for o in outcomes],
    }


def outcomes_of(document: dict[str, Any]) -> list[Outcome]:
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise OutcomeFileError(f"not a probe-outcome document (schema {SCHEMA})")
    try:
        return [Outcome.from_dict(o) for o in document.get("outcomes") or []]
    except (TypeError, ValueError) as exc:
        raise OutcomeFileError(f"bad probe outcome: {exc}") from None


def read_json_file(path: str | Path, limit: int) -> Any:
    """The JSON in a file someone else wrote: a regular file only, opened
    non-blocking (a FIFO would hang a plain read), at most `limit` bytes.
    Raises OSError, ValueError (not JSON, too large) or RecursionError (hostile nesting)."""
    with open_regular(Path(path)) as handle:
        chunks, size = [], 0
        while size <= limit:
            block = handle.read(1 << 20)
            if not block:
                break
            chunks.append(block)
            size += len(block)
    if size > limit:
        raise ValueError(f"more than {limit} bytes")
    return json.loads(b"".join(chunks).decode("utf-8"))


def read_outcomes(path: str | Path) -> list[Outcome]:
    try:
        document = read_json_file(path, MAX_OUTCOME_BYTES)
    except (OSError, ValueError, RecursionError) as exc:
        raise OutcomeFileError(f"cannot read {path}: {exc}") from None
    return outcomes_of(document)
