"""`[tasks.NAME] order = "cost"` through the public `Router`, on every backend: three providers
configured in one order and priced in another are tried cheapest first and failed over in price
order (an unknown price last), whether the first attempt starts as the job is created or in a
worker's claim; a task without `order` keeps the configured order."""

from __future__ import annotations

from typing import Any

from jobrouter import Router
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from jobrouter.models import Job
from jobrouter.providers import NotSent
from jobrouter.states import JobState
from tests.support.fakes import FakeProvider, Step

SETTLE = 60.0  # a guard against a hang only


def priced(usd_in: float, usd_out: float) -> dict[str, Any]:
    return {
        "model": "openai/fake",
        "price": {"input_usd_per_million": usd_in, "output_usd_per_million": usd_out},
    }


def config(**task: Any) -> RouterConfig:
    return RouterConfig.model_validate(
        {
            # configured x, y, z; priced z ($2 a million in + out) < x ($6) < y (unknown:
            # `openai/no-such-model` is in no price list)
            "providers": {
                "x": priced(2, 4),
                "y": {"model": "openai/no-such-model"},
                "z": priced(1.5, 0.5),
            },
            "tasks": {
                "caption": TaskConfig(
                    providers=["x", "y", "z"], side_effects="none", certification="none", **task
                )
            },
            "engine": EngineConfig(poll_interval=0.05, sweep_interval=0.1, claim=5.0, lease=5.0),
        }
    )


def providers() -> dict[str, FakeProvider]:
    """x and z refuse every call (nothing sent: the job fails over), y answers."""

    def refusing(name: str) -> FakeProvider:
        return FakeProvider(name, default=Step(error=NotSent("refused", provider=name)))

    return {"x": refusing("x"), "y": FakeProvider("y"), "z": refusing("z")}


async def tried(router: Router, job: Job) -> list[str]:
    done = await router.wait(job.id, timeout=SETTLE)
    assert done.state is JobState.SUCCEEDED, done.error
    return [a.provider for a in sorted(await router.attempts(job.id), key=lambda a: a.seq)]


async def test_cost_order_tries_the_cheapest_first_and_fails_over_by_price(db_url: str) -> None:
    """Created and started at once, the job goes z, then x, then y (unknown price last).
    Mutants seen failing: build's order ignoring `order` (x, y: config order); an unknown price
    sorted first (y alone); the sort reversed (y, then nothing: it answers)."""
    async with Router.open(db_url, config(order="cost"), providers=providers()) as router:
        assert router.tasks["caption"].policy.providers == ("z", "x", "y")
        job = await router.submit("shop-1", "k1", "caption", {"product": "tea"})
        assert await tried(router, job) == ["z", "x", "y"]


async def test_a_claimed_job_is_tried_in_price_order_too(db_url: str) -> None:
    """Submitted where no worker runs (queued, no attempt), then claimed by a router with
    workers: its first attempt, chosen in the claim, is the cheapest too. Mutant seen failing:
    build's order ignoring `order`."""
    cfg = config(order="cost")
    async with Router.open(db_url, cfg, providers=providers(), run_workers=False) as router:
        job = await router.submit("shop-1", "k1", "caption", {"product": "tea"})
        assert job.state is JobState.QUEUED
        assert await router.attempts(job.id) == []
    async with Router.open(db_url, cfg, providers=providers()) as router:
        assert await tried(router, job) == ["z", "x", "y"]


async def test_without_order_the_configured_order_holds(db_url: str) -> None:
    """The default is the configured order whatever the prices: x (refused), then y answers.
    Mutant seen failing: `order` defaulting to "cost" (z first)."""
    async with Router.open(db_url, config(), providers=providers()) as router:
        assert router.tasks["caption"].policy.providers == ("x", "y", "z")
        job = await router.submit("shop-1", "k1", "caption", {"product": "tea"})
        assert await tried(router, job) == ["x", "y"]
