"""The job listing must not hold up the event loop (SQLite). The console refreshes a list and
its counts every 2 s per open tab; run inline, on 10^6 jobs a refresh held the loop for up to
2 s, and with it every HTTP request, worker, heartbeat and lease renewal (a lease could expire
and its attempt turn `unknown`). PostgreSQL reads always await the server."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from jobrouter.listing import JobFilter
from jobrouter.store import SqlStore, open_store
from jobrouter.store.sqlite_file import sqlite_path

JOBS = 50_000

BULK_JOBS = """
INSERT INTO jobs (id, owner, idempotency_key, fingerprint, task, input, params, state,
                  created_at, updated_at, next_run_at)
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
SELECT printf('%032x', i), 'bulk', 'k' || i, 'f', 'caption', '{}', '{}', 'succeeded',
       1.0e9, 1.0e9, 1.0e9 FROM n
"""

LISTINGS: dict[str, Callable[[SqlStore], Awaitable[Any]]] = {
    "counts of every job": lambda store: store.jobs.count_jobs_by_state(JobFilter()),
    "a page": lambda store: store.jobs.list_jobs(JobFilter(owner="bulk"), limit=500),
    "a page of a rare task": lambda store: store.jobs.list_jobs(JobFilter(task="typo"), limit=50),
}


@pytest.fixture
async def big_store(tmp_path: Path) -> Any:
    url = f"sqlite:///{tmp_path}/big.db"
    await (await open_store(url)).close()  # migrated
    with sqlite3.connect(sqlite_path(url)) as conn:  # one statement: no submit per job
        conn.execute(BULK_JOBS, (JOBS,))
    store = await open_store(url)
    try:
        yield store
    finally:
        await store.close()


@pytest.mark.parametrize("listing", list(LISTINGS))
async def test_the_event_loop_runs_while_a_listing_reads(big_store: SqlStore, listing: str) -> None:
    """A task that is ready when the listing starts runs before the listing ends: the read
    goes to a thread and the loop goes on. Decided by events, not time: inline (the old
    code) the read never yields, so the ready task cannot run until it is over and counts
    no turn at all, however small or large the table."""
    turns = 0
    stop = asyncio.Event()

    async def other_work() -> None:  # stands for a request, a heartbeat, a lease renewal
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    worker = asyncio.create_task(other_work())
    await asyncio.sleep(0)  # it has started and is ready again
    before = turns
    result = await LISTINGS[listing](big_store)
    during = turns - before
    stop.set()
    await worker
    assert during > 0, "the listing held the event loop for its whole read"
    if isinstance(result, dict):
        assert sum(result.values()) == JOBS  # the read was the real one, over every job


async def test_a_cancelled_listing_leaves_its_connection_usable(big_store: SqlStore) -> None:
    """A tab closed mid-refresh cancels its listing while the read runs on its thread: the
    statement is interrupted, the cancellation reaches the caller, and the next listing (and
    closing the store) finds the connection free."""
    reading = asyncio.create_task(big_store.jobs.count_jobs_by_state(JobFilter()))
    await asyncio.sleep(0)  # the read has gone to its thread
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    counts = await big_store.jobs.count_jobs_by_state(JobFilter())
    assert sum(counts.values()) == JOBS
