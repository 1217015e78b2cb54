"""Leader election over each backend, in one process: the lock, the hand-over when the
leader's session dies, and the periodic work that only the leader runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import pytest

from jobrouter.leader import Leader, PeriodicTask
from jobrouter.store import SqlStore, open_store
from jobrouter.store.connector import LeaderLock
from jobrouter.store.leader_lock import LEADER_LOCK, PgLeaseLock, SoleLock
from tests.store.pg import fresh_database

WAIT_S = 30.0  # a guard only: each wait ends on an event


async def elected(leader: Leader) -> None:
    async with asyncio.timeout(WAIT_S):
        while not leader.is_leader:
            leader.changed.clear()
            await leader.changed.wait()


async def deposed(leader: Leader) -> None:
    async with asyncio.timeout(WAIT_S):
        while leader.is_leader:
            leader.changed.clear()
            await leader.changed.wait()


class Probe:
    """A periodic task that records who runs it and can be held inside a run."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.most_at_once = 0
        self.runs: list[str] = []
        self.ran = asyncio.Event()

    def task(self, who: str) -> PeriodicTask:
        async def run() -> None:
            self.running.add(who)
            self.most_at_once = max(self.most_at_once, len(self.running))
            try:
                self.runs.append(who)
                self.ran.set()
                await asyncio.sleep(0.01)
            finally:
                self.running.discard(who)

        return PeriodicTask("probe", 0.01, run)


class CountingLock:
    """A lock that counts its acquisition tries (to wait for a failed try as an event)."""

    def __init__(self, lock: LeaderLock) -> None:
        self.lock = lock
        self.lease_s = lock.lease_s
        self.tries = 0
        self.tried = asyncio.Event()

    @property
    def retry_in(self) -> float | None:
        return self.lock.retry_in

    async def try_acquire(self) -> bool:
        got = await self.lock.try_acquire()
        self.tries += 1
        self.tried.set()
        return got

    async def check(self) -> None:
        await self.lock.check()

    async def release(self) -> None:
        await self.lock.release()

    async def holder(self) -> str | None:
        return await self.lock.holder()

    def on_lost(self, callback: Callable[[], None]) -> None:
        self.lock.on_lost(callback)


@pytest.fixture
async def pg_stores() -> AsyncIterator[tuple[str, list[SqlStore]]]:
    async with fresh_database() as url:
        opened = [await open_store(url) for _ in range(2)]
        try:
            yield url, opened
        finally:
            for store in opened:
                await store.close()


def make_leader(store: SqlStore, who: str, probe: Probe) -> Leader:
    lock = CountingLock(store.connector.leader_lock(who, heartbeat_s=1.0))
    return Leader(lock, who, [probe.task(who)], heartbeat_s=0.05)


async def test_the_single_process_on_sqlite_leads(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    probe = Probe()
    leader = make_leader(store, "w1", probe)
    leader.start()
    try:
        await elected(leader)
        await asyncio.wait_for(probe.ran.wait(), WAIT_S)
        assert await leader.holder() == "w1"
    finally:
        await leader.stop()
        await store.close()
    assert not leader.is_leader


@pytest.mark.postgres
async def test_one_leader_and_hand_over_when_its_session_dies(
    pg_stores: tuple[str, list[SqlStore]],
) -> None:
    """B waits while A leads; A's lock session is killed by the server: A steps down, and once
    it is gone B takes over. (When the server ends the session, B may start within the
    milliseconds before A's tasks are cancelled: the window router/leader.py documents,
    covered by idempotent tasks. The order of a leader's own step-down is the next test; the
    election between processes killed with SIGKILL is tests/acceptance/test_leader.py.)"""
    db_url, (store_a, store_b) = pg_stores
    probe = Probe()
    a = make_leader(store_a, "a", probe)
    a.start()
    await elected(a)
    b = make_leader(store_b, "b", probe)
    b_lock = b.lock
    assert isinstance(b_lock, CountingLock)
    b.start()
    try:
        async with asyncio.timeout(WAIT_S):  # B tried the lock three times, and failed
            while b_lock.tries < 3:
                b_lock.tried.clear()
                await b_lock.tried.wait()
        assert not b.is_leader and await b.holder() == "a"
        assert set(probe.runs) == {"a"}

        admin = await asyncpg.connect(db_url)
        try:
            killed = await admin.fetchval(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                "AND granted AND objid = $1 AND database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database())",
                LEADER_LOCK,
            )
        finally:
            await admin.close()
        assert killed
        await deposed(a)
        await a.stop()  # else A, alive, may well win the lock back before B tries again
        await elected(b)
        assert await b.holder() == "b"
        probe.runs.clear()
        probe.ran.clear()
        await asyncio.wait_for(probe.ran.wait(), WAIT_S)
        assert set(probe.runs) == {"b"}
    finally:
        await a.stop()
        await b.stop()


class FailingCheck(CountingLock):
    """A lock whose heartbeat fails once `failing` is set (the run's fence passed before); it
    records the order of what happens."""

    def __init__(self, lock: LeaderLock, order: list[str], failing: asyncio.Event) -> None:
        super().__init__(lock)
        self.order = order
        self.failing = failing

    async def check(self) -> None:
        if not self.failing.is_set():
            return
        self.order.append("check failed")
        raise ConnectionError("no answer")

    async def release(self) -> None:
        self.order.append("released")
        await self.lock.release()


async def test_a_leader_that_loses_its_heartbeat_stops_its_tasks_before_letting_go(
    tmp_path: Path,
) -> None:
    """Its periodic task (held inside a run) is cancelled and has ended before the lock is
    released, so no other process can start it meanwhile. (Fails when the release comes first.)"""
    store = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    order: list[str] = []
    inside = asyncio.Event()

    async def held_run() -> None:
        inside.set()
        try:
            await asyncio.Event().wait()
        finally:
            order.append("task ended")

    lock = FailingCheck(store.connector.leader_lock("a", heartbeat_s=1.0), order, failing=inside)
    leader = Leader(lock, "a", [PeriodicTask("held", 1.0, held_run)], heartbeat_s=0.05)
    leader.start()
    try:
        await asyncio.wait_for(inside.wait(), WAIT_S)
        await deposed(leader)
    finally:
        await leader.stop()
        await store.close()
    assert order[:3] == ["check failed", "task ended", "released"]


async def test_each_backend_hands_out_its_own_lock(tmp_path: Path) -> None:
    """The leader asks the connector for its lock, never which backend it is on: SQLite's is
    this process alone. mutant seen failing: SqliteConnector.leader_lock handing out a
    PgLeaseLock."""
    store = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        lock = store.connector.leader_lock("w1", heartbeat_s=1.0)
        assert isinstance(lock, SoleLock) and await lock.holder() == "w1"
    finally:
        await store.close()


@pytest.mark.postgres
async def test_the_postgres_lock_connects_with_the_url_as_given() -> None:
    """The connector shows its URL masked; the lock's own connection needs the password.
    mutant seen failing: PostgresConnector's lock given the masked `url`."""
    async with fresh_database() as url:
        with_password = url.replace("://postgres@", "://postgres:not-shown@", 1)
        assert with_password != url
        store = await open_store(with_password)
        try:
            lock = store.connector.leader_lock("w1", heartbeat_s=1.0)
            assert isinstance(lock, PgLeaseLock) and lock.dsn == with_password
            assert "not-shown" not in store.connector.url
        finally:
            await store.close()
