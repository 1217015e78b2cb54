"""Spend on `/metrics`, on every backend: after real jobs through the public `Router`, the spend
counters scraped from `/metrics` equal the attempts' stored costs and tokens, per task and
provider (and never by owner); attempts whose cost is unknown are counted as such, never as $0;
and each budget's gauges show what the ledger holds for its current period, and its caps."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from jobrouter import Router
from jobrouter.budgets import period_at
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from jobrouter.http.app import create_app
from jobrouter.models import Attempt
from jobrouter.providers import Completion, CompletionRequest, NotSent, Usage
from jobrouter.states import JobState
from tests.support.fakes import FakeProvider, Step

SETTLE = 60.0  # a guard against a hang only
SPEND = ("jobrouter_spend_usd", "jobrouter_prompt_tokens", "jobrouter_completion_tokens")
UNKNOWN = "jobrouter_attempts_cost_unknown"
PRICE = {"input_usd_per_million": 2, "output_usd_per_million": 2}  # a's, the dearest
Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class Metered(FakeProvider):
    """A fake that reports `prompt` + `completion` tokens, priced at `per_token` USD each;
    `per_token` None: a model with no price (the cost is unknown, with its reason)."""

    prompt: int = 10
    completion: int = 5
    per_token: float | None = 1e-6

    async def complete(self, request: CompletionRequest) -> Completion:
        answer = await super().complete(request)
        cost = None if self.per_token is None else (self.prompt + self.completion) * self.per_token
        usage = Usage(
            prompt_tokens=self.prompt,
            completion_tokens=self.completion,
            cost_usd=cost,
            cost_source=None if cost is None else "config",
            cost_unknown="no price for fake/model" if cost is None else None,
        )
        return answer.model_copy(update={"usage": usage})


def config(**budgets: dict[str, Any]) -> RouterConfig:
    task = {"side_effects": "none", "certification": "none"}
    return RouterConfig.model_validate(
        {
            "providers": {
                "a": {"model": "openai/fake", "price": PRICE},
                "b": {"model": "openai/fake", "price": PRICE},
                "c": {"model": "openai/fake"},  # no price: a USD budget cannot cover it
            },
            "tasks": {
                "metered": TaskConfig(providers=["a", "b"], **task),
                "summed": TaskConfig(providers=["c", "b"], **task),
            },
            "budgets": budgets,
            "engine": EngineConfig(poll_interval=0.05, sweep_interval=0.1, claim=5.0, lease=5.0),
        }
    )


def providers() -> dict[str, FakeProvider]:
    down = NotSent("connection refused", provider="a")
    return {
        # a's first call is refused (an attempt with no answer: cost unknown), then it answers
        "a": Metered("a", steps=[Step(error=down)], prompt=11, completion=7, per_token=2e-6),
        "b": Metered("b", prompt=13, completion=3, per_token=5e-7),
        "c": Metered("c", prompt=17, completion=2, per_token=None),  # no price
    }


def parse(text: str) -> Series:
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def scrape(router: Router) -> Series:
    transport = httpx.ASGITransport(app=create_app(router))
    async with httpx.AsyncClient(transport=transport, base_url="http://jobrouter") as client:
        answer = await client.get("/metrics")
    assert answer.status_code == 200, answer.text
    return parse(answer.text)


def spend_of(series: Series) -> Series:
    """The spend series (by task and provider), whatever other tests counted before."""
    return {
        key: value
        for key, value in series.items()
        if key[0].removesuffix("_total") in (*SPEND, UNKNOWN)
        and dict(key[1]).get("task") in ("metered", "summed")
    }


def stored(attempts: list[tuple[str, Attempt]]) -> Series:
    """What the attempts' rows say, as the counters should count it."""
    want: Series = defaultdict(float)
    for task, attempt in attempts:
        labels = (("provider", attempt.provider), ("task", task))
        want[("jobrouter_prompt_tokens_total", labels)] += attempt.prompt_tokens or 0
        want[("jobrouter_completion_tokens_total", labels)] += attempt.completion_tokens or 0
        if attempt.cost_usd is None:
            want[(UNKNOWN + "_total", labels)] += 1
        else:
            want[("jobrouter_spend_usd_total", labels)] += attempt.cost_usd
    return dict(want)


def delta(before: Series, after: Series) -> Series:
    return {key: value - before.get(key, 0.0) for key, value in after.items()}


async def run_jobs(router: Router) -> list[tuple[str, Attempt]]:
    jobs = [
        await router.submit("shop-1", "k1", "metered", {"p": 1}, {"max_tokens": 40}),
        await router.submit("shop-2", "k2", "metered", {"p": 2}, {"max_tokens": 40}),
        await router.submit("shop-1", "k3", "summed", {"p": 3}, {"max_tokens": 40}),
    ]
    ended = []
    for job in jobs:
        assert (await router.wait(job.id, timeout=SETTLE)).state is JobState.SUCCEEDED
        ended += [(job.task, attempt) for attempt in await router.attempts(job.id)]
    return ended


def assert_close(got: Series, want: Series) -> None:
    assert set(got) >= set(want), sorted(set(want) - set(got))
    for key, value in want.items():
        assert math.isclose(got[key], value, rel_tol=1e-9, abs_tol=1e-15), (key, got[key], value)
    extra = {key: value for key, value in got.items() if key not in want and value}
    assert not extra, extra


async def test_spend_counters_equal_the_attempts_stored_costs(db_url: str) -> None:
    """Every ended attempt's stored USD and tokens are on /metrics, by task and provider, and
    an attempt whose cost is unknown is counted as unknown, not as $0. Mutants seen failing:
    record_spend not called from record_attempt; the USD counter's task label given the
    provider's name; an unknown cost counted into jobrouter_spend_usd as $0 (`cost_usd or 0.0`,
    the `is None` branch and jobrouter_attempts_cost_unknown gone)."""
    async with Router.open(db_url, config(), providers=providers()) as router:
        before = spend_of(await scrape(router))
        ended = await run_jobs(router)
        after = spend_of(await scrape(router))
    states = sorted((task, a.provider, a.state.value, a.cost_usd is None) for task, a in ended)
    assert states == [  # the run the assertions below cover: each kind of end at least once
        ("metered", "a", "failed", True),
        ("metered", "a", "succeeded", False),
        ("metered", "b", "succeeded", False),
        ("summed", "c", "succeeded", True),
    ], states
    assert_close(delta(before, after), stored(ended))
    labels = {name for _, key in after for name, _ in key}
    assert labels == {"task", "provider"}, labels


async def test_budget_gauges_show_the_ledger_and_the_caps(db_url: str) -> None:
    """Each budget's gauges equal its current period's row in the ledger, and its caps; a cap
    the budget does not set is not shown. Mutants seen failing: the charge read from the
    wrong period (period_at's start replaced by 0.0); the token cap set into the USD cap
    gauge; the USD cap gauge set (to 0) for a budget without a USD cap; the /metrics route not
    calling collect_budgets."""
    cfg = config(
        metered_usd={"task": "metered", "period": "day", "usd": 5.0},
        shop1_tokens={"owner": "shop-1", "period": "month", "tokens": 100_000},
    )
    async with Router.open(db_url, cfg, providers=providers()) as router:
        await run_jobs(router)
        now = time.time()
        shown = await scrape(router)  # the /metrics route sets them as it is scraped
        rows = {p.budget: p for p in await router.store.spend.periods()}
    for name, budget in cfg.budgets.items():
        row = rows[name]
        assert row.period_start == period_at(budget, now).start
        assert row.charged_tokens > 0, row  # the jobs did charge it
        labels = (("budget", name),)
        assert shown[("jobrouter_budget_charged_usd", labels)] == row.charged_usd
        assert shown[("jobrouter_budget_charged_tokens", labels)] == row.charged_tokens
    assert shown[("jobrouter_budget_cap_usd", (("budget", "metered_usd"),))] == 5.0
    assert shown[("jobrouter_budget_cap_tokens", (("budget", "shop1_tokens"),))] == 100_000
    assert ("jobrouter_budget_cap_usd", (("budget", "shop1_tokens"),)) not in shown
    assert ("jobrouter_budget_cap_tokens", (("budget", "metered_usd"),)) not in shown
