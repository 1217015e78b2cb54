"""PostgreSQL connector (asyncpg): a connection pool for several router processes on several
machines, plus one dedicated connection that LISTENs for their changes.

How the shared SQL becomes PostgreSQL:
- Named queries keep their `:name` parameters; each query text is translated to `$n` once and
  cached (string literals, quoted names, comments and `::casts` are left alone).
- Write transactions run on a pooled connection under READ COMMITTED; the few read-check-write
  sequences lock their job row first (`lock_job ... FOR UPDATE` in queries_postgres.sql), which
  makes the compare-and-swap race-free across processes.
- Migrations run at open, in one transaction under `pg_advisory_xact_lock`, so routers starting
  together migrate exactly once and the others find the work done.
- Triggers `pg_notify` at commit: `jobrouter_events` with the job id of every appended event,
  `jobrouter_jobs` when a job becomes free for any worker (migration 0001), `jobrouter_settled`
  when a job settles (0009). The listener LISTENs on a channel only once this process follows
  it (`follow`): every notification costs each listening backend a transaction on the server,
  so a worker does not hear every event, and `pause` stops hearing one for a while. It calls
  the callbacks registered with `on_change` / `on_runnable`; if its connection drops it
  reconnects, and until then watchers and pollers fall back to their polling intervals.
Errors: connection failures become `StoreError` naming the URL with its password masked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg

from providers.redact import scrub
from router.errors import StoreError
from router.store.connector import (
    ConnectorStats,
    Params,
    Row,
    check_params,
    load_migrations,
    load_queries,
    run_callbacks,
    until_done,
)
from router.store.pg_url import redact

log = logging.getLogger("jobrouter.store.postgres")

POOL_MIN_SIZE = 1
POOL_MAX_SIZE = 16
CONNECT_TIMEOUT_S = 10.0
RECONNECT_MAX_DELAY_S = 10.0
MIGRATION_LOCK = 0x6A6F62726F757465  # "jobroute": one advisory lock key per database
EVENTS_CHANNEL = "jobrouter_events"
JOBS_CHANNEL = "jobrouter_jobs"
SETTLED_CHANNEL = "jobrouter_settled"
CHANNELS = {"events": EVENTS_CHANNEL, "runnable": JOBS_CHANNEL, "settled": SETTLED_CHANNEL}

# Errors that mean "the database cannot be reached or dropped us", as opposed to a statement
# that failed; only these are translated, everything else keeps its asyncpg type.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    # The server's FATAL arrived between two statements and the socket is not closed yet:
    # asyncpg is stuck consuming the error and refuses the next statement with this.
    asyncpg.InternalClientError,
)
# The database cannot serve now, though the connection may be fine: a command or an acquire
# that ran out of time (a stalled server), a full disk, no memory, a read-only server. They
# become a transient StoreError too (HTTP 503 with Retry-After), never an unexpected error.
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    *CONNECTION_ERRORS,
    TimeoutError,
    asyncpg.InsufficientResourcesError,
    asyncpg.ReadOnlySQLTransactionError,
    asyncpg.QueryCanceledError,
)
COMMAND_TIMEOUT_S = 30.0
ACQUIRE_TIMEOUT_S = 10.0
COMMIT_LOST = "connection lost during COMMIT: the transaction may or may not have committed"
# At open every failure (bad database name, refused password, unreachable host) means the same.
OPEN_ERRORS: tuple[type[BaseException], ...] = (
    *CONNECTION_ERRORS,
    TimeoutError,
    ValueError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
)

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


@contextlib.contextmanager
def translated_errors(
    url: str, doing: str, errors: tuple[type[BaseException], ...]
) -> Iterator[None]:
    """Re-raise `errors` as StoreError (chained), naming the URL without its password."""
    try:
        yield
    except errors as exc:  # the driver's message may quote the URL it was given
        raise StoreError(f"{doing}: {type(exc).__name__}: {scrub(str(exc))}", url=url) from exc


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
    ) -> None:
        self.url = url  # password masked: this one is shown in messages and logs
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
                server_settings={"application_name": "jobrouter"},
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
        return cls(safe, pool, listener, acquire_timeout)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[_PostgresTx]:
        with translated_errors(self.url, "PostgreSQL write failed", UNAVAILABLE_ERRORS):
            async with self._pool.acquire(timeout=self._acquire_timeout) as conn:
                self.stats.write_transactions += 1
                self.stats.commits += 1
                self.stats.round_trips += 2  # BEGIN and COMMIT
                tx = conn.transaction()
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

    def on_change(self, callback: Callable[[str, Row | None], None]) -> None:
        """Call `callback(job_id, row)` after any process commits a change of that job that
        this process follows (every event, or its settling: then with the job's row)."""
        self._listener.on_change.append(callback)

    async def follow(self, what: str) -> bool:
        """Hear `what` from now on ("events", "settled" or "runnable"); once per process.
        True when this call began following."""
        return await self._listener.listen(what)

    async def pause(self, what: str, paused: bool) -> None:
        await self._listener.pause(what, paused)

    @property
    def feed_live(self) -> bool:
        """Whether notifications arrive now (the LISTEN connection is up)."""
        return self._listener.live

    def on_runnable(self, callback: Callable[[], None]) -> None:
        """Call `callback()` after any process commits a job that any worker may claim now."""
        self._listener.on_runnable.append(callback)

    async def fetchall_aside(self, query: str, params: Params) -> list[Row]:
        return await self.fetchall(query, params)  # asyncpg awaits the server: never blocks

    async def close(self) -> None:
        await self._listener.close()
        await self._pool.close()


class Listener:
    """One dedicated connection LISTENing on the channels this process follows (a pooled
    connection would lose its LISTEN when returned); reconnects with backoff when the
    connection drops, LISTENing again on every channel followed so far."""

    def __init__(self, dsn: str, url: str) -> None:
        self._dsn = dsn
        self._url = url
        self.on_change: list[Callable[[str, Row | None], None]] = []
        self.on_runnable: list[Callable[[], None]] = []
        self._channels: dict[str, asyncio.Future[None]] = {}  # LISTEN sent (or being sent)
        self._paused: set[str] = set()  # followed, but not LISTENed for now (see `pause`)
        self._conn: asyncpg.Connection[asyncpg.Record] | None = None
        self._reconnect: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def live(self) -> bool:
        return self._conn is not None

    @classmethod
    async def start(cls, dsn: str, url: str) -> Listener:
        listener = cls(dsn, url)
        await listener._connect()
        return listener

    async def listen(self, what: str) -> bool:
        """LISTEN for `what` (once; a second caller waits for the first one's LISTEN). True
        for the call that began it."""
        pending = self._channels.get(what)
        began = pending is None
        if pending is None:
            pending = self._channels[what] = asyncio.ensure_future(self._listen(what))
        try:
            await asyncio.shield(pending)
        except Exception:
            if self._channels.get(what) is pending:
                del self._channels[what]  # the next caller tries again
            raise
        return began

    async def _listen(self, what: str) -> None:
        if self._conn is not None:  # else the reconnect LISTENs for everything followed
            with translated_errors(self._url, "cannot LISTEN", CONNECTION_ERRORS):
                await self._conn.add_listener(CHANNELS[what], self._handler(what))
                await self._conn.execute(
                    "SELECT set_config('application_name', $1, false)", self._name()
                )

    async def pause(self, what: str, paused: bool) -> None:
        """UNLISTEN (or LISTEN again) and rename the connection in one server transaction."""
        if what not in self._channels or (what in self._paused) == paused:
            return
        self._paused.symmetric_difference_update({what})
        if self._conn is not None:  # else the reconnect LISTENs for what is not paused
            verb, name = "UNLISTEN" if paused else "LISTEN", self._name().replace("'", "''")
            with translated_errors(self._url, f"cannot {verb}", CONNECTION_ERRORS):
                await self._conn.execute(
                    f"{verb} {CHANNELS[what]}; "
                    f"SELECT set_config('application_name', '{name}', false)"
                )

    def _name(self) -> str:
        """What this connection hears, where the triggers of migration 0009 look: a kind
        nobody hears is not notified at all. Set after the LISTEN, so nothing is sent before
        it is heard; a notifier that read the names just before may still skip one, which a
        poll then finds."""
        return "jobrouter-listen:" + ",".join(sorted(set(self._channels) - self._paused))

    def _handler(self, what: str) -> Callable[[object, int, str, object], None]:
        return {"runnable": self._runnable, "settled": self._settled}.get(what, self._changed)

    async def _connect(self) -> None:
        conn = await asyncpg.connect(
            self._dsn,
            timeout=CONNECT_TIMEOUT_S,
            server_settings={"application_name": self._name()},
        )
        try:
            done: set[str] = set()
            while missing := [w for w in self._channels if w not in done]:  # new ones meanwhile
                for what in missing:
                    await conn.add_listener(CHANNELS[what], self._handler(what))
                    if what in self._paused:  # the handler stays; the channel is not heard
                        await conn.execute(f"UNLISTEN {CHANNELS[what]}")
                    done.add(what)
            await conn.execute("SELECT set_config('application_name', $1, false)", self._name())
        except BaseException:
            await conn.close()
            raise
        conn.add_termination_listener(self._lost)
        self._conn = conn

    def _changed(self, conn: object, pid: int, channel: str, job_id: object) -> None:
        for callback in self.on_change:
            self._call(callback, str(job_id), None)

    def _settled(self, conn: object, pid: int, channel: str, payload: object) -> None:
        """The settled job's row as JSON (migration 0009), or its id alone when too big."""
        text = str(payload)
        row: Row | None = json.loads(text) if text.startswith("{") else None
        job_id = str(row["id"]) if row is not None else text
        for callback in self.on_change:
            self._call(callback, job_id, row)

    def _runnable(self, conn: object, pid: int, channel: str, job_id: object) -> None:
        for callback in self.on_runnable:
            self._call(callback)

    @staticmethod
    def _call(callback: Callable[..., None], *args: object) -> None:
        try:
            callback(*args)
        except Exception:  # one broken subscriber must not silence the others
            log.exception("change callback %r failed", callback)

    def _lost(self, conn: object) -> None:
        if self._closed:
            return
        log.warning("%s: lost the LISTEN connection; reconnecting (polling meanwhile)", self._url)
        self._conn = None
        self._reconnect = asyncio.get_running_loop().create_task(self._reconnect_loop())

    async def _reconnect_loop(self) -> None:
        delay = 0.5
        while not self._closed:
            try:
                await self._connect()
            except OPEN_ERRORS as exc:
                log.warning(
                    "%s: LISTEN reconnect failed (%s); retry in %.1fs", self._url, exc, delay
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_DELAY_S)
                continue
            log.info("%s: LISTEN connection restored", self._url)
            for callback in self.on_runnable:  # jobs freed while we were away: look now
                self._call(callback)
            for change in self.on_change:  # changes missed meanwhile: watchers read again
                self._call(change, "", None)
            return

    async def close(self) -> None:
        self._closed = True
        if self._reconnect is not None:
            self._reconnect.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnect
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with contextlib.suppress(*CONNECTION_ERRORS):
                await conn.close(timeout=CONNECT_TIMEOUT_S)


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
