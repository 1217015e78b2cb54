"""Budgets on a job's path, through the public `Router` on every backend: each start reserves
its worst case (the job started as it is created, a claimed job's driver, a driver's next
attempt), a refused start holds back what the budget covers (a provider budget fails over, an
owner budget ends the job or waits by `on_budget`), a budget that cannot hold the attempt says
how to fix it, and a submit whose budget has nothing left is refused at the door (also over
HTTP: 429 with Retry-After), while a replay under its key still gets its job."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from jobrouter import Router
from jobrouter.budgets import period_at
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from jobrouter.errors import BudgetExhausted
from jobrouter.http.app import create_app
from jobrouter.models import Job
from jobrouter.providers import Completion, CompletionRequest, Usage
from jobrouter.spending import prompt_bytes
from jobrouter.states import JobState
from jobrouter.store.spend import Hold, Reservation, charge_in
from tests.support.fakes import FakeProvider, Step
from tests.support.waiting import until

SETTLE = 60.0  # a guard against a hang only
PER_TOKEN = 1e-6  # $1 per million tokens, in and out: a provider's configured price
MAX_TOKENS = 40
PROMPT_TOKENS, COMPLETION_TOKENS = 12, 8  # what the fake reports: well under the worst case


@dataclass
class PricedFake(FakeProvider):
    """A fake that reports its usage and prices it as the configured price says."""

    async def complete(self, request: CompletionRequest) -> Completion:
        answer = await super().complete(request)
        usage = Usage(
            prompt_tokens=PROMPT_TOKENS,
            completion_tokens=COMPLETION_TOKENS,
            cost_usd=(PROMPT_TOKENS + COMPLETION_TOKENS) * PER_TOKEN,
            cost_source="config",
        )
        return answer.model_copy(update={"usage": usage})


def config(budgets: Mapping[str, dict[str, Any]], **task: Any) -> RouterConfig:
    priced = {
        "model": "openai/fake",
        "price": {"input_usd_per_million": 1, "output_usd_per_million": 1},
    }
    return RouterConfig.model_validate(
        {
            "providers": {"a": priced, "b": priced},
            "tasks": {
                "caption": TaskConfig(
                    providers=["a", "b"], side_effects="none", certification="none", **task
                )
            },
            "budgets": budgets,
            "engine": EngineConfig(poll_interval=0.05, sweep_interval=0.1, claim=5.0, lease=5.0),
        }
    )


@asynccontextmanager
async def opened(
    db_url: str, cfg: RouterConfig, *, run_workers: bool = True, **fakes: FakeProvider
) -> AsyncIterator[Router]:
    providers = {"a": PricedFake("a"), "b": PricedFake("b"), **fakes}
    async with Router.open(db_url, cfg, providers=providers, run_workers=run_workers) as router:
        yield router


async def submit(router: Router, key: str = "k1", **params: Any) -> Job:
    return await router.submit(
        "shop-1", key, "caption", {"product": "tea"}, {"max_tokens": MAX_TOKENS, **params}
    )


def worst_tokens(router: Router) -> int:
    """What an attempt of `submit`'s job reserves in tokens: the prompt's bound + max_tokens."""
    request = router.tasks["caption"].build_request({"product": "tea"}, {"max_tokens": MAX_TOKENS})
    return prompt_bytes(request) + MAX_TOKENS


async def ledger(router: Router, budget: str) -> dict[str, float]:
    rows = [p for p in await router.store.spend.periods() if p.budget == budget]
    assert len(rows) == 1, rows
    return {k: getattr(rows[0], k) for k in ("charged_tokens", "reserved_tokens", "actual_tokens",
                                             "charged_usd", "actual_usd")}  # fmt: skip


async def fill(router: Router, budget: str, tokens: int) -> None:
    """Charge `tokens` to `budget`'s current period through the ledger itself."""
    cfg = router.config.budgets[budget]
    hold = Hold(budget, period_at(cfg, time.time()).start, cfg.usd, cfg.tokens)
    async with router.store.connector.write() as tx:
        assert (
            await charge_in(router.store.connector.queries, tx, Reservation((hold,), 0, tokens))
            is None
        )


async def settled(router: Router, job: Job) -> Job:
    return await router.wait(job.id, timeout=SETTLE)


OWNER = {"shop": {"owner": "shop-1", "period": "day", "tokens": 100_000}}


async def test_a_covered_job_reserves_its_worst_case_then_settles_to_what_it_used(
    db_url: str,
) -> None:
    """The job started as it is created charges its worst case with its attempt row, and the
    end moves the charge to the reported use. Mutant killed: `_first_start` building the start
    without its reservation (nothing charged: the ledger has no period)."""
    async with opened(db_url, config(OWNER)) as router:
        job = await submit(router)
        assert job.state is JobState.RUNNING  # started in the creating transaction
        assert (await settled(router, job)).state is JobState.SUCCEEDED
        spent = await ledger(router, "shop")
        used = PROMPT_TOKENS + COMPLETION_TOKENS
        assert spent["reserved_tokens"] == worst_tokens(router)
        assert spent["actual_tokens"] == spent["charged_tokens"] == used
        [attempt] = await router.attempts(job.id)
        assert spent["actual_usd"] == pytest.approx(attempt.cost_usd)


async def test_a_claimed_job_is_reserved_by_its_driver(db_url: str) -> None:
    """A job accepted without workers is claimed later: the claim does not start it (it has
    no request to size the worst case), its driver does, with the reservation. Mutant killed:
    the claim's chooser starting a covered job without a reservation (the ledger is empty)."""
    cfg = config(OWNER)
    async with opened(db_url, cfg, run_workers=False) as router:
        job = await submit(router)
        assert job.state is JobState.QUEUED
    async with opened(db_url, cfg) as router:
        assert (await settled(router, job)).state is JobState.SUCCEEDED
        spent = await ledger(router, "shop")
        assert spent["reserved_tokens"] == worst_tokens(router)
        assert spent["actual_tokens"] == PROMPT_TOKENS + COMPLETION_TOKENS


async def test_a_crossed_provider_budget_fails_over_to_the_next_provider(db_url: str) -> None:
    """A budget on provider `a` too small for one attempt: `a` is never called, the job runs on
    `b`, and the job's log says why `a` was skipped. Mutant killed: a provider budget holding
    back every provider (the job fails)."""
    cfg = config({"a_cap": {"provider": "a", "period": "day", "tokens": 10}})
    a, b = PricedFake("a"), PricedFake("b")
    async with opened(db_url, cfg, a=a, b=b) as router:
        done = await settled(router, await submit(router))
        assert done.state is JobState.SUCCEEDED
        assert a.calls == [] and len(b.calls) == 1
        skipped = [e for e in await router.events(job_id=done.id) if e.kind == "provider.skipped"]
        assert [e.data["provider"] for e in skipped] == ["a"]
        assert "budget a_cap" in str(skipped[0].data["reason"])


async def test_a_crossed_owner_budget_fails_the_job_naming_the_budget(db_url: str) -> None:
    """`on_budget = "fail"` (the default): nothing is sent, the job fails naming the budget
    and its cap. Mutant killed: the driver's `except BudgetCrossed` removed (the driver dies,
    the job is never settled)."""
    cfg = config({"shop": {"owner": "shop-1", "period": "day", "tokens": 10}})
    a, b = PricedFake("a"), PricedFake("b")
    async with opened(db_url, cfg, a=a, b=b) as router:
        done = await settled(router, await submit(router))
        assert done.state is JobState.FAILED
        assert "budget shop" in (done.error or "") and "tokens cap of 10" in (done.error or "")
        assert a.calls == [] and b.calls == [] and await router.attempts(done.id) == []


async def test_on_budget_wait_waits_for_room_and_then_runs(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`on_budget = "wait"`: a job whose worst case does not fit while another's reservation
    is held waits (noted on its log), and runs once that one settles below its worst case.
    Mutant killed: `wait` treated as `fail` (the second job fails)."""
    monkeypatch.setattr("jobrouter.spending.RECHECK_S", 0.1)
    release = asyncio.Event()
    a = PricedFake("a", steps=[Step(release=release, output={"text": "first"})])
    async with opened(db_url, config({}), run_workers=False) as sizing:
        worst = worst_tokens(sizing)
    budgets = {"shop": {"owner": "shop-1", "period": "day", "tokens": worst + worst // 2}}
    async with opened(db_url, config(budgets, on_budget="wait"), a=a) as router:
        first = await submit(router, "k1")
        second = await submit(router, "k2")

        async def waiting() -> bool:
            return any(e.kind == "job.waiting" for e in await router.events(second.id))

        await until(waiting, "the second job waits for room", SETTLE, every=0.02)
        assert (await router.get(second.id)).state is JobState.QUEUED
        release.set()
        assert (await settled(router, first)).state is JobState.SUCCEEDED
        assert (await settled(router, second)).state is JobState.SUCCEEDED
        assert (await ledger(router, "shop"))["charged_tokens"] == 2 * (
            PROMPT_TOKENS + COMPLETION_TOKENS
        )


async def test_a_budget_that_cannot_hold_the_attempt_fails_it_with_the_fix(db_url: str) -> None:
    """No max_tokens: the worst case is unbounded, so the start is refused (never let through
    uncharged) and the job fails with what to set; waiting would not fix it. Mutant killed:
    the driver reserving None when the budget cannot hold (the job succeeds uncharged)."""
    async with opened(db_url, config(OWNER, on_budget="wait")) as router:
        job = await router.submit("shop-1", "k1", "caption", {"product": "tea"})
        done = await settled(router, job)
        assert done.state is JobState.FAILED
        assert "max_tokens" in (done.error or "")


async def test_a_spent_budget_refuses_new_work_at_the_door_but_not_a_replay(db_url: str) -> None:
    """A budget charged to its cap refuses a submit with nothing written, naming the budget,
    its cap, its spend and when to come back; a replay of a job accepted before still returns
    it. Mutants killed: the comparison `spent >= limit` made `>` (a budget charged exactly to
    its cap lets work in), and the replay guard removed (the replay is refused)."""
    cfg = config({"shop": {"owner": "shop-1", "period": "day", "tokens": 5000}})
    async with opened(db_url, cfg, run_workers=False) as router:
        before = await submit(router, "k1")
        await fill(router, "shop", 5000)
        with pytest.raises(BudgetExhausted) as refused:
            await submit(router, "k2")
        assert (refused.value.budget, refused.value.side) == ("shop", "tokens")
        assert refused.value.limit == 5000 and refused.value.spent == 5000
        assert 0 < refused.value.retry_after <= 86_400
        assert await router.find("shop-1", "k2") is None
        assert (await submit(router, "k1")).id == before.id
        other = await router.submit(
            "shop-2", "k2", "caption", {"product": "tea"}, {"max_tokens": 4}
        )
        assert other.created  # another owner's budget is not this one


async def test_over_http_a_spent_budget_is_a_429_with_retry_after(db_url: str) -> None:
    """The HTTP edge maps the refusal by its type: 429, Retry-After to the period's end, and
    the budget, side, limit and spend in the problem. Mutant killed: BudgetExhausted mapped as
    any JobRefused (422, no Retry-After)."""
    cfg = config({"shop": {"owner": "shop-1", "period": "day", "tokens": 100}})
    async with opened(db_url, cfg, run_workers=False) as router:
        await fill(router, "shop", 100)
        token, _ = await router.store.tokens.create_token("shop-1")
        transport = httpx.ASGITransport(app=create_app(router))
        async with httpx.AsyncClient(transport=transport, base_url="http://jobrouter") as client:
            answer = await client.post(
                "/v1/jobs",
                json={"task": "caption", "input": {"product": "tea"}, "params": {"max_tokens": 4}},
                headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "k9"},
            )
        assert answer.status_code == 429, answer.text
        body = answer.json()
        assert body["type"].endswith(":budget-exhausted")
        assert (body["budget"], body["side"], body["limit"], body["spent"]) == (
            "shop",
            "tokens",
            100,
            100,
        )
        assert 1 <= int(answer.headers["Retry-After"]) <= 86_400
        assert math.isfinite(float(answer.headers["Retry-After"]))
