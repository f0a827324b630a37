"""TOML: the same document as JSON; TOML has no null, so empty values are left out
(and `loads` puts them back, so `cuda4amd report scan.toml` reads its own output)."""
from __future__ import annotations

import json
import sys
from importlib.resources import files
from typing import Any

import tomli_w

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

def render(document: dict) -> str:
    return tomli_w.dumps(_without_nulls(document))


def loads(text: str) -> dict:
    """A document read from TOML, with the null fields `render` left out set to None again.

    Which fields those are comes from the shipped JSON Schema
    (report/schemas/scan.json): a property the schema lists, that may be
    null and is missing, was a null.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc)) from None
    schema = json.loads(files("cuda4amd.report").joinpath("schemas").joinpath("scan.json").read_text(encoding="utf-8"))
    _restore_nulls(data, schema, schema)
    return data


def _resolve(node: dict, root: dict) -> dict:
    while "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _nullable(node: dict, root: dict) -> bool:
    node = _resolve(node, root)
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_nullable(option, root) for option in node.get("oneOf", []) + node.get("anyOf", []))


def _restore_nulls(value: Any, node: dict, root: dict) -> None:
    node = _resolve(node, root)
    for option in node.get("oneOf", []) + node.get("anyOf", []):
        _restore_nulls(value, option, root)
    if isinstance(value, dict):
        properties = node.get("properties") or {}
        for key, sub in properties.items():
            if key not in value:
                if _nullable(sub, root):
                    value[key] = None
            else:
                _restore_nulls(value[key], sub, root)
        if isinstance(node.get("additionalProperties"), dict):  # a map: every value has that schema
            for key, item in value.items():
                if key not in properties:
                    _restore_nulls(item, node["additionalProperties"], root)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for item in value:
            _restore_nulls(item, node["items"], root)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value if v is not None]
    return value
