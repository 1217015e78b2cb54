"""A router cut off from PostgreSQL in the middle of a transaction does not hold its row locks
for good: the server ends a jobrouter session that sits idle inside a transaction longer than
`[database] command_timeout` (`idle_in_transaction_session_timeout`, router/store/postgres.py),
and whoever waited on those rows goes on. tests/chaos/test_netns.py shows the fleet-wide stall
without it (a partitioned router host's sessions kept their locks; the leader's sweep waited on
them for as long as the partition lasted)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from jobrouter.errors import StoreError
from jobrouter.store import open_store
from tests.store.pg import fresh_database

pytestmark = pytest.mark.postgres

COMMAND_TIMEOUT_S = 1.0
GUARD_S = 60.0  # against a hang only: the server ends the idle session after 1 s


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


@pytest.mark.timeout(120)  # under the mutant the holder's session never ends: fail soon
async def test_a_session_gone_silent_in_a_transaction_releases_its_locks(pg_url: str) -> None:
    """Mutants killed: `session_settings` without `idle_in_transaction_session_timeout` (the
    other session's UPDATE waits on the lock past the guard); without `SERVER_KEEPALIVE` (the
    session's keepalive is the system's, hours: the last assertion; the partition that needs
    it is tests/chaos/test_netns.py, where a session `active` waiting for its client's next
    message kept its locks without it)."""
    store = await open_store(pg_url, command_timeout=COMMAND_TIMEOUT_S)
    other = await asyncpg.connect(pg_url)
    silent = asyncio.Event()  # never set: the transaction's client says nothing more
    try:
        await other.execute("CREATE TABLE held (id int PRIMARY KEY, n int)")
        await other.execute("INSERT INTO held VALUES (1, 0)")
        locked = asyncio.Event()

        async def hold_the_row() -> None:
            async with store.connector.write() as tx:
                await tx.execute("UPDATE held SET n = n + 1 WHERE id = 1", {})
                locked.set()
                await silent.wait()  # idle in transaction, holding the row's lock

        holder = asyncio.create_task(hold_the_row())
        await asyncio.wait_for(locked.wait(), GUARD_S)
        async with asyncio.timeout(GUARD_S):  # returns once the server ended the holder
            await other.execute("UPDATE held SET n = n + 10 WHERE id = 1")
        assert await other.fetchval("SELECT n FROM held WHERE id = 1") == 10  # its +1 undone
        holder.cancel()
        with pytest.raises((StoreError, asyncio.CancelledError)):
            await holder
        settings = await store.connector.fetchone(
            "SELECT current_setting('idle_in_transaction_session_timeout') AS idle, "
            "current_setting('tcp_keepalives_idle') AS keepalive",
            {},
        )
        assert settings is not None and (settings["idle"], settings["keepalive"]) == ("1s", "5")
    finally:
        await other.close()
        await store.close()
