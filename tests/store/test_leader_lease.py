"""The leader's lease (migration 0016) and what it bounds, in one process: a follower replaces a
leader that stopped renewing though its session lives; a run is fenced by the leader's term; a
leader cut off by its own clock stops its runs; a session the server ends deposes the leader at
once, not at its next heartbeat. (SIGSTOP with real processes:
tests/acceptance/test_leader_frozen.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import pytest

from jobrouter.leader import Leader, PeriodicTask
from jobrouter.store import SqlStore, open_store
from jobrouter.store.leader_lock import LEADER_LOCK, PgLeaseLock
from tests.store.pg import fresh_database
from tests.store.test_leader import WAIT_S, deposed, elected

LONG_S = 600.0  # a heartbeat that never comes within a test: only the path under test acts


@pytest.fixture
async def pg_store() -> AsyncIterator[tuple[str, SqlStore]]:
    async with fresh_database() as url:
        store = await open_store(url)
        try:
            yield url, store
        finally:
            await store.close()


async def admin_fetchval(url: str, query: str, *args: object) -> object:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(query, *args)
    finally:
        await conn.close()


def pg_lock(store: SqlStore, who: str, heartbeat_s: float) -> PgLeaseLock:
    lock = store.connector.leader_lock(who, heartbeat_s=heartbeat_s)
    assert isinstance(lock, PgLeaseLock)
    return lock


@pytest.mark.postgres
async def test_a_follower_replaces_a_leader_that_stopped_renewing_though_its_session_lives(
    pg_store: tuple[str, SqlStore],
) -> None:
    """A holds the lock and a lease but never renews (a frozen process: its session stays up).
    Once the lease expired, B ends A's session, takes the lock and the next term; A's late
    renewal fails. (mutant: the follower's end_expired_holder skipped: B is never
    elected, seen failing.)"""
    url, store = pg_store
    # A lease of 1.5 heartbeats: at 0.1 s a loaded machine's stall of 50 ms let B's own lease
    # lapse between its election and the holder read (seen: None == 'b'); at 2 s it takes a
    # stall of a second.
    heartbeat_s = 2.0
    frozen = pg_lock(store, "a", heartbeat_s=heartbeat_s)
    session_ended = asyncio.Event()
    frozen.on_lost(session_ended.set)
    assert await frozen.try_acquire()
    assert frozen.term == 1
    b = Leader(pg_lock(store, "b", heartbeat_s=heartbeat_s), "b", [], heartbeat_s=heartbeat_s)
    b.start()
    try:
        await elected(b)
        assert await b.holder() == "b"
        assert await admin_fetchval(url, "SELECT term FROM jobrouter_leader_lease") == 2
        await asyncio.wait_for(session_ended.wait(), WAIT_S)
        with pytest.raises(ConnectionError):
            await frozen.check()
    finally:
        await b.stop()
        await frozen.release()


@pytest.mark.postgres
async def test_a_run_is_fenced_by_the_term(pg_store: tuple[str, SqlStore]) -> None:
    """While A's first run is held, the lease passes to a later term (as a follower's takeover
    does). The run ends; the next one is refused by its fence, and A steps down through it (its
    heartbeat never comes within the test). (mutant: the fence in Leader._repeat removed: a
    second run, and no step-down, seen failing; mutant: renew_lease without `term = $2`, seen
    failing.)"""
    url, store = pg_store
    inside, release = asyncio.Event(), asyncio.Event()
    runs: list[float] = []

    async def held_run() -> None:
        runs.append(asyncio.get_running_loop().time())
        inside.set()
        await release.wait()

    lock = pg_lock(store, "a", heartbeat_s=LONG_S)
    leader = Leader(lock, "a", [PeriodicTask("held", 0.01, held_run)], heartbeat_s=LONG_S)
    leader.start()
    try:
        await asyncio.wait_for(inside.wait(), WAIT_S)
        await admin_fetchval(url, "UPDATE jobrouter_leader_lease SET term = term + 1")
        release.set()
        await deposed(leader)
    finally:
        await leader.stop()
    assert len(runs) == 1


class HangingLock:
    """A lock with a short lease whose renewals hang once `hang` is set (a stalled database)."""

    def __init__(self, hang: asyncio.Event, order: list[str]) -> None:
        self.lease_s: float | None = 0.5
        self.retry_in: float | None = None
        self.hang = hang
        self.order = order

    async def try_acquire(self) -> bool:
        return True

    async def check(self) -> None:
        if self.hang.is_set():
            await asyncio.Event().wait()

    async def release(self) -> None:
        self.order.append("released")

    async def holder(self) -> str | None:
        return "a"

    def on_lost(self, callback: Callable[[], None]) -> None:
        return None


async def test_a_leader_whose_renewals_hang_stops_its_run_at_the_cut_off(tmp_path: Path) -> None:
    """No renewal succeeds after the run began, and the heartbeat is far off: the leader's own
    clock cuts it off at 0.8 of the lease, the held run is cancelled before the lock goes.
    (mutant: Leader._until_due not bounded by the cut-off: no step-down, seen failing.)"""
    store = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    order: list[str] = []
    inside = asyncio.Event()

    async def held_run() -> None:
        inside.set()
        try:
            await asyncio.Event().wait()
        finally:
            order.append("task ended")

    lock = HangingLock(inside, order)
    leader = Leader(lock, "a", [PeriodicTask("held", 1.0, held_run)], heartbeat_s=LONG_S)
    leader.start()
    try:
        await asyncio.wait_for(inside.wait(), WAIT_S)
        await deposed(leader)
        assert order == ["task ended", "released"]
    finally:
        await leader.stop()
        await store.close()


@pytest.mark.postgres
async def test_a_leader_whose_session_the_server_ended_steps_down_before_its_next_heartbeat(
    pg_store: tuple[str, SqlStore],
) -> None:
    """pg_terminate_backend on the leader's lock session, with its heartbeat far off and no
    periodic run to notice: the termination listener deposes it at once. (mutant: the listener
    not added in PgLeaseLock._connection: no step-down until the heartbeat, seen failing.)"""
    url, store = pg_store
    leader = Leader(pg_lock(store, "a", heartbeat_s=LONG_S), "a", [], heartbeat_s=LONG_S)
    leader.start()
    try:
        await elected(leader)
        killed = await admin_fetchval(
            url,
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND granted AND objid = $1 AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())",
            LEADER_LOCK,
        )
        assert killed
        await deposed(leader)
    finally:
        await leader.stop()


async def test_a_periodic_run_that_fails_is_run_again_at_its_next_interval() -> None:
    """A periodic task's run raises (its store was down for a moment): it is counted as an
    error and run again at its next interval, the leader still leading.
    Mutant: `run_periodic`'s `except Exception` re-raising (the task's loop died with its
    first failure: never run again this term), seen failing."""
    runs: list[int] = []
    again = asyncio.Event()

    async def fails_first() -> None:
        runs.append(len(runs) + 1)
        if len(runs) == 1:
            raise RuntimeError("the store was down for a moment")
        again.set()

    lock = HangingLock(asyncio.Event(), [])  # its renewals never hang here
    leader = Leader(lock, "a", [PeriodicTask("flaky", 0.01, fails_first)], heartbeat_s=LONG_S)
    leader.start()
    try:
        await asyncio.wait_for(again.wait(), WAIT_S)
        assert leader.is_leader
    finally:
        await leader.stop()
    assert runs[:2] == [1, 2]
