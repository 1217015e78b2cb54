"""Open waits found by one read for all of them (router/store/waits.py), on every backend:
`Router.wait` does not LISTEN (each notification costs every listening PostgreSQL backend a
transaction); it is woken by the store's read of the settled jobs among its open waits. Each
test decides on events: a settle committed through another store (another connection, as
another process would) must wake the wait; guards only bound a hang."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from jobrouter import Router
from jobrouter.config import RouterConfig, TaskConfig
from jobrouter.models import NewEvent
from jobrouter.states import JobState
from jobrouter.store import SqlStore, open_store
from tests.support.store_jobs import create_job

GUARD_S = 60.0  # against a hang only


@contextlib.asynccontextmanager
async def other_store(url: str) -> AsyncIterator[SqlStore]:
    opened = await open_store(url)
    try:
        yield opened
    finally:
        await opened.close()


async def submit(store: SqlStore, key: str = "k1") -> Any:
    return await create_job(
        store,
        owner="shop",
        idempotency_key=key,
        task="caption",
        input={"x": key},
        params={},
        deadline_s=None,
        claimed_by=None,
        claim_s=30.0,
    )


async def test_a_settle_committed_elsewhere_wakes_the_wait_with_the_job(
    store: SqlStore, db_url: str
) -> None:
    async with other_store(db_url) as elsewhere:
        job = await submit(elsewhere)
        with store.jobs.watching(job.id) as change, store.jobs.awaiting(job.id):
            await elsewhere.jobs.note(job.id, [NewEvent(kind="job.waiting")])  # not settled
            await elsewhere.jobs.settle_job(job.id, JobState.FAILED, error="elsewhere")
            async with asyncio.timeout(GUARD_S):
                await change.wait()
            heard = change.take()
    assert heard is not None and heard.state is JobState.FAILED and heard.error == "elsewhere"
    assert heard == await store.jobs.get_job(job.id)


async def test_a_settle_between_the_check_and_the_sleep_is_not_lost(
    store: SqlStore, db_url: str
) -> None:
    """The waiter looks (not settled), the settle commits, then the waiter sleeps: the read is
    of committed state, so the next one finds it (nothing is edge-triggered)."""
    async with other_store(db_url) as elsewhere:
        job = await submit(elsewhere)
        with store.jobs.watching(job.id) as change, store.jobs.awaiting(job.id):
            looked = await store.jobs.get_job(job.id)
            assert looked is not None and not looked.state.settled
            await elsewhere.jobs.cancel_job(job.id, "after the look")
            async with asyncio.timeout(GUARD_S):
                await change.wait()
            heard = change.take()
    assert heard is not None and heard.state is JobState.CANCELLED


async def test_one_read_serves_every_open_wait(store: SqlStore, db_url: str) -> None:
    """Ten waits opened together on ten settled jobs: one read of the settled jobs wakes all
    ten (a read per wait would be ten transactions on PostgreSQL)."""
    reads: list[int] = []
    real_fetchall = store.connector.fetchall

    async def counted(query: str, params: Any) -> Any:
        rows = await real_fetchall(query, params)
        if query == store.connector.queries["settled_jobs"]:
            reads.append(len(rows))
        return rows

    store.connector.fetchall = counted  # type: ignore[method-assign]
    async with other_store(db_url) as elsewhere:
        jobs = [await submit(elsewhere, f"k{i}") for i in range(10)]
        for job in jobs:
            await elsewhere.jobs.settle_job(job.id, JobState.FAILED, error="done")
        with contextlib.ExitStack() as stack:
            changes = [stack.enter_context(store.jobs.watching(job.id)) for job in jobs]
            for job in jobs:
                stack.enter_context(store.jobs.awaiting(job.id))
            async with asyncio.timeout(GUARD_S):
                for change in changes:
                    await change.wait()
    assert reads == [10]
    assert all(change.take() is not None for change in changes)


async def test_no_wait_open_no_read(store: SqlStore, db_url: str) -> None:
    """The reader runs only while waits are open: it is gone once the last one closes."""
    async with other_store(db_url) as elsewhere:
        job = await submit(elsewhere)
        await elsewhere.jobs.cancel_job(job.id, "x")
        with store.jobs.watching(job.id) as change, store.jobs.awaiting(job.id):
            async with asyncio.timeout(GUARD_S):
                await change.wait()
        reader = store.jobs._waits._waits_task
        assert reader is not None
        async with asyncio.timeout(GUARD_S):
            await asyncio.wait({reader})
        assert not store.jobs._waits._waits


def _config(tmp_path: Path, url: str) -> RouterConfig:
    return RouterConfig.model_validate(
        {
            "database": {"url": url},
            "providers": {"fake": {"model": "fake/model"}},
            "tasks": {
                "caption": TaskConfig(
                    providers=["fake"], side_effects="none", certification="none"
                ).model_dump()
            },
        }
    )


async def test_router_wait_returns_when_another_router_settles_the_job(
    db_url: str, tmp_path: Path
) -> None:
    """Two routers on one database, neither running workers: one waits, the other cancels."""
    config = _config(tmp_path, db_url)
    async with (
        Router.open(db_url, config, run_workers=False) as waiter,
        Router.open(db_url, config, run_workers=False) as other,
    ):
        job = await waiter.submit("shop", "wait-1", "caption", {"product": "tea"})
        waiting = asyncio.create_task(waiter.wait(job.id, GUARD_S))
        await asyncio.sleep(0)  # the wait is open (or about to be): either way it must end
        await other.cancel(job.id, "by the other router")
        done = await waiting
    assert done.state is JobState.CANCELLED and done.id == job.id
