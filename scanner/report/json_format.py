"""JSON: the machine-readable report (schema in docs/report-schema.md)."""
from __future__ import annotations

import json


def render(document: dict) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
