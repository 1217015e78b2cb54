"""2,000 intents through a proxy that loses 2.5% of answers after the server acted on them and
cuts 1% of requests before: the client's retries (same key every time) end with exactly one
job per intent, counted in the database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from jobrouter.client import JobClient, JobIntent, RetryPolicy
from jobrouter.models import Job
from tests.acceptance.conftest import Server
from tests.support.flaky_proxy import FlakyProxy

INTENTS = 2000
CONCURRENCY = 32
OWNER = "flaky"


@pytest.fixture
async def proxy(server: Server) -> AsyncIterator[FlakyProxy]:
    flaky = FlakyProxy(server.port, cut_before=0.01, drop_after=0.025, seed=7)
    await flaky.start()
    try:
        yield flaky
    finally:
        await flaky.close()


async def test_two_thousand_intents_through_a_lossy_network_make_two_thousand_jobs(
    server: Server, proxy: FlakyProxy
) -> None:
    token = server.token(OWNER)
    intents = [JobIntent("echo", {"text": f"intent {n}", "n": n}) for n in range(INTENTS)]
    retry = RetryPolicy(attempts=12, initial=0.01, cap=0.25, deadline=30)
    slots = asyncio.Semaphore(CONCURRENCY)

    async with JobClient(f"http://127.0.0.1:{proxy.port}", token, retry=retry) as client:

        async def submit(intent: JobIntent) -> Job:
            async with slots:
                return await client.submit(intent)

        jobs = await asyncio.gather(*(submit(intent) for intent in intents))

    replays = sum(not job.created for job in jobs)
    print(f"\nproxy: {proxy.stats}; replayed answers: {replays}")
    assert proxy.stats.dropped_after > 0 and proxy.stats.cut_before > 0
    assert replays >= proxy.stats.dropped_after // 2  # lost answers came back as replays
    assert len({job.id for job in jobs}) == INTENTS
    for intent, job in zip(intents, jobs, strict=True):
        assert job.idempotency_key == intent.idempotency_key and job.input == intent.input
    total = server.count("SELECT COUNT(*) FROM jobs WHERE owner = ?", OWNER)
    distinct = server.count("SELECT COUNT(DISTINCT input) FROM jobs WHERE owner = ?", OWNER)
    duplicates = total - distinct
    print(f"jobs in the database: {total}, duplicates: {duplicates}")
    assert (total, duplicates) == (INTENTS, 0)
