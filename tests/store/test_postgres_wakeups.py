"""What a wake-up costs the PostgreSQL server, and that a fleet notifies nothing but the events
a watch follows: its workers' claims wait on the server, its waits read. Decided on events and on
the server's own counters: a notification arriving, `pg_stat_activity`,
`pg_stat_database.xact_commit` read once every other backend has gone (the server counts a
backend's commits for certain when it exits)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeAlias

import asyncpg
import pytest

from jobrouter import Router
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from jobrouter.states import JobState
from jobrouter.store import SqlStore, open_store
from tests.store.pg import fresh_database
from tests.support.fakes import FakeProvider, Step

pytestmark = pytest.mark.postgres

if TYPE_CHECKING:  # asyncpg's classes are generic only in its stubs
    Conn: TypeAlias = asyncpg.Connection[asyncpg.Record]

GUARD_S = 60.0  # against a hang only
LISTENERS = (
    "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() "
    "AND application_name LIKE 'jobrouter-listen:%' ORDER BY 1"
)
IDLE = "jobrouter-listen:"  # a LISTEN connection that follows nothing


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
    """The premise of router/store/waits.py and of workers that do not listen (docs/operations.md):
    PostgreSQL wakes every LISTENing backend for each notifying transaction, and the backend
    reads the queue in a transaction of its own. Counted on the server, set-up subtracted.

    The database's commit count also counts what the server itself does there: an autovacuum
    worker visiting the new database commits too (seen once under load: 41 for 40). That
    noise only ever adds commits, so each count is the least of three readings: a listener
    that read the queue without a transaction would still make the least 40, not 80."""
    notifies = 40

    async def least(listeners: int, count: int) -> int:
        return min([await notify_commits(pg_url, listeners, count) for _ in range(3)])

    cost = {}
    for listeners in (0, 1, 2):
        cost[listeners] = await least(listeners, notifies) - await least(listeners, 0)
    assert cost == {0: notifies, 1: 2 * notifies, 2: 3 * notifies}


async def test_a_fleet_follows_only_the_events_it_watches(pg_url: str) -> None:
    """A worker and a submitter that waits name nothing in their LISTEN connections, so the
    triggers of migration 0009 notify nobody of a job freed or settled (and no backend reads
    such a notification); a watch follows events. Notifications arrive in commit order: the
    marker, sent after the job settled, arrives after anything the job would have sent."""
    cfg = _fleet_config()
    async with (
        Router.open(pg_url, cfg, providers={"a": FakeProvider("a")}) as worker,
        Router.open(
            pg_url, cfg, providers={"a": FakeProvider("a")}, run_workers=False
        ) as submitter,
    ):
        admin, spy = await asyncpg.connect(pg_url), await asyncpg.connect(pg_url)
        try:
            heard: asyncio.Queue[str] = asyncio.Queue()
            for channel in ("jobrouter_jobs", "jobrouter_settled", "jobrouter_events", "marker"):
                await spy.add_listener(channel, lambda _c, _p, ch, _m: heard.put_nowait(ch))
            job = await submitter.submit("shop", "quiet", "caption", {"product": "tea"})
            assert (await submitter.wait(job.id, GUARD_S)).state is JobState.SUCCEEDED
            assert [r[0] for r in await admin.fetch(LISTENERS)] == [IDLE, IDLE]
            await admin.execute("NOTIFY marker")
            async with asyncio.timeout(GUARD_S):
                assert await heard.get() == "marker"
            watched = [event.kind async for event in worker.watch(job.id)]  # stored ones
            assert watched and watched[-1] == "job.succeeded"
            assert [r[0] for r in await admin.fetch(LISTENERS)] == [
                IDLE,
                "jobrouter-listen:events",
            ]
        finally:
            await admin.close()
            await spy.close()


def _fleet_config() -> RouterConfig:
    task = TaskConfig(
        providers=["a"], side_effects="none", certification="none", attempt_timeout=30.0
    )
    return RouterConfig(
        tasks={"caption": task}, engine=EngineConfig(poll_interval=0.05, claim=30.0, lease=30.0)
    )


async def test_a_job_submitted_by_another_process_is_claimed_by_the_worker(
    pg_url: str,
) -> None:
    """A worker hears nothing from other processes: its claim waiting on the server takes the
    job another process submitted."""
    cfg = _fleet_config()
    async with (
        Router.open(pg_url, cfg, providers={"a": FakeProvider("a")}),
        Router.open(
            pg_url, cfg, providers={"a": FakeProvider("a")}, run_workers=False
        ) as submitter,
    ):
        job = await submitter.submit("shop", "elsewhere", "caption", {"product": "tea"})
        done = await submitter.wait(job.id, GUARD_S)
    assert done.state is JobState.SUCCEEDED


async def test_two_workers_and_a_submitter_finish_every_job_whatever_their_modes(
    pg_url: str,
) -> None:
    """Bursts of jobs drive the workers between awaiting and busy (router/pace.py); every job
    is claimed and settles, and each wait returns its job."""
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
