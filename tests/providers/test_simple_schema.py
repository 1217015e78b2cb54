"""The plain-keyword check (providers/simple_schema.py) says yes only where jsonschema (Draft
2020-12, as the router configures it) says valid; on generated schemas and values the two
agree exactly, and a schema with any other keyword is left to jsonschema."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from jobrouter.providers.simple_schema import compile_simple

NAMES = st.sampled_from(["text", "name", "tone", "n", "tags"])
TYPES = ["object", "array", "string", "integer", "number", "boolean", "null"]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from([0.0, 1.0, 2.5, -1.5, 3.0])
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=8,
)


def _keywords(sub: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    count = st.integers(0, 3)
    bound = st.integers(-2, 3) | st.sampled_from([0.5, 1.0, 2.5])
    options = {
        "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3),
        "properties": st.dictionaries(NAMES, sub, max_size=3),
        "required": st.lists(NAMES, max_size=2, unique=True),
        "additionalProperties": st.booleans() | sub,
        "items": sub,
        "enum": st.lists(st.text(max_size=2), max_size=3, unique=True),
        "minLength": count,
        "maxLength": count,
        "minItems": count,
        "maxItems": count,
        "minProperties": count,
        "maxProperties": count,
        "minimum": bound,
        "maximum": bound,
        "exclusiveMinimum": bound,
        "exclusiveMaximum": bound,
        "description": st.just("annotation only"),
    }
    return st.fixed_dictionaries({}, optional=options)


schemas = st.recursive(st.booleans() | _keywords(st.just(True)), _keywords, max_leaves=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, value=json_values)
def test_the_quick_check_agrees_with_jsonschema(schema: Any, value: Any) -> None:
    check = compile_simple(schema)
    assert check is not None, schema
    assert check(value) == Draft202012Validator(schema).is_valid(value), (schema, value)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "integer"}, 1.0, True),  # 1.0 is an integer, a boolean is not
        ({"type": "number", "minimum": 1}, 1, False),
        ({"enum": ["a"]}, "a", 1),
        ({"properties": {"a": {"type": "string"}}, "additionalProperties": False}, {"a": "x"}, {}),
        ({"items": {"maxLength": 1}, "minItems": 1}, ["x"], []),
    ],
)
def test_named_cases(schema: dict[str, Any], valid: Any, invalid: Any) -> None:
    check = compile_simple(schema)
    assert check is not None
    assert check(valid) and Draft202012Validator(schema).is_valid(valid)
    ok = check(invalid)
    assert ok == Draft202012Validator(schema).is_valid(invalid)
    if schema.get("additionalProperties") is False:
        assert check({"a": "x", "b": 1}) is False


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "format": "email"},
        {"type": "string", "pattern": "^a"},
        {"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}},
        {"anyOf": [{"type": "string"}]},
        {"enum": [1, True]},  # jsonschema's equality of numbers and booleans
        {"prefixItems": [{"type": "string"}]},
        {"type": "strng"},
        {"minLength": 1.5},
        {"$schema": "http://json-schema.org/draft-07/schema#"},
        {"properties": {"a": {"const": 1}}},
    ],
)
def test_other_keywords_are_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_simple(schema) is None
