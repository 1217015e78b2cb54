"""The PostgreSQL connector's listener: one dedicated connection that LISTENs for the events
other router processes commit (`jobrouter_events`, with the job id of every appended event,
migration 0001), once this process follows them (`Router.watch`, the SSE stream). It is the only
channel heard: workers' claims and `Router.wait` wait on the server instead
(router/store/server_waits.py). If its connection drops it reconnects with backoff; until then
watchers fall back to their polling interval, and once back every watcher reads again.

The triggers notify only while some process follows the kind (migration 0014): after its
LISTEN the connection writes its row in `jobrouter_follows` (its backend pid, what it follows,
until when), renews it every FOLLOW_RENEW_S and deletes it on close; the row of a listener
that died lapses after FOLLOW_TTL_S."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import asyncpg

from jobrouter.providers.backoff import Backoff
from jobrouter.store.pg_connection import (
    CONNECT_TIMEOUT_S,
    CONNECTION_ERRORS,
    OPEN_ERRORS,
    translated_errors,
)

log = logging.getLogger("jobrouter.store.postgres")

RECONNECT_MAX_DELAY_S = 10.0
# the product's one backoff (providers/backoff.py): full jitter, 0.5 s doubling to the cap
RECONNECT = Backoff(initial=0.5, cap=RECONNECT_MAX_DELAY_S, retry_after_cap=None)
EVENTS_CHANNEL = "jobrouter_events"
FOLLOW_TTL_S = 30.0
FOLLOW_RENEW_S = 10.0
# Run on the listening connection itself: its pid is the one that hears.
FOLLOW = (
    "INSERT INTO jobrouter_follows (pid, kinds, alive_until) "
    "VALUES (pg_backend_pid(), 'events', extract(epoch FROM now()) + $1) "
    "ON CONFLICT (pid) DO UPDATE SET kinds = excluded.kinds, alive_until = excluded.alive_until"
)
UNFOLLOW = "DELETE FROM jobrouter_follows WHERE pid = pg_backend_pid()"
# A renewal that fails (connection gone or closing, a server error) stops renewing: the row
# lapses, watchers poll, and a reconnect writes it again.
RENEW_ERRORS: tuple[type[BaseException], ...] = (
    *CONNECTION_ERRORS,
    asyncpg.InterfaceError,
    asyncpg.PostgresError,
)


class Listener:
    """One dedicated connection LISTENing for events once this process follows them (a pooled
    connection would lose its LISTEN when returned); reconnects with backoff when the
    connection drops, LISTENing again if it did."""

    def __init__(self, dsn: str, url: str) -> None:
        self._dsn = dsn
        self._url = url
        self.on_change: list[Callable[[str], None]] = []
        self._listening: asyncio.Future[None] | None = None  # LISTEN sent (or being sent)
        self._conn: asyncpg.Connection[asyncpg.Record] | None = None
        self._reconnect: asyncio.Task[None] | None = None
        self._renewing: asyncio.Task[None] | None = None
        self._using = asyncio.Lock()  # one statement at a time on the connection
        self._closed = False

    @classmethod
    async def start(cls, dsn: str, url: str) -> Listener:
        listener = cls(dsn, url)
        await listener._connect()
        return listener

    async def listen(self) -> None:
        """LISTEN for events (once; a second caller waits for the first one's LISTEN)."""
        pending = self._listening
        if pending is None:
            pending = self._listening = asyncio.ensure_future(self._listen())
        try:
            await asyncio.shield(pending)
        except Exception:
            if self._listening is pending:
                self._listening = None  # the next caller tries again
            raise

    async def _listen(self) -> None:
        if self._conn is not None:  # else the reconnect LISTENs
            with translated_errors(self._url, "cannot LISTEN", CONNECTION_ERRORS):
                await self._conn.add_listener(EVENTS_CHANNEL, self._changed)
                await self._announce(self._conn)

    def _name(self) -> str:
        """What this connection hears, in its application_name: for operators (the triggers
        look at `jobrouter_follows`)."""
        return "jobrouter-listen:" + ("events" if self._listening is not None else "")

    async def _announce(self, conn: asyncpg.Connection[asyncpg.Record]) -> None:
        """Say what `conn` hears: its name, and its follow row once it LISTENs. After the
        LISTEN, so nothing is sent before it is heard (a notifier that read the table just
        before may still skip one, which a watcher's poll then finds)."""
        async with self._using:
            await conn.execute("SELECT set_config('application_name', $1, false)", self._name())
            if self._listening is None:
                return
            await conn.execute(FOLLOW, FOLLOW_TTL_S)
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.get_running_loop().create_task(
                self._renew(), name="jobrouter-follow-renew"
            )

    async def _renew(self) -> None:
        """Renew the follow row while the connection lives. A failed renewal leaves the row to
        the reconnect (which writes it again) or to its TTL: notifications missed meanwhile
        are found by the watchers' polls."""
        while not self._closed:
            await asyncio.sleep(FOLLOW_RENEW_S)
            conn = self._conn
            if conn is None:
                return
            try:
                async with self._using:
                    await conn.execute(FOLLOW, FOLLOW_TTL_S)
            except RENEW_ERRORS:
                log.warning("%s: renewing the follow row failed", self._url, exc_info=True)
                return

    async def _connect(self) -> None:
        conn = await asyncpg.connect(
            self._dsn,
            timeout=CONNECT_TIMEOUT_S,
            server_settings={"application_name": self._name()},
        )
        try:
            heard = False
            while True:  # a `listen` begun during an await here found no connection to use
                if self._listening is not None and not heard:
                    await conn.add_listener(EVENTS_CHANNEL, self._changed)
                    heard = True
                name = self._name()
                await conn.execute("SELECT set_config('application_name', $1, false)", name)
                if name == self._name():
                    break
            if heard:
                await self._announce(conn)
        except BaseException:
            await conn.close()
            raise
        conn.add_termination_listener(self._lost)
        self._conn = conn

    def _changed(self, conn: object, pid: int, channel: str, job_id: object) -> None:
        for callback in self.on_change:
            self._call(callback, str(job_id))

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
        failures = 0
        while not self._closed:
            try:
                await self._connect()
            except OPEN_ERRORS as exc:
                failures += 1
                delay = RECONNECT.wait_s(failures)
                log.warning(
                    "%s: LISTEN reconnect failed (%s); retry in %.1fs", self._url, exc, delay
                )
                await asyncio.sleep(delay)
                continue
            log.info("%s: LISTEN connection restored", self._url)
            for change in self.on_change:  # changes missed meanwhile: watchers read again
                self._call(change, "")
            return

    async def close(self) -> None:
        self._closed = True
        if self._reconnect is not None:
            self._reconnect.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnect
        if self._renewing is not None:
            self._renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewing
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with contextlib.suppress(*CONNECTION_ERRORS):
                if self._listening is not None:  # else it has no row
                    async with self._using:
                        await conn.execute(UNFOLLOW)
                await conn.close(timeout=CONNECT_TIMEOUT_S)
