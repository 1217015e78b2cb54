"""A claim that starts several jobs charges their budgets in one transaction: it must lock the
budget rows in name order (spend.lock_periods_in), as every single start does, or it deadlocks
with another router's start (PostgreSQL aborts one of the two). SQLite has one writer: nothing
to order there. Decided on events: the claim waiting on a row lock; each wait is bounded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from jobrouter.models import Job
from jobrouter.store import open_store
from jobrouter.store.spend import Hold, Reservation
from jobrouter.store.starts import AttemptStart
from tests.store.pg import fresh_database
from tests.store.test_claim_runnable import ignore, submit
from tests.support.claiming import claim_runnable

pytestmark = pytest.mark.postgres

DAY = 1_764_720_000.0
JOBS = 10
GUARD_S = 60.0  # a ceiling against a hang, never the synchronisation
WAITING_ON_A_LOCK = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
)
LOCK_ROW = "UPDATE budget_spend SET charged_usd = charged_usd WHERE budget = $1"


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


async def test_a_claim_locks_its_budgets_in_name_order(pg_url: str) -> None:
    """Ten jobs, held by budgets `b` and `a` in turn (`b` first). Another transaction holds
    `a`'s row; the claim of all ten waits for it; that transaction then takes `b` and
    commits. Every job starts and neither transaction is aborted. Mutant killed:
    `lock_periods_in` not called by `_reserve` (the claim locks `b` for one job, then waits
    on `a` for a later one: a deadlock, one of the two aborted; seen failing 3 of 3 runs)."""
    store = await open_store(pg_url)
    other = await asyncpg.connect(pg_url)
    try:
        jobs = [await submit(store, f"k{i}") for i in range(JOBS)]
        holds: dict[str, Hold] = {}  # by job, in the order the claim chose the starts
        await other.execute(
            "INSERT INTO budget_spend (budget, period_start) VALUES ('a', $1), ('b', $1)", DAY
        )

        async def first(job: Job) -> AttemptStart:
            # `b` for the first start chosen, then `a`, `b`, ...: the starts are charged in
            # the order chosen, so a start held by `b` comes before one held by `a`
            holds[job.id] = Hold("ba"[len(holds) % 2], DAY, 10.0, None)
            return AttemptStart("p", "m", "w1", 30.0, (), Reservation((holds[job.id],), 1.0, 10))

        async with other.transaction():
            await other.execute(LOCK_ROW, "a")
            claim = asyncio.create_task(claim_runnable(store.jobs, "w1", 60.0, 10, first, ignore))
            async with asyncio.timeout(GUARD_S):
                while not await other.fetchval(WAITING_ON_A_LOCK):  # no event for a lock wait
                    assert not claim.done(), claim.exception()
                    await asyncio.sleep(0.02)
            await other.execute(LOCK_ROW, "b")
        async with asyncio.timeout(GUARD_S):
            claimed = await claim
        started = sorted(c.job.id for c in claimed if c.attempt is not None)
        assert started == sorted(job.id for job in jobs)
    finally:
        await other.close()
        await store.close()
