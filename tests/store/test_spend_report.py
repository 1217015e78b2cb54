"""The spend report through the public `Router` on every backend (issue 29, "spend in sight"):
real jobs run by the router's workers on fake providers that report their use (one priced,
one whose price is unknown), summed by owner, task, provider and UTC day or month; an unknown
cost counted and never summed as 0; the range's bounds (since included, until excluded, a UTC
day boundary); one owner's report holding only that owner's jobs; and each budget's use."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from jobrouter import Router
from jobrouter.budgets import period_at
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from jobrouter.models import Job, SpendLine
from jobrouter.providers import Completion, CompletionRequest, Usage
from jobrouter.states import JobState
from tests.support.fakes import FakeProvider

SETTLE = 60.0  # a guard against a hang only
PER_TOKEN = 1e-6  # $1 per million tokens, in and out
PROMPT, COMPLETION = 12, 8  # what each fake reports
COST = (PROMPT + COMPLETION) * PER_TOKEN
NO_PRICE = "model 'openai/unpriced' is not in litellm's cost map"
DAY = 86_400


@dataclass
class Reporting(FakeProvider):
    """A fake that reports its use; `priced`: with the cost the configured price gives, else
    with the cost unknown and why (as a provider without a price records it)."""

    priced: bool = True

    async def complete(self, request: CompletionRequest) -> Completion:
        answer = await super().complete(request)
        if self.priced:
            usage = Usage(
                prompt_tokens=PROMPT,
                completion_tokens=COMPLETION,
                cost_usd=COST,
                cost_source="config",
            )
        else:
            usage = Usage(prompt_tokens=PROMPT, completion_tokens=COMPLETION, cost_unknown=NO_PRICE)
        return answer.model_copy(update={"usage": usage})


def config(budgets: dict[str, Any] | None = None) -> RouterConfig:
    task = {"side_effects": "none", "certification": "none"}
    return RouterConfig.model_validate(
        {
            "providers": {
                "priced": {
                    "model": "openai/fake",
                    "price": {"input_usd_per_million": 1, "output_usd_per_million": 1},
                },
                "unpriced": {"model": "openai/unpriced"},
            },
            "tasks": {
                "caption": TaskConfig(providers=["priced"], **task),
                "reply": TaskConfig(providers=["unpriced"], **task),
            },
            "budgets": budgets or {},
            "engine": EngineConfig(poll_interval=0.05, sweep_interval=0.1, claim=5.0, lease=5.0),
        }
    )


@asynccontextmanager
async def opened(db_url: str, cfg: RouterConfig | None = None) -> AsyncIterator[Router]:
    providers = {"priced": Reporting("priced"), "unpriced": Reporting("unpriced", priced=False)}
    async with Router.open(db_url, cfg or config(), providers=providers) as router:
        yield router


async def run(router: Router, owner: str, key: str, task: str = "caption") -> Job:
    job = await router.submit(owner, key, task, {"product": "tea"}, {"max_tokens": 40})
    done = await router.wait(job.id, timeout=SETTLE)
    assert done.state is JobState.SUCCEEDED, done
    return done


async def run_shops(router: Router) -> None:
    """shop-1: two captions (priced) and a reply (unknown price); shop-2: one caption."""
    await run(router, "shop-1", "c1")
    await run(router, "shop-1", "c2")
    await run(router, "shop-1", "r1", task="reply")
    await run(router, "shop-2", "c1")


def line(owner: str | None, task: str | None, provider: str | None, n: int, **kw: Any) -> SpendLine:
    return SpendLine(
        owner=owner,
        task=task,
        provider=provider,
        attempts=n,
        tokens=n * (PROMPT + COMPLETION),
        cost_usd=kw.get("cost", n * COST),
        cost_unknown=kw.get("unknown", 0),
        period=kw.get("period"),
    )


def approx(lines: list[SpendLine]) -> list[dict[str, Any]]:
    return [
        {**x.model_dump(), "cost_usd": None if x.cost_usd is None else pytest.approx(x.cost_usd)}
        for x in lines
    ]


async def move_start(router: Router, job: Job, started_at: float) -> None:
    """Put the job's attempt's start at `started_at`: a day boundary, without waiting for one."""
    async with router.store.connector.write() as tx:
        await tx.execute(
            "UPDATE attempts SET started_at = :at WHERE job_id = :job_id",
            {"at": started_at, "job_id": job.id},
        )


async def test_lines_sum_known_costs_and_count_unknown_ones(db_url: str) -> None:
    """By owner, task and provider: each line's attempts, tokens and cost; the reply's cost is
    unknown: counted in `cost_unknown`, its `cost_usd` null, and the total's cost holds only
    the known ones. Mutants killed: `_Sum.add` adding an unknown cost as 0 (`(row.cost_usd or
    0.0) + ...`: the reply's line says $0); `SUM(COALESCE(a.cost_usd, 0))` in spend_by_day
    (the same, from the store; each dialect's statement)."""
    async with opened(db_url) as router:
        await run_shops(router)
        report = await router.spend(by="owner,task,provider")
    assert report.by == ["owner", "task", "provider"]
    assert approx(report.lines) == approx(
        [
            line("shop-1", "caption", "priced", 2),
            line("shop-1", "reply", "unpriced", 1, cost=None, unknown=1),
            line("shop-2", "caption", "priced", 1),
        ]
    )
    assert approx([report.total]) == approx([line(None, None, None, 4, cost=3 * COST, unknown=1)])


async def test_a_report_by_provider_adds_up_the_owners(db_url: str) -> None:
    """One key: the other keys' rows are added up in Python. Mutant killed: the roll-up keyed
    by every column (`by` ignored: three lines, one per owner and task)."""
    async with opened(db_url) as router:
        await run_shops(router)
        report = await router.spend(by=["provider"])
    assert approx(report.lines) == approx(
        [
            line(None, None, "priced", 3),
            line(None, None, "unpriced", 1, cost=None, unknown=1),
        ]
    )


async def test_an_owners_report_holds_its_jobs_only(db_url: str) -> None:
    """Mutant killed: spend_by_day's owner condition dropped (`OR 1 = 1`: shop-1's spend in
    shop-2's report), on each dialect's statement."""
    async with opened(db_url) as router:
        await run_shops(router)
        report = await router.spend(by="owner,task", owner="shop-2")
    assert report.owner == "shop-2"
    assert approx(report.lines) == approx([line("shop-2", "caption", None, 1)])
    assert report.total.attempts == 1


async def test_a_day_boundary_splits_the_lines_and_bounds_the_range(db_url: str) -> None:
    """Two attempts a second apart across a UTC midnight: two days, one month. `since` holds
    its own moment, `until` does not. Mutants killed: `a.started_at < :until` written `<=`
    (the midnight attempt counted in the range that ends there); `>= :since` written `>`
    (it is left out of the range that starts there); PostgreSQL's `spend_day` without
    `floor` (CAST rounds: the 23:59:59 attempt counted on the next day)."""
    midnight = float(int(time.time()) // DAY * DAY) - 10 * DAY
    async with opened(db_url) as router:
        before = await run(router, "shop-1", "late")
        after = await run(router, "shop-1", "early")
        await move_start(router, before, midnight - 1)
        await move_start(router, after, midnight)
        days = [
            datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d") for t in (midnight - 1, midnight)
        ]
        span = {
            "since": datetime.fromtimestamp(midnight - DAY, UTC),
            "until": datetime.fromtimestamp(midnight + DAY, UTC),
        }
        by_day = await router.spend(by="day", **span)
        by_month = await router.spend(by="month", **span)
        from_midnight = await router.spend(
            by="day", since=datetime.fromtimestamp(midnight, UTC), until=span["until"]
        )
        to_midnight = await router.spend(
            by="day", since=span["since"], until=datetime.fromtimestamp(midnight, UTC)
        )
    assert approx(by_day.lines) == approx(
        [line(None, None, None, 1, period=days[0]), line(None, None, None, 1, period=days[1])]
    )
    months = sorted({d[:7] for d in days})
    assert [(x.period, x.attempts) for x in by_month.lines] == (
        [(months[0], 2)] if len(months) == 1 else [(months[0], 1), (months[1], 1)]
    )
    assert [(x.period, x.attempts) for x in from_midnight.lines] == [(days[1], 1)]
    assert [(x.period, x.attempts) for x in to_midnight.lines] == [(days[0], 1)]


async def test_the_default_range_is_this_utc_month(db_url: str) -> None:
    """An attempt started last month is not in the default report; this month's is.
    Mutant killed: the default `since` at 0 (every attempt ever)."""
    now = time.time()
    month_start = datetime.fromtimestamp(now, UTC).replace(
        day=1, hour=0, minute=0, second=0, microsecond=0
    )
    async with opened(db_url) as router:
        old = await run(router, "shop-1", "old")
        await run(router, "shop-1", "new")
        await move_start(router, old, month_start.timestamp() - 1)
        report = await router.spend()
    assert report.since == month_start
    assert report.until > datetime.fromtimestamp(now, UTC)
    assert [(x.owner, x.attempts) for x in report.lines] == [("shop-1", 1)]


async def test_each_budget_shows_its_use_this_period(db_url: str) -> None:
    """The owner budget's charge is what its settled attempts used; the global one holds
    both owners; asked for shop-2, only shop-2's own budget shows. Mutant killed: the owner
    filter of `budget_uses` dropped (shop-1's and the global budget in shop-2's view)."""
    budgets = {
        "shop1_daily": {"owner": "shop-1", "period": "day", "tokens": 10_000},
        "shop2_month": {"owner": "shop-2", "period": "month", "usd": 5.0},
        "everything": {"period": "month", "tokens": 1_000_000},
    }
    async with opened(db_url, config(budgets)) as router:
        await run(router, "shop-1", "c1")
        await run(router, "shop-2", "c1")
        uses = {use.budget: use for use in await router.budget_uses()}
        mine = await router.budget_uses(owner="shop-2")
    used = PROMPT + COMPLETION
    day = period_at(router.config.budgets["shop1_daily"], time.time())
    shop1 = uses["shop1_daily"]
    assert (shop1.scope, shop1.covers, shop1.period) == ("owner", "shop-1", "day")
    assert (shop1.charged_tokens, shop1.remaining_tokens, shop1.limit_usd) == (
        used,
        10_000 - used,
        None,
    )
    assert shop1.period_start.timestamp() == day.start and shop1.period_end.timestamp() == day.end
    assert uses["everything"].charged_tokens == 2 * used
    assert uses["shop2_month"].charged_usd == pytest.approx(COST)
    assert uses["shop2_month"].remaining_usd == pytest.approx(5.0 - COST)
    assert [use.budget for use in mine] == ["shop2_month"]
