"""A quick yes for JSON Schemas made of the plain keywords, before jsonschema is asked.

jsonschema walks a schema through a new validator object per subschema: about 20 to 40 us for
the small object schemas of a contract, paid by every job at the door (its input) and twice on
the way out (the provider's parse, the router's check). `compile_simple` turns a schema that
uses only the keywords below into a plain function answering "valid?". Its answer is only
trusted when it says yes; on a no, the caller asks jsonschema, whose errors are the ones
reported (and whose verdict stands). A schema with any other keyword (`$ref`, `format`,
`pattern`, `anyOf`, ...) is not compiled at all: jsonschema alone judges it.

The keywords, with jsonschema's Draft 2020-12 meaning (tests/providers/test_simple_schema.py
checks the two agree on generated schemas and values):

- `type` (a name or a list): object = dict, array = list, string = str, boolean = bool,
  null = None, number = int or float but not bool, integer = a number that is whole
  (1.0 included, as jsonschema counts it);
- objects: `properties`, `required`, `additionalProperties` (a boolean or a schema),
  `minProperties`, `maxProperties`;
- arrays: `items` (one schema for every item), `minItems`, `maxItems`;
- strings: `minLength`, `maxLength` (code points), `enum` of strings only;
- numbers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numbers);
- annotations, which assert nothing: `title`, `description`, `$comment`, `default`,
  `examples`, and `$schema` naming Draft 2020-12.

A boolean schema (`true`, `false`) is allowed wherever a schema is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sized
from typing import Any

Check = Callable[[Any], bool]

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
_ANNOTATIONS = frozenset({"title", "description", "$comment", "default", "examples"})
_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
}
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_KNOWN = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "$schema"}
    | _ANNOTATIONS
    | set(_BOUNDS)
    | set(_COUNTS)
)


class _NotSimple(Exception):
    pass


def compile_simple(schema: Any) -> Check | None:
    """A function that says True only of values `schema` accepts; None when the schema uses
    anything but the plain keywords (then only jsonschema can judge it)."""
    try:
        return _compile(schema)
    except _NotSimple:
        return None


def _compile(schema: Any) -> Check:
    if isinstance(schema, bool):
        return lambda _value: schema
    if not isinstance(schema, Mapping) or not _KNOWN.issuperset(schema):
        raise _NotSimple
    if schema.get("$schema", DRAFT_2020_12) != DRAFT_2020_12:
        raise _NotSimple
    checks = [_type(schema["type"])] if "type" in schema else []
    checks += _object_checks(schema) + _array_checks(schema) + _scalar_checks(schema)
    return lambda value: all(check(value) for check in checks)


def _type(names: Any) -> Check:
    listed = [names] if isinstance(names, str) else names
    if not isinstance(listed, list) or not listed or any(n not in _TYPES for n in listed):
        raise _NotSimple
    tests = [_TYPES[n] for n in listed]
    return lambda value: any(test(value) for test in tests)


def _count(schema: Mapping[str, Any], key: str) -> int | None:
    bound = schema.get(key)
    if bound is None:
        return None
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
        raise _NotSimple
    return bound


def _sized(
    kind: type[Sized], schema: Mapping[str, Any], low_key: str, high_key: str
) -> list[Check]:
    low, high = _count(schema, low_key), _count(schema, high_key)
    if low is None and high is None:
        return []
    least, most = low or 0, high

    def sized(value: Any) -> bool:
        if not isinstance(value, kind):
            return True
        return len(value) >= least and (most is None or len(value) <= most)

    return [sized]


def _object_checks(schema: Mapping[str, Any]) -> list[Check]:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        raise _NotSimple
    if not all(isinstance(name, str) for name in required):
        raise _NotSimple
    inner = {name: _compile(sub) for name, sub in properties.items()}
    extra_check = None if extra is True else _compile(extra)

    def fits(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        if any(name not in value for name in required):
            return False
        for name, item in value.items():
            check = inner.get(name, extra_check)
            if check is not None and not check(item):
                return False
        return True

    checks = [fits] if inner or required or extra_check is not None else []
    return checks + _sized(dict, schema, "minProperties", "maxProperties")


def _array_checks(schema: Mapping[str, Any]) -> list[Check]:
    checks = _sized(list, schema, "minItems", "maxItems")
    if "items" in schema:
        item = _compile(schema["items"])
        checks.append(lambda value: not isinstance(value, list) or all(map(item, value)))
    return checks


def _scalar_checks(schema: Mapping[str, Any]) -> list[Check]:
    checks = _sized(str, schema, "minLength", "maxLength")
    if "enum" in schema:
        allowed = schema["enum"]
        if not isinstance(allowed, list) or not all(isinstance(a, str) for a in allowed):
            raise _NotSimple  # jsonschema's equality of numbers and booleans: not repeated here
        names = frozenset(allowed)
        checks.append(lambda value: isinstance(value, str) and value in names)
    for key in _BOUNDS:
        if key in schema:
            checks.append(_bound(key, schema[key]))
    return checks


def _bound(key: str, bound: Any) -> Check:
    if isinstance(bound, bool) or not isinstance(bound, int | float):
        raise _NotSimple
    holds: Callable[[Any], bool] = {
        "minimum": lambda v: v >= bound,
        "maximum": lambda v: v <= bound,
        "exclusiveMinimum": lambda v: v > bound,
        "exclusiveMaximum": lambda v: v < bound,
    }[key]
    number = _TYPES["number"]
    return lambda value: not number(value) or holds(value)
