"""Agreement of repeated runs: the share agreeing with the most common value of `agree_on`."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrouter.contracts.agreement import agreement_key, measure_agreement, meets


def test_two_of_three_agree() -> None:
    outputs = [{"s": "positive", "r": "a"}, {"s": "positive", "r": "b"}, {"s": "mixed", "r": "a"}]
    result = measure_agreement(outputs, ["s"], 0.67)
    assert (result.agreeing, result.runs, result.passed) == (2, 3, True)
    assert result.share == pytest.approx(2 / 3)
    assert result.value == '[{"value":"positive"}]'
    assert not measure_agreement(outputs, ["s"], 0.9).passed


def test_agree_on_several_paths_uses_the_tuple() -> None:
    outputs = [
        {"price": 12.9, "currency": "EUR"},
        {"price": 12.9, "currency": "USD"},
        {"price": 12.9, "currency": "EUR"},
    ]
    assert measure_agreement(outputs, ["price"], 1.0).passed
    both = measure_agreement(outputs, ["price", "currency"], 1.0)
    assert (both.agreeing, both.passed) == (2, False)


def test_empty_agree_on_means_the_whole_output() -> None:
    outputs = [{"s": "positive", "r": "a"}, {"s": "positive", "r": "b"}]
    assert measure_agreement(outputs, [], 1.0).agreeing == 1
    assert measure_agreement(outputs, ["$"], 1.0).agreeing == 1


def test_failed_runs_count_against_agreement() -> None:
    result = measure_agreement([{"s": "a"}, {"s": "a"}], ["s"], 0.67, runs=3)
    assert (result.agreeing, result.runs, result.passed) == (2, 3, True)
    result = measure_agreement([{"s": "a"}], ["s"], 0.67, runs=3)
    assert result.passed is False
    assert measure_agreement([], ["s"], 0.0, runs=3).passed is False
    with pytest.raises(ValueError, match="less than"):
        measure_agreement([{}, {}], ["s"], 0.5, runs=1)


def test_key_is_canonical_and_distinguishes_missing_from_null() -> None:
    assert agreement_key({"a": {"y": 1, "x": 2}}, ["a"]) == agreement_key(
        {"a": {"x": 2, "y": 1}}, ["a"]
    )
    assert agreement_key({"a": None}, ["a"]) != agreement_key({}, ["a"])
    assert agreement_key({"a": 1}, ["a"]) != agreement_key({"a": "1"}, ["a"])


def test_whole_percent_comparison() -> None:
    assert meets(2 / 3, 0.67)
    assert not meets(2 / 3, 0.68)
    assert meets(1.0, 1.0)
    assert not meets(0.5, 0.51)


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["a", "b"]))
outputs_strategy = st.lists(
    st.fixed_dictionaries({"s": json_scalars, "n": json_scalars}), max_size=12
)


@given(outputs=outputs_strategy, extra_runs=st.integers(0, 4), threshold=st.floats(0, 1))
def test_share_is_the_most_common_count_over_runs(
    outputs: list[dict[str, Any]], extra_runs: int, threshold: float
) -> None:
    runs = len(outputs) + extra_runs
    result = measure_agreement(outputs, ["s"], threshold, runs=runs)
    keys = Counter(agreement_key(o, ["s"]) for o in outputs)
    expected = max(keys.values(), default=0)
    assert result.agreeing == expected
    assert 0.0 <= result.share <= 1.0
    if runs:
        assert result.share == expected / runs
    assert result.passed == (expected > 0 and runs > 0 and meets(expected / runs, threshold))


@given(outputs=outputs_strategy.filter(bool), data=st.data())
def test_agreement_ignores_order(outputs: list[dict[str, Any]], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(outputs))
    first = measure_agreement(outputs, ["s", "n"], 0.5)
    second = measure_agreement(shuffled, ["s", "n"], 0.5)
    assert (first.agreeing, first.share, first.passed) == (
        second.agreeing,
        second.share,
        second.passed,
    )


@given(value=json_scalars, runs=st.integers(1, 10), threshold=st.floats(0, 1))
def test_unanimous_runs_always_pass(value: Any, runs: int, threshold: float) -> None:
    result = measure_agreement([{"s": value}] * runs, ["s"], threshold)
    assert result.passed and result.share == 1.0


@given(agreeing=st.integers(0, 20), runs=st.integers(1, 20), threshold=st.floats(0, 1))
def test_meets_is_monotonic_in_share(agreeing: int, runs: int, threshold: float) -> None:
    agreeing = min(agreeing, runs)
    if meets(agreeing / runs, threshold) and agreeing < runs:
        assert meets((agreeing + 1) / runs, threshold)
    if agreeing / runs >= threshold:
        assert meets(agreeing / runs, threshold)  # never stricter than the plain comparison
