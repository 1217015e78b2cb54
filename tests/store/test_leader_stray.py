"""A session that holds the leader's lock while the lease does not name it: a candidate that
got the lock and then stalled (frozen, its event loop blocked) before it took the lease, while
the lease still names the leader before it, whose session is gone. Nobody renews a lease for
it, so a follower must be able to end it, or no one leads again while it lives (seen on main:
300 s without a leader after the leader was killed). A candidate that is taking the lease this
instant is not ended: the lease must have been expired for longer than a try may take."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from jobrouter.leader import Leader
from jobrouter.store import SqlStore, open_store
from jobrouter.store.leader_lock import APP_NAME_PREFIX, LEADER_LOCK
from tests.store.pg import fresh_database
from tests.store.test_leader import WAIT_S, elected
from tests.store.test_leader_lease import admin_fetchval, pg_lock

pytestmark = pytest.mark.postgres
HEARTBEAT_S = 2.0  # the follower's first try acts; no later heartbeat comes within a test


@pytest.fixture
async def pg_store() -> AsyncIterator[tuple[str, SqlStore]]:
    async with fresh_database() as url:
        store = await open_store(url)
        try:
            yield url, store
        finally:
            await store.close()


async def stray_holder(url: str) -> asyncpg.Connection[asyncpg.Record]:
    """A session named like a leader's that holds the lock and took no lease."""
    conn = await asyncpg.connect(
        url, server_settings={"application_name": APP_NAME_PREFIX + "stray"}
    )
    assert await conn.fetchval("SELECT pg_try_advisory_lock($1)", LEADER_LOCK)
    return conn


async def expired_lease_of_a_gone_leader(url: str, expired_s: float) -> None:
    """The lease row of leader `gone` (term 1), expired `expired_s` ago; pid 0 is no session."""
    await admin_fetchval(
        url,
        "INSERT INTO jobrouter_leader_lease (id, holder, term, pid, expires_at) "
        "VALUES (1, 'gone', 1, 0, clock_timestamp() - make_interval(secs => $1))",
        expired_s,
    )


async def test_a_follower_ends_a_lock_holder_the_lease_does_not_name(
    pg_store: tuple[str, SqlStore],
) -> None:
    """The lease expired long ago and names a gone leader; a stray session holds the lock.
    B ends the stray session, takes the lock and the next term. (mutant: end_expired_holder
    ending only the session the lease names, as before: B is never elected, seen failing.)"""
    url, store = pg_store
    await expired_lease_of_a_gone_leader(url, 3600.0)
    stray = await stray_holder(url)
    ended = asyncio.Event()
    stray.add_termination_listener(lambda _conn: ended.set())
    b = Leader(pg_lock(store, "b", HEARTBEAT_S), "b", [], heartbeat_s=HEARTBEAT_S)
    b.start()
    try:
        await elected(b)
        await asyncio.wait_for(ended.wait(), WAIT_S)
        assert await b.holder() == "b"
        assert await admin_fetchval(url, "SELECT term FROM jobrouter_leader_lease") == 2
    finally:
        await b.stop()
        stray.terminate()


async def test_a_candidate_taking_the_lease_this_instant_is_not_ended(
    pg_store: tuple[str, SqlStore],
) -> None:
    """The lease expired a moment ago (less than a try may take): the stray session may be a
    candidate between its try_lock and its take_lease, so B's try leaves it alone and fails.
    (mutant: the grace removed from end_expired_holder: the session is ended and B takes the
    lock, seen failing.)"""
    url, store = pg_store
    await expired_lease_of_a_gone_leader(url, 0.5)
    stray = await stray_holder(url)
    try:
        b_lock = pg_lock(store, "b", HEARTBEAT_S)
        try:
            assert not await b_lock.try_acquire()
            assert await stray.fetchval("SELECT 1") == 1  # its session lives
        finally:
            await b_lock.release()
    finally:
        await stray.close()
