"""PostgreSQL connector (asyncpg): a connection pool for several router processes on several
machines, plus one dedicated connection that LISTENs for their changes (its `Listener`,
router/store/pg_listen.py).

How the shared SQL becomes PostgreSQL:
- Named queries keep their `:name` parameters; each query text is translated to `$n` once and
  cached (string literals, quoted names, comments and `::casts` are left alone).
- Write transactions run on a pooled connection under READ COMMITTED, set explicitly (a server
  or role default of REPEATABLE READ would blind the waits on the server); the few read-check-write
  sequences lock their job row first (`lock_job ... FOR UPDATE` in queries_postgres.sql), which
  makes the compare-and-swap race-free across processes.
- Migrations run at open, in one transaction under `pg_advisory_xact_lock`, so routers starting
  together migrate exactly once and the others find the work done.
- A trigger `pg_notify`s `jobrouter_events` at commit with the job id of every appended
  event, while some process follows events (migrations 0001, 0009); the listener LISTENs for
  them only once this process does (`follow_events`, for `Router.watch`): every notification
  costs each listening backend a transaction on the server. It calls the callbacks registered
  with `on_change`; if its connection drops it reconnects, and until then watchers fall back
  to their polling interval. Nothing else is heard: a worker's claim waits on the server for a
  job, and `Router.wait` reads settled jobs (router/store/server_waits.py, waits.py).
Errors: connection failures become `StoreError` naming the URL with its password masked
(router/store/pg_connection.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg

from jobrouter.errors import StoreError
from jobrouter.store.connector import (
    ConnectorStats,
    Params,
    Row,
    check_params,
    load_migrations,
    load_queries,
    run_callbacks,
    until_done,
)
from jobrouter.store.leader_lock import SERVER_KEEPALIVE, PgLeaseLock
from jobrouter.store.pg_connection import (
    CONNECT_TIMEOUT_S,
    CONNECTION_ERRORS,
    OPEN_ERRORS,
    UNAVAILABLE_ERRORS,
    translated_errors,
)
from jobrouter.store.pg_listen import Listener
from jobrouter.store.pg_url import redact

log = logging.getLogger("jobrouter.store.postgres")

POOL_MIN_SIZE = 1
POOL_MAX_SIZE = 16
MIGRATION_LOCK = 0x6A6F62726F757465  # "jobroute": one advisory lock key per database
COMMAND_TIMEOUT_S = 30.0
ACQUIRE_TIMEOUT_S = 10.0
# READ COMMITTED whatever the server's or the role's default: the reads that wait on the
# server (router/store/server_waits.py) look again inside one statement, and see new commits
# only with a fresh snapshot per look; the read-check-writes lock their row instead of
# retrying serialization failures. Set for the session (the autocommit reads) and on each
# write transaction.
SESSION_SETTINGS = {
    "application_name": "jobrouter",
    "default_transaction_isolation": "read committed",
}
# A router cut off from the server mid-transaction (a partition, a host that vanished) leaves
# its session open on the server, holding its row locks for as long as the server believes the
# connection lives: hours, since a session waiting for its client sends nothing. Every other
# process that needs those rows (the sweep of expired leases, a claim, a finish) waits on them
# (tests/chaos/test_netns.py). Two bounds end such a session, and with it its locks:
# - TCP keepalive, as on the leader's lock session: a peer that stopped answering is given up
#   after 5 s idle and 3 probes 2 s apart, whatever the session was doing (idle in a
#   transaction, or waiting for the rest of an extended-protocol message: `active`);
# - `idle_in_transaction_session_timeout` at the command timeout, for a client that is still
#   there but silent inside a transaction: no transaction of jobrouter waits on its client
#   between statements, so one idle longer than a statement may take is abandoned.
IDLE_IN_TRANSACTION = "idle_in_transaction_session_timeout"


def session_settings(command_timeout: float) -> dict[str, str]:
    """The settings of every pooled session: see SESSION_SETTINGS and the bounds above."""
    idle_ms = max(1, round(command_timeout * 1000))
    return {**SESSION_SETTINGS, **SERVER_KEEPALIVE, IDLE_IN_TRANSACTION: f"{idle_ms}ms"}


COMMIT_LOST = "connection lost during COMMIT: the transaction may or may not have committed"

if TYPE_CHECKING:  # asyncpg's classes are generic only in its stubs
    Connection: TypeAlias = (
        asyncpg.Connection[asyncpg.Record] | asyncpg.pool.PoolConnectionProxy[asyncpg.Record]
    )
_TOKEN = re.compile(
    r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|\$\$.*?\$\$|::|:([A-Za-z_]\w*)""",
    re.DOTALL,
)


@lru_cache(maxsize=1024)
def translate(query: str) -> tuple[str, tuple[str, ...]]:
    """`:name` parameters to `$n`, once per query text: (sql, parameter names in $n order)."""
    names: list[str] = []

    def swap(match: re.Match[str]) -> str:
        name = match[1]
        if name is None:
            return match[0]
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _TOKEN.sub(swap, query), tuple(names)


def bind(query: str, params: Params) -> tuple[str, list[Any]]:
    check_params(params)
    sql, names = translate(query)
    missing = [name for name in names if name not in params]
    if missing:
        raise ValueError(f"query needs parameters {missing}: {query}")
    return sql, [params[name] for name in names]


def rowcount(status: str) -> int:
    """Affected rows from a command tag: "UPDATE 1", "INSERT 0 1", "DELETE 0" ..."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


def lost(conn: Connection) -> bool:
    """Whether the connection of an acquired pool proxy is gone (the pool then detaches it)."""
    try:
        return conn.is_closed()
    except asyncpg.InterfaceError:  # detached: released early because its connection closed
        return True


async def _rollback(tx: asyncpg.transaction.Transaction) -> None:
    # A lost connection has rolled back by itself; the caller re-raises the original error.
    with contextlib.suppress(asyncpg.InterfaceError, *CONNECTION_ERRORS, TimeoutError):
        await tx.rollback()


class _PostgresTx:
    def __init__(self, conn: Connection, stats: ConnectorStats) -> None:
        self._conn = conn
        self._stats = stats
        self.callbacks: list[Callable[[], None]] = []

    def after_commit(self, callback: Callable[[], None]) -> None:
        self.callbacks.append(callback)

    async def execute(self, query: str, params: Params) -> int:
        sql, args = bind(query, params)
        self._stats.round_trips += 1
        return rowcount(await self._conn.execute(sql, *args))

    async def fetchone(self, query: str, params: Params) -> Row | None:
        sql, args = bind(query, params)
        self._stats.round_trips += 1
        record = await self._conn.fetchrow(sql, *args)
        return dict(record) if record is not None else None

    async def fetchall(self, query: str, params: Params) -> list[Row]:
        sql, args = bind(query, params)
        self._stats.round_trips += 1
        return [dict(record) for record in await self._conn.fetch(sql, *args)]


class PostgresConnector:
    dialect = "postgres"

    def __init__(
        self,
        url: str,
        pool: asyncpg.Pool[asyncpg.Record],
        listener: Listener,
        acquire_timeout: float = ACQUIRE_TIMEOUT_S,
        command_timeout: float = COMMAND_TIMEOUT_S,
        *,
        dsn: str,
    ) -> None:
        self.url = url  # password masked: this one is shown in messages and logs
        self._dsn = dsn  # the URL as given: the leader lock connects with it
        # A read that waits on the server (router/store/server_waits.py) stays well within
        # the statement timeout.
        self.longest_wait_s = command_timeout / 2
        self.queries: Mapping[str, str] = load_queries(self.dialect)
        self._pool = pool
        self._acquire_timeout = acquire_timeout
        self._listener = listener
        self.stats = ConnectorStats()

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        min_size: int = POOL_MIN_SIZE,
        max_size: int = POOL_MAX_SIZE,
        command_timeout: float = COMMAND_TIMEOUT_S,
        acquire_timeout: float = ACQUIRE_TIMEOUT_S,
    ) -> PostgresConnector:
        """`command_timeout`: seconds any one statement may take; `acquire_timeout`: seconds to
        wait for a pooled connection. A stalled server then fails a request (503) instead of
        holding it, and readiness with it, for as long as the stall lasts."""
        safe = redact(url)
        with translated_errors(safe, "cannot open PostgreSQL database", OPEN_ERRORS):
            pool = await asyncpg.create_pool(
                url,
                min_size=min_size,
                max_size=max_size,
                timeout=CONNECT_TIMEOUT_S,
                command_timeout=command_timeout,
                server_settings=session_settings(command_timeout),
                reset=_keep_session,
            )
        try:
            with translated_errors(safe, "cannot migrate PostgreSQL database", OPEN_ERRORS):
                async with pool.acquire() as conn:
                    await migrate(conn)
                listener = await Listener.start(url, safe)
        except BaseException:
            await pool.close()
            raise
        return cls(safe, pool, listener, acquire_timeout, command_timeout, dsn=url)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[_PostgresTx]:
        with translated_errors(self.url, "PostgreSQL write failed", UNAVAILABLE_ERRORS):
            async with self._pool.acquire(timeout=self._acquire_timeout) as conn:
                self.stats.write_transactions += 1
                self.stats.commits += 1
                self.stats.round_trips += 2  # BEGIN and COMMIT
                tx = conn.transaction(isolation="read_committed")
                await _uncancelled(tx.start(), undo=tx.rollback)
                written = _PostgresTx(conn, self.stats)
                try:
                    yield written
                except Exception as exc:
                    if lost(conn):
                        raise StoreError(
                            f"PostgreSQL write failed, connection lost: {exc!r}", url=self.url
                        ) from exc
                    await _rollback(tx)
                    raise
                except BaseException:  # cancelled: leave nothing half done on the connection
                    await _rollback(tx)
                    raise
                try:
                    await _uncancelled(tx.commit(), committed=written.callbacks)
                except Exception as exc:  # a COMMIT that timed out may have committed too
                    if lost(conn) or isinstance(exc, (*CONNECTION_ERRORS, TimeoutError)):
                        raise StoreError(COMMIT_LOST, url=self.url) from exc
                    raise

    async def fetchone(self, query: str, params: Params) -> Row | None:
        sql, args = bind(query, params)
        self.stats.round_trips += 1
        with translated_errors(self.url, "PostgreSQL read failed", UNAVAILABLE_ERRORS):
            async with self._pool.acquire(timeout=self._acquire_timeout) as conn:
                record = await conn.fetchrow(sql, *args)
        return dict(record) if record is not None else None

    async def fetchall(self, query: str, params: Params) -> list[Row]:
        sql, args = bind(query, params)
        self.stats.round_trips += 1
        with translated_errors(self.url, "PostgreSQL read failed", UNAVAILABLE_ERRORS):
            async with self._pool.acquire(timeout=self._acquire_timeout) as conn:
                records = await conn.fetch(sql, *args)
        return [dict(record) for record in records]

    def on_change(self, callback: Callable[[str], None]) -> None:
        """Call `callback(job_id)` after any process commits an event of that job, once this
        process follows events (`callback("")` after the listener reconnected)."""
        self._listener.on_change.append(callback)

    async def follow_events(self) -> None:
        """Hear every event from now on (LISTEN once per process)."""
        await self._listener.listen()

    async def fetchall_aside(self, query: str, params: Params) -> list[Row]:
        return await self.fetchall(query, params)  # asyncpg awaits the server: never blocks

    def leader_lock(self, worker_id: str, *, heartbeat_s: float) -> PgLeaseLock:
        """The advisory lock and its lease, on a connection of its own (a pooled one goes back
        to the pool, and a session lock with it)."""
        return PgLeaseLock(self._dsn, worker_id, self, heartbeat_s=heartbeat_s)

    async def close(self) -> None:
        await self._listener.close()
        await self._pool.close()


async def _keep_session(conn: Connection) -> None:
    """The pool's reset on release: nothing to undo. asyncpg's default runs `SELECT
    pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL` on every release, one more
    transaction on the server for every statement the store sends (it was half of the
    commits per job in the benchmark). Pooled connections here never change session state:
    no SET, no LISTEN (the listener has its own connection), no cursors, no session-level
    advisory locks (migrations take a transaction-level one). A transaction left open is still
    rolled back: asyncpg does that before calling this. Code that needs session state must
    use a connection of its own, not the pool."""


async def migrate(conn: Connection) -> list[int]:
    """Apply the numbered migrations not yet recorded, all in one transaction held under an
    advisory lock: concurrent openers wait, then find them applied. Returns those applied."""
    done: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
            "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
        )
        rows = await conn.fetch("SELECT version FROM schema_migrations")
        applied = {int(row["version"]) for row in rows}
        for number, name, sql in load_migrations("postgres"):
            if number in applied:
                continue
            await conn.execute(sql)
            await conn.execute(
                "INSERT INTO schema_migrations VALUES ($1, $2, $3)", number, name, time.time()
            )
            done.append(number)
    return done


async def _uncancelled(
    step: Awaitable[None],
    undo: Callable[[], Awaitable[None]] | None = None,
    committed: list[Callable[[], None]] | None = None,
) -> None:
    """Let BEGIN or COMMIT finish even when the caller is cancelled, once or more (a worker
    stopping): a cancel in the middle would hand the pool a connection with a transaction half
    open. The cancellation is passed on once the step is done (and, for BEGIN, undone); a
    COMMIT's after-commit callbacks (`committed`) run first when it succeeded."""
    task = asyncio.ensure_future(step)
    cancelled = await until_done(task)
    done_ok = not task.cancelled() and task.exception() is None
    if done_ok and committed is not None:
        run_callbacks(committed)
    if cancelled:
        if undo is not None and done_ok:
            with contextlib.suppress(Exception):
                await undo()
        raise asyncio.CancelledError
    task.result()
