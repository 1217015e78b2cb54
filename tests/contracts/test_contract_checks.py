"""Every check kind passes on a good output and fails on a bad one, with a precise failure."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from jobrouter.contracts import (
    CheckSpec,
    Contract,
    check_output,
    run_checks,
    validate_input,
    validate_output,
)
from jobrouter.contracts.checks import json_equal, run_check
from jobrouter.contracts.loader import load_contract

_SPEC = TypeAdapter(CheckSpec)


def spec(**data: Any) -> CheckSpec:
    return _SPEC.validate_python(data)


OUTPUT: dict[str, Any] = {
    "name": "Saffron Tea 50 g",
    "price": {"amount": 12.9, "currency": "EUR"},
    "tags": ["tea", "Gift"],
    "sentiment": "positive",
    "discount": None,
    "count": 3,
    "flag": True,
}

# (spec, an output that passes, an output that fails)
CASES: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    (
        {"type": "equals", "path": "price.currency", "value": "EUR"},
        {"price": {"currency": "EUR"}},
        {"price": {"currency": "USD"}},
    ),
    ({"type": "equals", "path": "count", "value": 3}, {"count": 3.0}, {"count": 4}),
    (
        {"type": "contains", "path": "name", "value": "saffron tea"},
        {"name": "Saffron Tea 50 g"},
        {"name": "Green tea"},
    ),
    (
        {"type": "contains", "path": "name", "value": "saffron", "ignore_case": False},
        {"name": "saffron"},
        {"name": "Saffron"},
    ),
    ({"type": "contains", "path": "tags", "value": "gift"}, {"tags": ["Gift"]}, {"tags": ["tea"]}),
    (
        {"type": "one_of", "path": "sentiment", "values": ["positive", "mixed"]},
        {"sentiment": "mixed"},
        {"sentiment": "negative"},
    ),
    (
        {"type": "one_of", "path": "sentiment", "values": ["positive"], "ignore_case": True},
        {"sentiment": "Positive"},
        {"sentiment": "positives"},
    ),
    (
        {"type": "max_length", "path": "reason", "value": 5},
        {"reason": "short"},
        {"reason": "longer"},
    ),
    ({"type": "max_length", "path": "tags", "value": 1}, {"tags": ["a"]}, {"tags": ["a", "b"]}),
    (
        {"type": "number", "path": "price", "value": 34.30, "tolerance": 0.01},
        {"price": 34.31},
        {"price": 49.0},
    ),
    ({"type": "number", "path": "price", "value": 8}, {"price": 8.0}, {"price": "8"}),
    (
        {"type": "regex", "path": "currency", "pattern": "^[A-Z]{3}$"},
        {"currency": "GBP"},
        {"currency": "£"},
    ),
    (
        {"type": "regex", "path": "currency", "pattern": "^gbp$", "ignore_case": True},
        {"currency": "GBP"},
        {"currency": "GBPX"},
    ),
    (
        {"type": "callable", "path": "price", "function": "math:isfinite"},
        {"price": 1.5},
        {"price": float("inf")},
    ),
    ({"type": "is_null", "path": "price"}, {"price": None}, {"price": 0}),
    ({"type": "not_null", "path": "price"}, {"price": 0}, {"price": None}),
]


@pytest.mark.parametrize(("data", "good", "bad"), CASES, ids=[str(c[0]) for c in CASES])
def test_each_check_passes_on_good_and_fails_on_bad(
    data: dict[str, Any], good: dict[str, Any], bad: dict[str, Any]
) -> None:
    check = spec(**data)
    assert run_check(check, good) is None
    failure = run_check(check, bad)
    assert failure is not None
    assert failure.check == data["type"]
    assert failure.path == data["path"]
    assert failure.expected


def test_every_check_kind_is_covered() -> None:
    kinds = {data["type"] for data, _, _ in CASES}
    assert kinds == {
        "equals",
        "contains",
        "one_of",
        "max_length",
        "number",
        "regex",
        "callable",
        "is_null",
        "not_null",
    }


def test_failure_says_check_path_found_and_expected() -> None:
    failures = run_checks(
        [
            spec(
                type="number", path="price.amount", value=34.3, tolerance=0.01, note="the now price"
            )
        ],
        {"price": {"amount": 49.0}},
    )
    assert [str(f) for f in failures] == [
        "number at price.amount: found 49.0, expected a number 34.3 ± 0.01 (the now price)"
    ]


def test_missing_path_fails_every_kind_with_missing() -> None:
    for data, _, _ in CASES:
        failure = run_check(spec(**{**data, "path": "nowhere.at.all"}), OUTPUT)
        assert failure is not None, data
        assert failure.found == "<missing>"


def test_list_index_paths_and_root_path() -> None:
    assert run_check(spec(type="equals", path="tags.1", value="Gift"), OUTPUT) is None
    assert run_check(spec(type="equals", path="$.tags.0", value="tea"), OUTPUT) is None
    whole = run_check(spec(type="max_length", path="$", value=1), ["a", "b"])
    assert whole is not None and whole.path == "$" and "length 2" in whole.found


def test_bool_is_not_a_number_and_not_one() -> None:
    assert run_check(spec(type="number", path="flag", value=1), OUTPUT) is not None
    assert run_check(spec(type="equals", path="flag", value=1), OUTPUT) is not None
    assert run_check(spec(type="equals", path="flag", value=True), OUTPUT) is None
    assert not json_equal(True, 1)
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})


def test_number_tolerance_boundary_is_inclusive() -> None:
    check = spec(type="number", path="p", value=12.90, tolerance=0.01)
    assert run_check(check, {"p": 12.91}) is None
    assert run_check(check, {"p": 12.89}) is None
    assert run_check(check, {"p": 12.92}) is not None


def test_callable_that_raises_or_returns_non_bool_fails_with_the_error() -> None:
    raising = run_check(spec(type="callable", path="x", function="math:isfinite"), {"x": "abc"})
    assert raising is not None and "raised TypeError" in raising.found
    truthy = run_check(spec(type="callable", path="x", function="builtins:str"), {"x": "abc"})
    assert truthy is not None  # "abc" is truthy but not True
    missing = run_check(spec(type="callable", path="x", function="no_such_mod_zz:f"), {"x": 1})
    assert missing is not None and "ModuleNotFoundError" in missing.found


def test_null_checks_distinguish_missing_from_null() -> None:
    assert run_check(spec(type="is_null", path="discount"), OUTPUT) is None
    assert run_check(spec(type="is_null", path="absent"), OUTPUT) is not None
    assert run_check(spec(type="not_null", path="absent"), OUTPUT) is not None


def test_run_checks_returns_only_failures_in_order() -> None:
    specs = [
        spec(type="equals", path="sentiment", value="positive"),
        spec(type="max_length", path="name", value=3),
        spec(type="is_null", path="count"),
    ]
    assert [f.check for f in run_checks(specs, OUTPUT)] == ["max_length", "is_null"]


def test_validate_output_reports_paths(contract: Contract) -> None:
    assert validate_output(contract, {"sentiment": "positive", "reason": "ok"}) == []
    errors = validate_output(contract, {"sentiment": "great", "reason": 3})
    assert len(errors) == 2
    assert errors[0].startswith("reason: 3 is not of type 'string'")
    assert errors[1].startswith("sentiment: 'great' is not one of")
    assert validate_output(contract, []) == ["$: [] is not of type 'object'"]


def test_validate_input(contract: Contract) -> None:
    assert validate_input(contract, {"review": "fine"}) == []
    assert validate_input(contract, {}) == ["$: 'review' is a required property"]
    no_schema = contract.model_copy(update={"input_schema": None})
    assert validate_input(no_schema, {"anything": 1}) == []


def test_check_output_is_schema_then_checks(contract: Contract) -> None:
    assert check_output(contract, {"sentiment": "positive", "reason": "ok"}) == []
    assert check_output(contract, {"sentiment": "x"})[0].startswith("schema: ")
    too_long = check_output(contract, {"sentiment": "positive", "reason": "x" * 41})
    assert too_long == [
        'max_length at reason: found "'
        + "x" * 41
        + '" (length 41), expected a string or list of length <= 40'
    ]
    extra = check_output(
        contract, {"sentiment": "negative", "reason": "ok"}, extra=contract.case("good").expect
    )
    assert extra == ['equals at sentiment: found "negative", expected "positive"']


def test_an_extra_property_is_refused_where_the_schema_closes_the_object() -> None:
    """`additionalProperties: false` is part of the contract: an output with a key the schema
    does not name must not win. Kills the mutant "schema check ignoring additionalProperties"
    in contracts/checks.py (checked by dropping the keyword from the schema it validates with:
    this test then fails); the provider adapter's own check is tested in test_output.py."""
    contract = load_contract("extract_product")
    assert contract.output_schema.get("additionalProperties") is False
    good = {"name": "Saffron tea", "price": 12.9, "currency": "EUR"}
    assert validate_output(contract, good) == []
    errors = validate_output(contract, {**good, "note": "best seller"})
    assert errors == ["$: Additional properties are not allowed ('note' was unexpected)"]
    [problem] = check_output(contract, {**good, "note": "best seller"})
    assert problem.startswith("schema: ") and "'note' was unexpected" in problem
