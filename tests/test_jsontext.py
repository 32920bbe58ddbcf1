"""The fast indented JSON writer (issue 31): the layout of ``json.dumps(value, indent=2)``,
ASCII only, the same values when parsed."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from solver.common.jsontext import indented
from solver.optimize.solve import solve_table
from solver.rfq.schema import load_rfq

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"

# floats whose spelling both writers share (from 1e-4 up, and zero)
_spelled_alike = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda x: x == 0.0 or abs(x) >= 1e-4)
_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)


def _json(leaf: st.SearchStrategy) -> st.SearchStrategy:
    return st.recursive(
        leaf, lambda inner: st.lists(inner, max_size=4)
        | st.dictionaries(_text, inner, max_size=4), max_leaves=25)


_alike = _json(st.none() | st.booleans() | st.integers() | _spelled_alike | _text)
_any = _json(st.none() | st.booleans() | st.integers()
             | st.floats(allow_nan=False, allow_infinity=False) | _text)


@settings(max_examples=300, deadline=None)
@given(st.lists(_alike, max_size=3) | st.dictionaries(_text, _alike, max_size=4))
def test_the_text_is_json_dumps_indent_2_to_the_byte(value):
    text = indented(value)
    assert text == json.dumps(value, indent=2)
    assert text.isascii()


@settings(max_examples=300, deadline=None)
@given(st.lists(_any, max_size=3) | st.dictionaries(_text, _any, max_size=4))
def test_small_floats_are_spelled_otherwise_but_parse_the_same(value):
    assert json.loads(indented(value)) == json.loads(json.dumps(value, indent=2))


def test_the_spellings_that_differ_and_those_that_do_not():
    assert indented([1e-05, 1.5e-07]) == '[\n  0.00001,\n  1.5e-7\n]'
    assert json.loads(indented([1e-05, 1.5e-07])) == [1e-05, 1.5e-07]
    assert indented({"x": [1e16, -0.0, 0.1]}) == json.dumps({"x": [1e16, -0.0, 0.1]}, indent=2)
    # non-ASCII escaped as ensure_ascii does, a pair of surrogates above U+FFFF
    assert indented(["8 \u00d7 GPU \u2192 \U0001F600"]) == json.dumps(["8 \u00d7 GPU \u2192 \U0001F600"], indent=2)
    assert indented([math.inf, -math.inf]) == json.dumps([math.inf, -math.inf], indent=2)
    assert indented({}) == "{}" and indented([]) == "[]"


def test_a_solved_plan_is_written_as_json_dumps_writes_it(catalog):
    rfq = load_rfq(SCENARIOS / "chat-70b-one-node.yaml", catalog)
    plan, _ = solve_table(rfq, catalog)
    data = plan.to_json()
    assert indented(data) == json.dumps(data, indent=2)
