"""Issue 27 on PostgreSQL with two routers on one database (each with its own pool, engine,
leader campaign and gate, as two `jobrouter worker` processes have): the answers one router
gets are evidence for the whole fleet, the leader (whichever it is) suspends the drifting
provider, and the other router's gate, at its next refresh, refuses it too."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jobrouter import Router
from jobrouter.config import (
    CertificationConfig,
    EngineConfig,
    LeaderConfig,
    RouterConfig,
    TaskConfig,
    WatchConfig,
)
from jobrouter.states import JobState
from jobrouter.store import SqlStore
from tests.store.pg import fresh_database
from tests.store.test_gate_forget import certify
from tests.support.fakes import FakeProvider, Step
from tests.support.waiting import until

pytestmark = pytest.mark.postgres
SETTLE_S = 30.0


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


def config() -> RouterConfig:
    return RouterConfig(
        tasks={"caption": TaskConfig(contract="caption", providers=["a", "b"])},
        engine=EngineConfig(poll_interval=0.05, sweep_interval=0.2),
        leader=LeaderConfig(heartbeat=0.5),
        certification=CertificationConfig(watch=WatchConfig(interval=0.05)),
    )


async def test_one_routers_evidence_suspends_the_provider_for_the_other(pg_url: str) -> None:
    broken = FakeProvider(name="a", default=Step(output={"text": ""}))  # breaks minLength
    backup = FakeProvider(name="b", default=Step(output={"text": "Warm saffron tea"}))
    providers = {"a": broken, "b": backup}
    async with (
        Router.open(pg_url, config(), providers=providers) as first,
        Router.open(pg_url, config(), providers=providers) as second,
    ):
        fingerprint = first.tasks["caption"].contract_fingerprint
        assert fingerprint is not None
        for provider in (broken, backup):
            await certify(first.store, provider, fingerprint)
        first.gate.forget()
        second.gate.forget()

        async def suspended() -> bool:
            suspensions = await second.store.certifications.list_suspensions()
            return ("a", "caption") in suspensions

        jobs = 0
        while not await suspended():  # every job through the first router only
            assert jobs < 40, "a was never suspended"
            job = await first.submit(
                "shop", f"k{jobs}", "caption", {"product": {"name": "t"}, "tone": "warm"}
            )
            job = await first.wait(job.id, timeout=SETTLE_S)
            assert job.state is JobState.SUCCEEDED, job.error  # a failed, b took it
            jobs += 1
        # each answer of `a` fails: the fast CUSUM fires in a handful. Counted by the
        # suspension's own evidence, not by the jobs run meanwhile: jobs go on while the
        # leader's next fold is due (12 jobs were seen under CI's load for a handful folded)
        suspension = (await second.store.certifications.list_suspensions())[("a", "caption")]
        assert suspension.answered <= 10 and suspension.failed == suspension.answered
        second.gate.forget()  # its next refresh (2 s), without the wait
        refused = (await second.gate.eligibility(second.tasks["caption"]))["a"]
        assert not refused.ok and "suspended for contract 'caption'" in refused.reason
        calls = len(broken.calls)
        job = await second.submit(
            "shop", "after", "caption", {"product": {"name": "t"}, "tone": "warm"}
        )
        job = await second.wait(job.id, timeout=SETTLE_S)
        assert job.state is JobState.SUCCEEDED
        assert len(broken.calls) == calls  # the second router did not try `a`
        await until(lambda: no_pending(second.store), "the fold of every verdict")


async def no_pending(store: SqlStore) -> bool:
    return await store.live_watch.pending(1) == []
