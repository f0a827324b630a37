"""TOML: the same document as JSON; TOML has no null, so empty values are left out."""
from __future__ import annotations

import tomli_w


def render(document: dict) -> str:
    return tomli_w.dumps(_without_nulls(document))


def _without_nulls(value):
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value if v is not None]
    return value
