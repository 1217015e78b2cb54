"""Issue 27: a healthy provider is never suspended. 5,000 jobs through a certified provider
(a fault server behind the native transport) that breaks its JSON on 2% of its answers, with
inputs of many lengths (the prompt count compared against the golden runs on every one), run
50 at a time on a real SQLite store with the router's own leader folding: the provider stays
in the pool, and its failed answers fail over to the backup."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from jobrouter import Router
from jobrouter.config import (
    CertificationConfig,
    DatabaseConfig,
    EngineConfig,
    RouterConfig,
    TaskConfig,
    WatchConfig,
)
from jobrouter.providers.config import ProviderConfig
from jobrouter.states import JobState
from tests.acceptance.test_live_watch import (
    GOOD,
    SETTLE_S,
    SYSTEM_CONTRACT,
    certify_all,
    drifting,
)
from tests.providers.fault_server import FaultServer, start_fault_server

JOBS = 5000
AT_ONCE = 50
WORDS = ("mug", "teapot", "saffron", "linen", "scarf", "candle", "ceramic", "blue", "wool")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, FaultServer]]:
    with ExitStack() as stack:
        yield {name: stack.enter_context(start_fault_server()) for name in ("A", "B")}


def config(tmp_path: Path, servers: dict[str, FaultServer]) -> RouterConfig:
    contract = tmp_path / "titles.yaml"
    contract.write_text(SYSTEM_CONTRACT)
    providers = {
        name: ProviderConfig(
            model="openai/fault-model",
            api_base=server.api_base,
            context_window=2048,
            transport="openai",
        )
        for name, server in servers.items()
    }
    return RouterConfig(
        database=DatabaseConfig(url=f"sqlite:///{tmp_path / 'jobs.db'}"),
        providers=providers,
        tasks={"title": TaskConfig(contract=str(contract), providers=["A", "B"])},
        engine=EngineConfig(poll_interval=0.05, sweep_interval=0.5),
        certification=CertificationConfig(watch=WatchConfig(interval=0.2)),
    )


def product(rng: random.Random) -> str:
    return "Blue " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))


async def test_a_provider_at_its_baseline_runs_5000_jobs_unsuspended(
    tmp_path: Path, servers: dict[str, FaultServer]
) -> None:
    for server in servers.values():
        server.reset(content=GOOD)
    cfg = config(tmp_path, servers)
    await certify_all(cfg)
    servers["A"].control(reset=True, content=GOOD, sequence=drifting(0.02, JOBS + 500, seed=5))
    rng = random.Random(9)
    async with Router.open(config=cfg) as router:

        async def one(i: int) -> JobState:
            job = await router.submit("shop", f"k{i}", "title", {"product": product(rng)})
            return (await router.wait(job.id, timeout=SETTLE_S)).state

        for start in range(0, JOBS, AT_ONCE):
            states = await asyncio.gather(*(one(i) for i in range(start, start + AT_ONCE)))
            assert set(states) == {JobState.SUCCEEDED}
        assert await router.store.certifications.list_suspensions() == {}
        watch = (await router.store.live_watch.watches()).get(("A", "titles"))
    assert watch is not None
    assert watch.answered >= JOBS * 0.9  # folded (the last fold may be on its way)
    assert 0 < watch.failed < watch.answered * 0.05
    assert watch.rendering_checked == watch.answered  # every count compared
    assert watch.rendering_off == 0
