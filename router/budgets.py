"""Budgets as data: which budgets cover an attempt, and what a budget's period is at a moment.

Pure functions of the configured budgets (`jobrouter.config_budgets`) and a clock, so the
rules are unit-tested without a store. A calendar period is UTC's day or month, `[start, end)`;
a rolling one is the `window` seconds before the moment, and ends (for a refusal's
Retry-After) when the window has passed over what it holds, at most `window` seconds later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from jobrouter.config_budgets import BudgetConfig


@dataclass(frozen=True)
class Span:
    """A budget's period at a moment: spend charged at `start` <= t < `end` counts."""

    start: float  # epoch seconds
    end: float


def period_at(budget: BudgetConfig, now: float) -> Span:
    """The period of `budget` that holds `now` (epoch seconds)."""
    if budget.period == "rolling":
        assert budget.window is not None  # BudgetConfig refuses rolling without a window
        return Span(now - budget.window, now + budget.window)
    moment = datetime.fromtimestamp(now, UTC)
    if budget.period == "day":
        start = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        end = datetime.fromordinal(start.toordinal() + 1).replace(tzinfo=UTC)
        return Span(start.timestamp(), end.timestamp())
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
    return Span(start.timestamp(), start.replace(year=year, month=month).timestamp())


def covering(
    budgets: Mapping[str, BudgetConfig], *, owner: str, task: str, provider: str | None
) -> list[str]:
    """The names of the budgets an attempt of `owner`'s job of `task` on `provider` counts
    against (provider None: a submit, before any provider is chosen: the provider budgets
    are left out), in name order (the order their counters are locked in, so two workers
    never wait on each other's)."""
    found = []
    for name, budget in budgets.items():
        scope = budget.scope
        if (
            scope == "global"
            or (scope == "owner" and budget.owner == owner)
            or (scope == "task" and budget.task == task)
            or (scope == "provider" and provider is not None and budget.provider == provider)
        ):
            found.append(name)
    return sorted(found)
