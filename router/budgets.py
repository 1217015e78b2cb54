"""Budgets as data: which budgets cover an attempt, and what a budget's period is at a moment.

Pure functions of the configured budgets (`jobrouter.config_budgets`) and a clock, so the
rules are unit-tested without a store. A calendar period is UTC's day or month, `[start, end)`,
counted in one ledger row. A rolling window is counted in `ROLLING_BUCKETS` buckets of
`window / ROLLING_BUCKETS` seconds, aligned on the epoch, one ledger row each: a charge goes
into the bucket of its moment, and the window at a moment is that bucket and the ones before
it, `ROLLING_BUCKETS` in all (the ledger counts any bucket ahead of it too: a clock that runs
ahead charged it). So the cap holds over any `window - window / ROLLING_BUCKETS` seconds, and
nothing older than `window` counts: the window, rounded to a bucket. Its end (a refusal's
Retry-After) is the end of the current bucket, when the oldest one leaves it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from jobrouter.config_budgets import BudgetConfig

ROLLING_BUCKETS = 60  # a rolling window's buckets: an hour's window counts by the minute


@dataclass(frozen=True)
class Span:
    """A budget's period at a moment: spend charged at `start` <= t < `end` counts. `bucket`:
    a rolling window's bucket of the moment, the ledger row a charge now goes into (the rows
    from `start` to it are the window); None for a calendar period (its one row, `start`)."""

    start: float  # epoch seconds
    end: float
    bucket: float | None = None

    @property
    def row(self) -> float:
        """The ledger row (its `period_start`) a charge at the moment goes into."""
        return self.start if self.bucket is None else self.bucket


def period_at(budget: BudgetConfig, now: float) -> Span:
    """The period of `budget` that holds `now` (epoch seconds)."""
    if budget.period == "rolling":
        assert budget.window is not None  # BudgetConfig refuses rolling without a window
        width = budget.window / ROLLING_BUCKETS
        index = math.floor(now / width)
        # each bound as index * width, the way every bucket's start is computed: the same
        # bucket is the same float, whichever moment of it made it
        return Span((index - ROLLING_BUCKETS + 1) * width, (index + 1) * width, index * width)
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
