"""The spend report (issue 29, "spend in sight"): what attempts used, grouped by owner, task,
provider and UTC day or month over a time range, and each configured budget's use in its
current period. The one place its rules live; `Router.spend` and `Router.budget_uses` call it,
and the CLI (`jobrouter spend`), HTTP (`GET /v1/spend`) and the console call those.

The rules:
- the range is `since` <= an attempt's start < `until`, default this UTC month; a date
  alone is its 00:00 UTC, a time without an offset is UTC (`spend_query`);
- an unknown cost is never summed as 0: a line's `cost_usd` sums the known costs only (None
  when none is known) and `cost_unknown` counts the others (`roll_up`);
- a budget's use is what the ledger holds charged in the period that holds now: reservations
  still in flight and settled actuals, as the door and the starts count it (`budget_uses`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from enum import StrEnum

from jobrouter.budgets import period_at
from jobrouter.config_budgets import BudgetConfig
from jobrouter.errors import SpendQueryInvalid
from jobrouter.models import BudgetUse, SpendLine, SpendReport
from jobrouter.store.spend import SpendLedger
from jobrouter.store.spend_reads import SpendReads, SpendRow


class Group(StrEnum):
    OWNER = "owner"
    TASK = "task"
    PROVIDER = "provider"
    DAY = "day"
    MONTH = "month"


GROUPS = ", ".join(Group)
NAMES = frozenset(str(group) for group in Group)
DEFAULT_BY = (Group.OWNER,)
Moment = str | datetime | date | None
By = str | Iterable[str] | None
NOTHING = SpendLine(attempts=0, tokens=0, cost_usd=0.0, cost_unknown=0)  # nothing started


@dataclass(frozen=True)
class SpendQuery:
    """A checked report query: group keys in order, `since` <= start < `until` (epoch s)."""

    by: tuple[Group, ...]
    since: float
    until: float
    owner: str | None = None


def spend_query(
    *,
    by: By = None,
    since: Moment = None,
    until: Moment = None,
    owner: str | None = None,
    now: float | None = None,
) -> SpendQuery:
    """Check a report query as a caller sent it; SpendQueryInvalid names what is wrong. `by`:
    group names, each possibly a comma list (`"owner,day"`); none: by owner."""
    start, end = month_of(time.time() if now is None else now)
    groups = _groups(by)
    lower = start if since is None else _moment("since", since)
    upper = end if until is None else _moment("until", until)
    if lower >= upper:
        raise SpendQueryInvalid(
            field="until",
            value=f"{_iso(upper)} (since {_iso(lower)})",
            reason="the range is empty: until must be after since",
            hint="send an until later than since (until is exclusive), or leave both out for "
            "this UTC month",
        )
    return SpendQuery(groups, lower, upper, owner or None)


def _groups(by: By) -> tuple[Group, ...]:
    names = [by] if isinstance(by, str) else list(by or [])
    found: list[Group] = []
    for name in (part.strip() for text in names for part in text.split(",")):
        if not name:
            continue
        if name not in NAMES:
            raise SpendQueryInvalid(
                field="by",
                value=repr(name),
                reason="no such group",
                hint=f"group by any of {GROUPS} (several: owner,day)",
            )
        if Group(name) not in found:
            found.append(Group(name))
    if Group.DAY in found and Group.MONTH in found:
        raise SpendQueryInvalid(
            field="by",
            value="day and month",
            reason="a line is one period: a day or a month, not both",
            hint="group by day or by month",
        )
    return tuple(found) or DEFAULT_BY


def _moment(field: str, value: str | datetime | date) -> float:
    try:
        moment = datetime.fromisoformat(value.strip()) if isinstance(value, str) else value
        if not isinstance(moment, datetime):
            moment = datetime(moment.year, moment.month, moment.day)
        epoch = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
        datetime.fromtimestamp(epoch, UTC)  # the report says its range in UTC: it must exist
    except (ValueError, OverflowError):  # not ISO 8601, or a year UTC cannot hold
        raise SpendQueryInvalid(
            field=field,
            value=repr(value if isinstance(value, str) else str(value)),
            reason="not an ISO 8601 date or time of years 1 to 9999 in UTC",
            hint="send a date (2026-12-01: its 00:00 UTC) or a time (2026-12-01T10:00:00Z)",
        ) from None
    return epoch


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def month_of(now: float) -> tuple[float, float]:
    """This UTC month as [start, end) in epoch seconds."""
    moment = datetime.fromtimestamp(now, UTC)
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
    return start.timestamp(), start.replace(year=year, month=month).timestamp()


async def spend(reads: SpendReads, query: SpendQuery) -> SpendReport:
    """The report of `query`: its lines in key order, and their total."""
    rows = await reads.spend_by_day(query.since, query.until, query.owner)
    lines = roll_up(rows, query.by)
    everything = roll_up(rows, ())
    return SpendReport(
        since=datetime.fromtimestamp(query.since, UTC),
        until=datetime.fromtimestamp(query.until, UTC),
        by=[str(group) for group in query.by],
        owner=query.owner,
        lines=lines,
        total=everything[0] if everything else NOTHING,
    )


@dataclass
class _Sum:
    attempts: int = 0
    tokens: int = 0
    cost_usd: float | None = None  # None until a known cost is added: unknown is not 0
    cost_unknown: int = 0

    def add(self, row: SpendRow) -> None:
        self.attempts += row.attempts
        self.tokens += row.tokens
        self.cost_unknown += row.cost_unknown
        if row.cost_usd is not None:
            self.cost_usd = row.cost_usd + (self.cost_usd or 0.0)


def roll_up(rows: Sequence[SpendRow], by: Sequence[Group]) -> list[SpendLine]:
    """The day rows added up per key of `by` (empty: one line of everything), in key order."""
    sums: dict[tuple[str, ...], _Sum] = {}
    for row in rows:
        key = tuple(_key(row, group) for group in by)
        sums.setdefault(key, _Sum()).add(row)
    lines = []
    for key, total in sorted(sums.items()):
        keys = dict(zip((str(group) for group in by), key, strict=True))
        period = keys.pop(Group.DAY, None) or keys.pop(Group.MONTH, None)
        lines.append(
            SpendLine(
                **keys,
                period=period,
                attempts=total.attempts,
                tokens=total.tokens,
                cost_usd=total.cost_usd,
                cost_unknown=total.cost_unknown,
            )
        )
    return lines


def _key(row: SpendRow, group: Group) -> str:
    if group is Group.DAY:
        return datetime.fromtimestamp(row.day, UTC).strftime("%Y-%m-%d")
    if group is Group.MONTH:
        return datetime.fromtimestamp(row.day, UTC).strftime("%Y-%m")
    value: str = getattr(row, group.value)
    return value


async def budget_uses(
    ledger: SpendLedger,
    budgets: Mapping[str, BudgetConfig],
    *,
    owner: str | None = None,
    now: float | None = None,
) -> list[BudgetUse]:
    """Each budget's use in the period that holds `now`, in name order; with `owner`, only
    the budgets that cap that owner (the others' use tells of other owners' spend)."""
    moment = time.time() if now is None else now
    names = sorted(name for name, b in budgets.items() if owner is None or _caps(b, owner))
    spans = {name: period_at(budgets[name], moment) for name in names}
    rolling = {name for name in names if budgets[name].period == "rolling"}  # the window's sum
    charged = await ledger.charged([(name, spans[name].start) for name in names], rolling)
    return [
        _use(name, budgets[name], spans[name].start, spans[name].end, charged[name])
        for name in names
    ]


def _caps(budget: BudgetConfig, owner: str) -> bool:
    return budget.scope == "owner" and budget.owner == owner


def _use(
    name: str, budget: BudgetConfig, start: float, end: float, charged: tuple[float, int]
) -> BudgetUse:
    usd, tokens = charged
    return BudgetUse(
        budget=name,
        scope=budget.scope,
        covers=budget.covers,
        period=budget.period,
        period_start=datetime.fromtimestamp(start, UTC),
        period_end=datetime.fromtimestamp(end, UTC),
        limit_usd=budget.usd,
        limit_tokens=budget.tokens,
        charged_usd=usd,
        charged_tokens=tokens,
        remaining_usd=None if budget.usd is None else max(0.0, budget.usd - usd),
        remaining_tokens=None if budget.tokens is None else max(0, budget.tokens - tokens),
    )
