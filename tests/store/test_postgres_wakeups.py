"""What a wake-up costs the PostgreSQL server, and a worker that stops hearing wake-ups while it
claims by polling (`ChangeFeed.pause`). Decided on events and on the server's own counters:
a notification arriving, `pg_stat_activity`, `pg_stat_database.xact_commit` read once every
other backend has gone (the server counts a backend's commits for certain when it exits)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeAlias

import asyncpg
import pytest

from router import Router
from router.config import EngineConfig, RouterConfig, TaskConfig
from router.models import NewEvent
from router.states import JobState
from router.store import SqlStore, open_store
from tests.store.pg import fresh_database
from tests.support.fakes import FakeProvider, Step
from tests.support.store_jobs import create_job

pytestmark = pytest.mark.postgres

if TYPE_CHECKING:  # asyncpg's classes are generic only in its stubs
    Conn: TypeAlias = asyncpg.Connection[asyncpg.Record]

GUARD_S = 60.0  # against a hang only
LISTENERS = (
    "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() "
    "AND application_name LIKE 'jobrouter-listen:%' ORDER BY 1"
)
IDLE = "jobrouter-listen:"  # the submitter's connection, which follows nothing


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[SqlStore]:
    store = await open_store(url)
    try:
        yield store
    finally:
        await store.close()


async def submit(store: SqlStore, key: str) -> None:
    await create_job(
        store,
        owner="shop",
        idempotency_key=key,
        task="caption",
        input={"k": key},
        params={},
        deadline_s=None,
        claimed_by=None,
        claim_s=30.0,
    )


async def quiet_commits(url: str) -> int:
    """The database's commit count once no other backend is connected (each counted for
    certain), minus this reading's own statements."""
    conn = await asyncpg.connect(url)
    try:
        others = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        async with asyncio.timeout(GUARD_S):
            while await conn.fetchval(others):  # noqa: ASYNC110 (the server has no event for it)
                await asyncio.sleep(0.05)
        return int(
            await conn.fetchval(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            )
        )
    finally:
        await conn.close()


async def notify_commits(url: str, listeners: int, notifies: int) -> int:
    """Server commits for `notifies` NOTIFYs, each its own transaction, with `listeners` idle
    connections LISTENing, set-up included. The next NOTIFY is sent only once every listener
    has heard the last one (each is idle again): no two are read together."""
    before = await quiet_commits(url)
    conns = [await asyncpg.connect(url) for _ in range(listeners)]
    heard: asyncio.Queue[int] = asyncio.Queue()
    for conn in conns:
        await conn.add_listener("jobrouter_test", lambda *_: heard.put_nowait(1))
    sender = await asyncpg.connect(url)
    for n in range(notifies):
        await sender.execute(f"NOTIFY jobrouter_test, '{n}'")
        async with asyncio.timeout(GUARD_S):
            for _ in conns:
                await heard.get()
    for conn in [*conns, sender]:
        await conn.close()
    return await quiet_commits(url) - before - 1


async def test_every_listening_backend_pays_a_transaction_per_notifying_one(pg_url: str) -> None:
    """The premise of router/store/waits.py and of the worker's pause (docs/operations.md):
    PostgreSQL wakes every LISTENing backend for each notifying transaction, and the backend
    reads the queue in a transaction of its own. Counted on the server, set-up subtracted."""
    notifies = 40
    cost = {}
    for listeners in (0, 1, 2):
        setup = await notify_commits(pg_url, listeners, 0)
        cost[listeners] = await notify_commits(pg_url, listeners, notifies) - setup
    assert cost == {0: notifies, 1: 2 * notifies, 2: 3 * notifies}


async def test_a_paused_worker_is_not_named_and_hears_again_once_resumed(pg_url: str) -> None:
    async with opened(pg_url) as worker, opened(pg_url) as submitter:
        admin = await asyncpg.connect(pg_url)
        try:
            woken = asyncio.Event()
            worker.jobs.on_runnable(woken.set)
            await worker.jobs.follow("runnable")
            marker = await create_job(
                submitter,
                owner="shop",
                idempotency_key="marker",
                task="caption",
                input={},
                params={},
                deadline_s=None,
                claimed_by="w1",
                claim_s=30.0,
            )  # claimed: no wake-up
            names = [r[0] for r in await admin.fetch(LISTENERS)]
            assert names == [IDLE, "jobrouter-listen:runnable"]
            await worker.jobs.pause("runnable", True)
            await worker.jobs.follow("events")
            names = [r[0] for r in await admin.fetch(LISTENERS)]
            assert names == [IDLE, "jobrouter-listen:events"]
            with worker.jobs.watching(marker.id) as changed:
                await submit(submitter, "while-paused")
                # Notifications arrive in commit order: a wake-up for the job submitted while
                # paused would have come before this later event of the marker job.
                await submitter.jobs.note(marker.id, [NewEvent(kind="job.waiting")])
                async with asyncio.timeout(GUARD_S):
                    await changed.wait()
            assert not woken.is_set()
            await worker.jobs.pause("runnable", False)
            names = [r[0] for r in await admin.fetch(LISTENERS)]
            assert names == [IDLE, "jobrouter-listen:events,runnable"]
            await submit(submitter, "after-resume")
            async with asyncio.timeout(GUARD_S):
                await woken.wait()
        finally:
            await admin.close()


def _fleet_config() -> RouterConfig:
    task = TaskConfig(
        providers=["a"], side_effects="none", certification="none", attempt_timeout=30.0
    )
    return RouterConfig(
        tasks={"caption": task}, engine=EngineConfig(poll_interval=0.05, claim=30.0, lease=30.0)
    )


async def test_a_job_submitted_while_the_worker_is_deaf_is_claimed_by_its_poll(
    pg_url: str,
) -> None:
    """A worker that hears no wake-ups (busy or backing off) still takes what nobody takes."""
    cfg = _fleet_config()
    async with (
        Router.open(pg_url, cfg, providers={"a": FakeProvider("a")}) as worker,
        Router.open(
            pg_url, cfg, providers={"a": FakeProvider("a")}, run_workers=False
        ) as submitter,
    ):
        await worker.store.jobs.pause("runnable", True)
        job = await submitter.submit("shop", "deaf", "caption", {"product": "tea"})
        done = await submitter.wait(job.id, GUARD_S)
    assert done.state is JobState.SUCCEEDED


async def test_two_workers_and_a_submitter_finish_every_job_whatever_their_modes(
    pg_url: str,
) -> None:
    """Bursts of jobs drive the workers through listen, busy and backoff (router/hearing.py);
    every job is claimed and settles, and each wait returns its job."""
    cfg = _fleet_config()
    slow = Step(delay=0.02, output={"text": "ok"})
    async with (
        Router.open(pg_url, cfg, providers={"a": FakeProvider("a", default=slow)}),
        Router.open(pg_url, cfg, providers={"a": FakeProvider("a", default=slow)}),
        Router.open(
            pg_url, cfg, providers={"a": FakeProvider("a")}, run_workers=False
        ) as submitter,
    ):

        async def run(key: str) -> JobState:
            job = await submitter.submit("shop", key, "caption", {"product": key})
            return (await submitter.wait(job.id, GUARD_S)).state

        for burst in range(3):
            states = await asyncio.gather(*(run(f"b{burst}-{i}") for i in range(12)))
            assert set(states) == {JobState.SUCCEEDED}
            assert await run(f"single-{burst}") is JobState.SUCCEEDED
