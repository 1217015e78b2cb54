"""The PostgreSQL connector's listener: one dedicated connection that LISTENs for the changes
other router processes commit. Triggers `pg_notify` at commit: `jobrouter_events` with the job
id of every appended event, `jobrouter_jobs` when a job becomes free for any worker (migration
0001), `jobrouter_settled` when a job settles (0009). The listener LISTENs on a channel only
once this process follows it; `pause` stops hearing one for a while. If its connection drops it
reconnects with backoff, and until then watchers and pollers fall back to their polling
intervals."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable

import asyncpg

from router.store.connector import Row
from router.store.pg_connection import (
    CONNECT_TIMEOUT_S,
    CONNECTION_ERRORS,
    OPEN_ERRORS,
    translated_errors,
)

log = logging.getLogger("jobrouter.store.postgres")

RECONNECT_MAX_DELAY_S = 10.0
EVENTS_CHANNEL = "jobrouter_events"
JOBS_CHANNEL = "jobrouter_jobs"
SETTLED_CHANNEL = "jobrouter_settled"
CHANNELS = {"events": EVENTS_CHANNEL, "runnable": JOBS_CHANNEL, "settled": SETTLED_CHANNEL}


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
