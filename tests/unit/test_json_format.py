"""The JSON writer (report/json_format.indented) gives json.dumps(indent=2, ensure_ascii=False)'s text exactly."""
from __future__ import annotations

import json
import math
from collections import OrderedDict
from enum import IntEnum

import pytest
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda4amd.report.json_format import indented


def standard(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-2**70, 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1e300, 5e-324, math.inf, -math.inf]),
    st.text(), st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("\"\\\n\t\x00\x7f\u2028é😀\ud800")),
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=60,
)


@settings(max_examples=1000, deadline=None)
@given(documents)
def test_the_text_is_json_dumps_text(value):
    assert indented(value) == standard(value)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.one_of(st.integers(), st.floats(), st.booleans(), st.none(), st.text()), documents,
                       max_size=5))
def test_keys_json_dumps_turns_into_text_are_turned_so(value):
    assert indented(value) == standard(value)


class Level(IntEnum):
    HIGH = 2


class Name(str):
    """A str subclass: written by json.dumps, which the writer hands it to."""


@pytest.mark.parametrize("value", [
    {"a": Level.HIGH}, [Name("x")], OrderedDict(a=1), {"a": [1, {"b": 1.5}], "c": Level.HIGH},
])
def test_subclasses_are_written_as_json_dumps_writes_them(value):
    assert indented(value) == standard(value)


@pytest.mark.parametrize("value", [{"a": {1, 2}}, [object()], {"a": b"bytes"}])
def test_what_json_dumps_refuses_is_refused_alike(value):
    with pytest.raises(TypeError) as expected:
        standard(value)
    with pytest.raises(TypeError) as got:
        indented(value)
    assert str(got.value) == str(expected.value)


def test_a_cycle_is_refused_as_json_dumps_refuses_it():
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        indented(cycle)


def test_real_reports_are_written_the_same(scan):
    for target in (FIXTURES / "demo" / "Tool", FIXTURES):
        document = scan(target, host="none")
        assert indented(document) == standard(document)
