"""The lock a leader is elected with, per backend (router/leader.py runs the election).

PostgreSQL: a session-level `pg_try_advisory_lock(LEADER_LOCK)` on an asyncpg connection of
its own (a pooled connection goes back to the pool, and the lock with it), bound to a lease
(migration 0016) that the holder renews every heartbeat by the database's clock. A session
outlives a frozen process (SIGSTOP, a stalled VM: its TCP connection stays up), so the lock
alone kept a frozen leader in office; the lease does not: a follower that finds the lock taken
and the lease expired ends the holder's session, takes the lock and the lease with the next
term. That holds for a holder the lease does not name as well (a candidate that got the lock
and froze before it took the lease: nobody renews a lease for it), once the lease has been
expired for longer than a try may take, so a candidate taking it this instant is left alone.
Each renewal names the term, so a leader that wakes up after being replaced learns it from its
first renewal (or from its closed session) and runs nothing.

SQLite (one machine, one file): the single process leads; nothing to renew.
Queries: leader.sql. Each connector hands out its backend's lock (`Connector.leader_lock`:
postgres.py, sqlite.py), so the leader (router/leader.py) never asks which backend it is on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

from jobrouter.errors import LeaseLost
from jobrouter.store.connector import parse_named_queries

if TYPE_CHECKING:
    from jobrouter.store.connector import Connector

log = logging.getLogger("jobrouter.leader")

# The advisory lock key of leadership (< 2**31, so pg_locks shows it as objid with classid 0);
# the migration lock (router.store.postgres.MIGRATION_LOCK) is another key.
LEADER_LOCK = 0x6A72_4C44  # "jrLD"
APP_NAME_PREFIX = "jobrouter-leader:"
PG_APP_NAME_MAX = 63  # PostgreSQL truncates application_name to NAMEDATALEN - 1
# The server frees the lock of a leader whose machine vanished once TCP keepalive gives up on
# its connection: 5 s idle, then 3 probes 2 s apart, instead of the system default (hours).
SERVER_KEEPALIVE = {
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",
}
# The lease, in heartbeats. The leader renews it every half heartbeat (router/leader.py), so
# two renewals can fail or be slow before it expires; a follower wakes when it expires, ends
# the holder's session (PostgreSQL checks every 100 ms that it is gone) and takes over within
# two heartbeats of the last renewal.
LEASE_HEARTBEATS = 1.5


def _queries() -> dict[str, str]:
    text = resources.files("jobrouter.store").joinpath("leader.sql").read_text("utf-8")
    return parse_named_queries(text)


class SoleLock:
    """SQLite: one machine, no session lock that dies with its process; this process leads."""

    lease_s: float | None = None  # nothing expires: there is no one to take over
    retry_in: float | None = None

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id

    async def try_acquire(self) -> bool:
        return True

    async def check(self) -> None:
        return None

    async def release(self) -> None:
        return None

    async def holder(self) -> str | None:
        return self.worker_id

    def on_lost(self, callback: Callable[[], None]) -> None:
        return None


class PgLeaseLock:
    """The advisory lock and its lease, on a dedicated asyncpg connection."""

    def __init__(
        self, dsn: str, worker_id: str, connector: Connector, *, heartbeat_s: float
    ) -> None:
        self.dsn = dsn
        self.worker_id = worker_id
        self.connector = connector  # its pool answers `holder` while the lock connection is busy
        self.timeout_s = heartbeat_s
        # A try's bound, two heartbeats: a takeover waits up to one for the frozen holder's
        # session to end. A lock holder that the lease does not name is ended only once the
        # lease has been expired for longer than this: it is no candidate taking over any more.
        self.try_s = 2 * heartbeat_s
        self.lease_s: float | None = LEASE_HEARTBEATS * heartbeat_s
        self.term: int | None = None
        self.retry_in: float | None = None  # after a failed try: when the holder's lease expires
        self._q = _queries()
        self._conn: Any = None  # asyncpg.Connection, imported lazily with the extra
        self._busy = asyncio.Lock()  # the heartbeat and the run fences share one connection
        self._lost: list[Callable[[], None]] = []

    async def try_acquire(self) -> bool:
        async with self._busy, asyncio.timeout(self.try_s):
            conn = await self._connection()
            got = bool(await conn.fetchval(self._q["try_lock"], LEADER_LOCK))
            if not got and await self._end_expired_holder(conn):
                got = bool(await conn.fetchval(self._q["try_lock"], LEADER_LOCK))
            if got:
                self.term = int(
                    await conn.fetchval(self._q["take_lease"], self.worker_id, self.lease_s)
                )
                self.retry_in = None
            else:
                left = await conn.fetchval(self._q["lease_left"])
                # expired yet not ended: a candidate taking the lease this instant (within
                # end_expired_holder's grace): try again at the heartbeat's pace, not at once
                self.retry_in = float(left) if left is not None and left > 0 else None
            return got

    async def _connection(self) -> Any:
        import asyncpg

        if self._conn is None or self._conn.is_closed():
            app = (APP_NAME_PREFIX + self.worker_id)[:PG_APP_NAME_MAX]
            self._conn = await asyncpg.connect(
                self.dsn,
                timeout=self.timeout_s,
                server_settings={"application_name": app, **SERVER_KEEPALIVE},
            )
            self._conn.add_termination_listener(self._terminated)
        return self._conn

    async def _end_expired_holder(self, conn: Any) -> bool:
        wait_ms = int(self.timeout_s * 1000)
        row = await conn.fetchrow(self._q["end_expired_holder"], LEADER_LOCK, wait_ms, self.try_s)
        if row is None:
            return False
        if row["named"]:
            log.warning(
                "leader %s let its lease (term %d) expire while holding the lock; %s ended its "
                "session to take over",
                row["holder"],
                row["term"],
                self.worker_id,
            )
        else:
            log.warning(
                "session %d held the leader lock without a lease (the lease of %s, term %d, "
                "had expired); %s ended it to take over",
                row["pid"],
                row["holder"],
                row["term"],
                self.worker_id,
            )
        return True  # signalled: even unconfirmed (`ended` false) it may be gone by now

    async def check(self) -> None:
        """Renew the lease; raise when it is no longer this process's (`LeaseLost`) or the
        session does not answer."""
        async with self._busy:
            if self._conn is None or self._conn.is_closed():
                raise ConnectionError("the leader's lock connection is closed")
            async with asyncio.timeout(self.timeout_s):
                renewed = await self._conn.fetchval(
                    self._q["renew_lease"], self.worker_id, self.term, self.lease_s
                )
            if renewed is None:
                raise LeaseLost(self.worker_id, self.term)

    def on_lost(self, callback: Callable[[], None]) -> None:
        self._lost.append(callback)

    def _terminated(self, conn: object) -> None:
        if conn is self._conn:  # not a connection we let go ourselves
            for callback in self._lost:
                callback()

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        self.term = None
        if conn is not None and not conn.is_closed():
            # terminate, not close: a close waits on a session that may not answer any more;
            # the server frees the session's locks when the socket goes.
            conn.terminate()

    async def holder(self) -> str | None:
        row = await self.connector.fetchone(self._q["lock_holder"], {"key": LEADER_LOCK})
        if row is None or not str(row["app"]).startswith(APP_NAME_PREFIX):
            return None
        return str(row["app"])[len(APP_NAME_PREFIX) :]
