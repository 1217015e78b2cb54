"""A worker's claim that waits on the server (router/store/server_waits.py) decides on what
holds once its wait is over, not on what it read before: the eligibility of providers (I5)
and its free slots. Decided on events: the wait running on the server, the job's own events
and attempts; each guard is a ceiling against a hang."""

from __future__ import annotations

import asyncio
import time as real_time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import asyncpg
import pytest

from jobrouter import Router
from jobrouter.config import BreakerConfig, DatabaseConfig, EngineConfig, RouterConfig, TaskConfig
from jobrouter.providers.errors import ProviderError
from jobrouter.states import JobState
from jobrouter.store import server_waits
from tests.store.pg import ADMIN_URL, fresh_database
from tests.store.test_postgres_server_waits import (
    BEFORE_BOUND_S,
    BOUND_S,
    GUARD_S,
    active,
    ignore,
    no_first,
    running,
    settled_read,
    submit,
)
from tests.store.test_postgres_wakeups import opened
from tests.support.claiming import claim_runnable
from tests.support.fakes import FakeProvider, Step

pytestmark = pytest.mark.postgres

# The job's driver ran or its claim started an attempt: either leaves a trace.
DECIDED = (
    "SELECT (SELECT count(*) FROM attempts WHERE job_id = $1) "
    "+ (SELECT count(*) FROM job_events WHERE job_id = $1 AND kind = 'job.waiting')"
)


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


async def decided(url: str, job_id: str) -> list[str]:
    """Once the job got an attempt or was parked: the providers of its attempts."""
    conn = await asyncpg.connect(url)
    try:
        async with asyncio.timeout(GUARD_S):
            while not await conn.fetchval(DECIDED, job_id):  # noqa: ASYNC110 (no event for it)
                await asyncio.sleep(0.02)
        rows = await conn.fetch("SELECT provider FROM attempts WHERE job_id = $1", job_id)
        return [row["provider"] for row in rows]
    finally:
        await conn.close()


async def test_a_circuit_opened_while_the_claim_waits_gets_no_first_attempt(
    pg_url: str,
) -> None:
    """I5: the claim's wait began with provider `a`'s circuit closed; it opened during the
    wait. The job the wait finds is claimed, but no first attempt goes to `a`."""
    task = TaskConfig(providers=["a"], side_effects="none", certification="none")
    cfg = RouterConfig(
        tasks={"caption": task},
        engine=EngineConfig(poll_interval=40.0),
        database=DatabaseConfig(command_timeout=40.0),
        breaker=BreakerConfig(failure_threshold=1),
    )
    router = await Router.open(pg_url, cfg, providers={"a": FakeProvider("a")})
    try:
        assert router.engine is not None
        async with opened(pg_url) as submitter:
            await running(pg_url, "jobrouter_await_runnable")
            failure = ProviderError("down", provider="a", counts_against_health=True)
            await router.engine.health.record("a", failure)
            job = await submit(submitter, "k1")
            assert await decided(pg_url, job.id) == []
    finally:
        await router.close()


async def test_slots_taken_while_the_claim_waits_are_not_claimed_for(pg_url: str) -> None:
    """One worker slot, free when the claim's wait began; a job submitted here takes it during
    the wait. The job another process submits, which ends the wait, is left unclaimed for an
    idle worker elsewhere: not claimed into this worker's queue behind a slot it lacks."""
    release = asyncio.Event()
    provider = FakeProvider("a", steps=[Step(output={"text": "ok"}, release=release)])
    task = TaskConfig(providers=["a"], side_effects="none", certification="none")
    cfg = RouterConfig(
        tasks={"caption": task},
        engine=EngineConfig(workers=1, poll_interval=40.0),
        database=DatabaseConfig(command_timeout=40.0),
    )
    router = await Router.open(pg_url, cfg, providers={"a": provider})
    try:
        async with opened(pg_url) as submitter:
            await running(pg_url, "jobrouter_await_runnable")
            await router.submit("shop", "here", "caption", {"k": "here"})
            async with asyncio.timeout(GUARD_S):
                while provider.in_flight == 0:  # noqa: ASYNC110 (the provider's own count)
                    await asyncio.sleep(0.01)
            job = await submit(submitter, "k1")
            await ended(pg_url)  # it found the job and locked it for its claim
            conn = await asyncpg.connect(pg_url)
            try:
                async with asyncio.timeout(GUARD_S), conn.transaction():
                    claimed_by = await conn.fetchval(  # once the claim has committed
                        "SELECT claimed_by FROM jobs WHERE id = $1 FOR UPDATE", job.id
                    )
            finally:
                await conn.close()
            assert claimed_by is None
    finally:
        release.set()
        await router.close()


async def ended(url: str) -> None:
    """Return once no statement calling jobrouter_await_runnable runs on the server."""
    async with asyncio.timeout(GUARD_S):
        while await active(url, "jobrouter_await_runnable"):  # noqa: ASYNC110 (no event)
            await asyncio.sleep(0.01)


async def test_waiting_reads_see_commits_under_a_repeatable_read_default(pg_url: str) -> None:
    """The waits look again inside one statement, which sees new commits only under READ
    COMMITTED: a database whose default is REPEATABLE READ must not blind them. The waiting
    read of settled jobs returns a settle committed during its wait; the waiting claim takes
    a job submitted during its."""
    admin = await asyncpg.connect(ADMIN_URL)
    try:
        name = urlsplit(pg_url).path[1:]
        await admin.execute(
            f"ALTER DATABASE \"{name}\" SET default_transaction_isolation = 'repeatable read'"
        )
    finally:
        await admin.close()
    plain = await asyncpg.connect(pg_url)  # the default took: a connection without ours
    try:
        assert await plain.fetchval("SHOW transaction_isolation") == "repeatable read"
    finally:
        await plain.close()
    async with opened(pg_url) as store, opened(pg_url) as elsewhere:
        job = await submit(elsewhere, "k1")
        reading = asyncio.create_task(settled_read(store, [job.id], BOUND_S))
        await running(pg_url, "jobrouter_await_settled")
        await elsewhere.jobs.settle_job(job.id, JobState.FAILED, error="elsewhere")
        async with asyncio.timeout(BEFORE_BOUND_S):
            rows = await reading
        assert [row["id"] for row in rows] == [job.id]
        claiming = asyncio.create_task(
            claim_runnable(store.jobs, "w1", 60.0, 10, no_first, ignore, wait_s=BOUND_S)
        )
        await running(pg_url, "jobrouter_await_runnable")
        other = await submit(elsewhere, "k2")
        async with asyncio.timeout(BEFORE_BOUND_S):
            claimed = await claiming
        assert [item.job.id for item in claimed] == [other.id]


class SteppedBack:
    """`time` for router/store/server_waits.py: the client's clock as it is when the wait
    begins, then stepped back an hour (NTP correcting a clock that ran ahead)."""

    def __init__(self) -> None:
        self.calls = 0

    def time(self) -> float:
        self.calls += 1
        return real_time.time() - (0.0 if self.calls == 1 else 3600.0)


async def test_a_clock_stepped_back_during_the_wait_still_claims_the_job_found(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait found the job runnable at its own time (the client's clock when it began plus
    the time waited); the claim takes it at that time, not at the client's clock read again,
    an hour behind, which would leave it locked but unclaimed (the worker would loop)."""
    clock = SteppedBack()
    monkeypatch.setattr(server_waits, "time", clock)
    async with opened(pg_url) as worker, opened(pg_url) as submitter:
        claiming = asyncio.create_task(
            claim_runnable(worker.jobs, "w1", 60.0, 10, no_first, ignore, wait_s=BOUND_S)
        )
        await running(pg_url, "jobrouter_await_runnable")
        job = await submit(submitter, "k1")
        async with asyncio.timeout(BEFORE_BOUND_S):
            claimed = await claiming
    assert clock.calls >= 2  # the clock was read again after the wait, stepped back
    assert [item.job.id for item in claimed] == [job.id]
