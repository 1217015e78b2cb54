"""Issue 29's property, on every backend: 1,000 jobs submitted at once to two routers that
both run workers on one database, against one budget far smaller than the jobs' worst cases.
While they run, a reader samples the ledger; at the end every job is settled, and:

- reserved spend never exceeded the budget (every sample, and the end);
- actual spend never exceeded what was reserved, attempt by attempt and in total;
- every call a provider got was reserved first (calls = attempts holding a reservation), and
  the ledger's actual is the sum of the attempts' reported use;
- a job the budget stopped failed naming it, with nothing sent; a submit refused at the door
  wrote nothing.

Mutant killed: the driver's start given `reservation=None` (calls outnumber the holds, and
the budget is overshot). Measured: 6 s for both backends on this machine.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from jobrouter import Router
from jobrouter.errors import BudgetExhausted
from jobrouter.models import Job
from jobrouter.states import JobState
from tests.store.test_budget_jobs import (
    COMPLETION_TOKENS,
    MAX_TOKENS,
    PROMPT_TOKENS,
    PricedFake,
    config,
    worst_tokens,
)
from tests.support.fakes import Step

JOBS = 1000
SETTLE = 300.0  # a guard against a hang only


async def submit_all(routers: list[Router], keys: list[str]) -> tuple[list[Job], int]:
    async def one(i: int, key: str) -> Job | None:
        try:
            return await routers[i % 2].submit(
                "shop-1", key, "caption", {"product": "tea"}, {"max_tokens": MAX_TOKENS}
            )
        except BudgetExhausted:
            return None

    made = await asyncio.gather(*(one(i, key) for i, key in enumerate(keys)))
    jobs = [job for job in made if job is not None]
    return jobs, len(made) - len(jobs)


@pytest.mark.timeout(600)
async def test_a_thousand_jobs_on_two_routers_never_overshoot_the_budget(db_url: str) -> None:
    rng = random.Random(29)
    fakes = [
        PricedFake(name, default=Step(delay=0.0, output={"text": "ok"})) for name in ("a", "b")
    ]
    delays = [rng.uniform(0.0, 0.02) for _ in range(JOBS)]

    async def jitter(_: Any) -> None:
        await asyncio.sleep(delays.pop() if delays else 0.0)

    for fake in fakes:
        fake.on_call = jitter
    async with Router.open(db_url, config({}), run_workers=False) as sizing:
        worst = worst_tokens(sizing)
    cap = 60 * worst  # room for 60 worst cases at once; the jobs' actual use is 1,000 x 20
    cfg = config({"all": {"period": "day", "tokens": cap}})
    providers = {"a": fakes[0], "b": fakes[1]}
    async with (
        Router.open(db_url, cfg, providers=providers) as one,
        Router.open(db_url, cfg, providers=providers) as two,
    ):
        samples: list[int] = []
        done = asyncio.Event()

        async def sample() -> None:
            while not done.is_set():
                samples.extend(p.charged_tokens for p in await one.store.spend.periods())
                await asyncio.sleep(0.005)

        sampler = asyncio.create_task(sample())
        jobs, refused = await submit_all([one, two], [f"k{i}" for i in range(JOBS)])
        settled = await asyncio.gather(*(one.wait(job.id, timeout=SETTLE) for job in jobs))
        done.set()
        await sampler

        [period] = await one.store.spend.periods()
        holds = await one.store.connector.fetchall(
            "SELECT h.attempt_id, h.tokens, a.prompt_tokens, a.completion_tokens "
            "FROM budget_holds h JOIN attempts a ON a.id = h.attempt_id",
            {},
        )
        attempts = await one.store.connector.fetchall("SELECT id FROM attempts", {})

    assert samples and max(samples) <= cap
    assert period.charged_tokens <= cap
    used = [h["prompt_tokens"] + h["completion_tokens"] for h in holds]
    assert all(u <= h["tokens"] for u, h in zip(used, holds, strict=True))
    assert period.actual_tokens == sum(used) <= period.reserved_tokens
    calls = sum(len(fake.calls) for fake in fakes)
    assert calls == len(holds) == len(attempts)  # no call without its reservation
    succeeded = [job for job in settled if job.state is JobState.SUCCEEDED]
    failed = [job for job in settled if job.state is JobState.FAILED]
    assert len(succeeded) + len(failed) == len(jobs) and len(jobs) + refused == JOBS
    assert len(succeeded) == calls and period.actual_tokens == calls * (
        PROMPT_TOKENS + COMPLETION_TOKENS
    )
    assert all("budget all" in (job.error or "") for job in failed)
    assert failed or refused, "the budget never bound: the test proves nothing"
    print(
        f"\n{db_url.split(':')[0]}: {len(succeeded)} succeeded, {len(failed)} stopped by the "
        f"budget, {refused} refused at the door; peak charged {max(samples)} of {cap}"
    )
