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
from pathlib import Path
from typing import Any, Sequence

from cuda4amd.evidence.runner import Outcome

__all__ = ["SCHEMA", "probe_document", "read_outcomes", "outcomes_of", "OutcomeFileError"]

SCHEMA = "cuda4amd.probes/1"


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


def read_outcomes(path: str | Path) -> list[Outcome]:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise OutcomeFileError(f"cannot read {path}: {exc}") from None
    return outcomes_of(document)
