"""`[budgets]` as configured and as data: what a budget must say, which budgets cover an
attempt, and a budget's period at a moment (UTC calendar days and months, rolling windows)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from jobrouter.budgets import ROLLING_BUCKETS, Span, covering, period_at
from jobrouter.config import RouterConfig
from jobrouter.config_budgets import BudgetConfig

PROVIDERS = {"primary": {"model": "openai/a"}, "backup": {"model": "openai/b"}}
TASKS = {"caption": {"providers": ["primary", "backup"], "certification": "none"}}


def _at(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()  # type: ignore[misc]


def _config(**budgets: dict[str, Any]) -> RouterConfig:
    return RouterConfig.model_validate({"providers": PROVIDERS, "tasks": TASKS, "budgets": budgets})


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"owner": "a", "task": "caption", "period": "day", "usd": 1}, "owner and task"),
        ({"owner": "a", "period": "day"}, "needs a cap"),
        ({"period": "rolling", "usd": 1}, "needs window"),
        ({"period": "month", "window": 60, "usd": 1}, "remove window"),
        ({"period": "week", "usd": 1}, "period"),
        ({"period": "day", "usd": 0}, "greater than 0"),
    ],
)
def test_a_budget_says_one_scope_a_cap_and_a_period(fields: dict[str, Any], says: str) -> None:
    """Mutants killed: each validator of BudgetConfig removed (two scopes in one budget, no
    cap, rolling without its window, a window on a calendar period), a zero cap allowed."""
    with pytest.raises(ValidationError) as caught:
        BudgetConfig.model_validate(fields)
    assert says in str(caught.value)


def test_the_scope_is_what_the_budget_names() -> None:
    assert BudgetConfig(owner="a", period="day", usd=1).scope == "owner"
    assert BudgetConfig(task="t", period="day", tokens=5).scope == "task"
    assert BudgetConfig(provider="p", period="day", usd=1).scope == "provider"
    assert BudgetConfig(period="rolling", window=60, usd=1).scope == "global"


@pytest.mark.parametrize(
    ("budget", "says"),
    [
        ({"task": "summary", "period": "day", "usd": 1}, "budgets.b.task names 'summary'"),
        ({"provider": "third", "period": "day", "usd": 1}, "budgets.b.provider names 'third'"),
    ],
)
def test_a_budget_names_a_configured_task_or_provider(budget: dict[str, Any], says: str) -> None:
    """Mutant killed: the names left unchecked (a typo'd provider's budget would cap nothing)."""
    with pytest.raises(ValidationError) as caught:
        _config(b=budget)
    assert says in str(caught.value)


def test_a_budgets_name_is_a_label() -> None:
    """Mutant killed: any name allowed (it becomes a metric label and a problem's field)."""
    with pytest.raises(ValidationError) as caught:
        _config(**{"Shop 1!": {"owner": "a", "period": "day", "usd": 1}})
    assert "lowercase letters" in str(caught.value)


def test_calendar_and_rolling_budgets_load() -> None:
    """Both are held by the ledger (a rolling window in buckets: jobrouter.budgets). Mutant
    seen failing: the load-time refusal of rolling budgets put back."""
    loaded = _config(
        shop1_daily={"owner": "shop-1", "period": "day", "usd": 5},
        hourly={"period": "rolling", "window": 3600, "usd": 5},
    )
    assert loaded.budgets["shop1_daily"].usd == 5
    assert loaded.budgets["hourly"].window == 3600


@pytest.mark.parametrize(
    ("now", "start", "end"),
    [
        (_at(2026, 12, 3, 13, 45), _at(2026, 12, 3), _at(2026, 12, 4)),
        (_at(2026, 12, 3), _at(2026, 12, 3), _at(2026, 12, 4)),  # midnight opens a day
        (_at(2026, 12, 31, 23, 59, 59), _at(2026, 12, 31), _at(2027, 1, 1)),
        (_at(2028, 2, 28, 12), _at(2028, 2, 28), _at(2028, 2, 29)),
    ],
)
def test_a_day_is_the_utc_calendar_day(now: float, start: float, end: float) -> None:
    """Mutant killed: the day's end taken as start + 86400 of the local clock's midnight."""
    assert period_at(BudgetConfig(period="day", usd=1), now) == Span(start, end)


@pytest.mark.parametrize(
    ("now", "start", "end"),
    [
        (_at(2026, 12, 3, 13, 45), _at(2026, 12, 1), _at(2027, 1, 1)),  # December rolls over
        (_at(2028, 2, 29, 23), _at(2028, 2, 1), _at(2028, 3, 1)),  # a leap February
        (_at(2026, 3, 1), _at(2026, 3, 1), _at(2026, 4, 1)),
    ],
)
def test_a_month_is_the_utc_calendar_month(now: float, start: float, end: float) -> None:
    """Mutant killed: December's next month taken as month 13 (ValueError) or as January of the
    same year."""
    assert period_at(BudgetConfig(period="month", usd=1), now) == Span(start, end)


def test_a_rolling_period_is_its_bucket_and_the_buckets_before_it() -> None:
    """An hour's window in 60 one-minute buckets aligned on the epoch: at 10,030 s the charge
    goes into the bucket of 10,020 s, and the window is the 60 buckets up to it (6,480 s to
    10,080 s); it ends (Retry-After) when the bucket does. Mutants seen failing: the window
    counted forward from now; one bucket too many in the window; the bucket not aligned."""
    budget = BudgetConfig(period="rolling", window=3600, usd=1)
    span = period_at(budget, 10_030.0)
    assert span == Span(6_480.0, 10_080.0, 10_020.0)
    assert span.row == 10_020.0
    assert period_at(budget, 10_079.999) == span  # the same bucket: the same floats
    assert period_at(budget, 10_080.0).bucket == 10_080.0
    assert (span.bucket - span.start) / 60 + 1 == ROLLING_BUCKETS


def test_a_calendar_period_charges_its_one_row() -> None:
    span = period_at(BudgetConfig(period="day", usd=1), 10_030.0)
    assert span.bucket is None and span.row == span.start == 0.0


BUDGETS = {
    "everything": BudgetConfig(period="month", usd=100),
    "shop1": BudgetConfig(owner="shop-1", period="day", usd=5),
    "shop2": BudgetConfig(owner="shop-2", period="day", usd=5),
    "captions": BudgetConfig(task="caption", period="day", tokens=10_000),
    "primary": BudgetConfig(provider="primary", period="rolling", window=60, usd=1),
}


def test_an_attempt_counts_against_every_budget_that_covers_it_in_name_order() -> None:
    """Mutants killed: a scope left out of the match; the names unsorted (two workers locking
    the same counters in different orders could deadlock)."""
    found = covering(BUDGETS, owner="shop-1", task="caption", provider="primary")
    assert found == ["captions", "everything", "primary", "shop1"]
    assert covering(BUDGETS, owner="shop-2", task="summary", provider="backup") == [
        "everything",
        "shop2",
    ]


def test_a_submit_is_held_against_no_provider_budget() -> None:
    """At the door no provider is chosen: a provider's budget lets the job go on to another
    certified provider, so it cannot refuse the job. Mutant killed: provider None matching
    every provider budget."""
    assert covering(BUDGETS, owner="shop-1", task="caption", provider=None) == [
        "captions",
        "everything",
        "shop1",
    ]
