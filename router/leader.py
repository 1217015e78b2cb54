"""One leader among the router processes of a database, and the periodic work only it runs.

Periodic work (sweeping expired attempt leases, re-claiming outbox events of dead processes,
the retention purge, certification expiry warnings: see `jobrouter.periodic`) must run in one
process at a time. On PostgreSQL the processes elect that one with a session-level
`pg_try_advisory_lock` held on a connection of its own (not a pooled one: a pooled connection
goes back to the pool, and the lock with it):

- every `heartbeat` seconds a follower tries the lock; the one that gets it is the leader;
- the leader runs `SELECT 1` on that connection every `heartbeat` seconds, bounded by the same
  time; a failed or silent heartbeat, or the connection seen closed, deposes it: its periodic
  tasks are cancelled and awaited first, and only then is the connection dropped (which frees
  the lock), so the next leader cannot start a task while the old one still runs it;
- a leader that dies (SIGKILL, a lost machine) loses its session, and PostgreSQL frees the lock
  as soon as it notices: at once for a killed process on a live machine (the kernel closes its
  socket), after about 11 s of TCP keepalive (set on that session) for a vanished one; a
  partitioned leader's own heartbeat fails sooner, so it has stopped by then. A follower takes
  the lock at its next try.

A session ended by the server itself (`pg_terminate_backend`, a server restart) frees the lock
at the moment the leader sees its connection close; a follower may then start within those
milliseconds, before the old leader's tasks are cancelled. No fencing token closes that window;
it is harmless because every periodic task is idempotent (each change guarded by its WHERE
clause: an attempt already unknown, a claim already freed, a job already purged).

The lock connection's `application_name` is `jobrouter-leader:<worker id>`, so any process can
name the leader from `pg_locks` (`/health/ready`, `jobrouter_leader` in /metrics).
On SQLite (one machine, one file) the single process is the leader; several processes on one
SQLite file each count as their own leader (SQLite has no session locks that die with them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import Counter, Gauge

from jobrouter.metrics import REGISTRY

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

IS_LEADER = Gauge(
    "jobrouter_leader",
    "1 while this process is the leader that runs periodic work, else 0.",
    registry=REGISTRY,
)
LEADER_CHANGES = Counter(
    "jobrouter_leader_changes",
    "Times this process became leader (elected) or stopped being it (deposed).",
    ["change"],
    registry=REGISTRY,
)
PERIODIC_RUNS = Counter(
    "jobrouter_periodic_runs",
    "Runs of periodic work on the leader, by task and outcome (ok, error).",
    ["task", "outcome"],
    registry=REGISTRY,
)


class LeaderLock(Protocol):
    """What a leader is elected with: one backend's exclusive, session-bound lock."""

    async def try_acquire(self) -> bool:
        """Take the lock if free; True when this process holds it after the call."""
        ...

    async def check(self) -> None:
        """Raise when the hold may be lost (the session no longer answers)."""
        ...

    async def release(self) -> None:
        """Let the lock go (drop the session); safe to call when not held."""
        ...

    async def holder(self) -> str | None:
        """The worker id of the process that holds the lock, as the database sees it."""
        ...

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Call `callback()` as soon as the session holding the lock is seen to end."""
        ...


@dataclass(frozen=True)
class PeriodicTask:
    name: str
    interval_s: float
    run: Callable[[], Awaitable[object]]


class SoleLock:
    """SQLite: one machine, no session lock that dies with its process; this process leads."""

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


class PgAdvisoryLock:
    """`pg_try_advisory_lock(LEADER_LOCK)` on a dedicated asyncpg connection."""

    def __init__(self, dsn: str, worker_id: str, connector: Connector, *, timeout_s: float) -> None:
        self.dsn = dsn
        self.worker_id = worker_id
        self.connector = connector  # its pool answers `holder` while the lock connection is busy
        self.timeout_s = timeout_s
        self._conn: Any = None  # asyncpg.Connection, imported lazily with the extra
        self._lost: list[Callable[[], None]] = []

    async def try_acquire(self) -> bool:
        import asyncpg

        async with asyncio.timeout(self.timeout_s):
            if self._conn is None or self._conn.is_closed():
                app = (APP_NAME_PREFIX + self.worker_id)[:PG_APP_NAME_MAX]
                self._conn = await asyncpg.connect(
                    self.dsn,
                    timeout=self.timeout_s,
                    server_settings={"application_name": app, **SERVER_KEEPALIVE},
                )
                self._conn.add_termination_listener(self._terminated)
            return bool(await self._conn.fetchval("SELECT pg_try_advisory_lock($1)", LEADER_LOCK))

    async def check(self) -> None:
        if self._conn is None or self._conn.is_closed():
            raise ConnectionError("the leader's lock connection is closed")
        async with asyncio.timeout(self.timeout_s):
            await self._conn.fetchval("SELECT 1")

    def on_lost(self, callback: Callable[[], None]) -> None:
        self._lost.append(callback)

    def _terminated(self, conn: object) -> None:
        if conn is self._conn:  # not a connection we let go ourselves
            for callback in self._lost:
                callback()

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            # terminate, not close: a close waits on a session that may not answer any more;
            # the server frees the session's locks when the socket goes.
            conn.terminate()

    async def holder(self) -> str | None:
        row = await self.connector.fetchone(
            "SELECT a.application_name AS app FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 "
            "AND l.objid = :key AND l.database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())",
            {"key": LEADER_LOCK},
        )
        if row is None or not str(row["app"]).startswith(APP_NAME_PREFIX):
            return None
        return str(row["app"])[len(APP_NAME_PREFIX) :]


class Leader:
    """Elects this process (or not) every `heartbeat_s` and runs `tasks` while it leads."""

    def __init__(
        self,
        lock: LeaderLock,
        worker_id: str,
        tasks: Sequence[PeriodicTask],
        *,
        heartbeat_s: float,
    ) -> None:
        self.lock = lock
        self.worker_id = worker_id
        self.tasks = list(tasks)
        self.heartbeat_s = heartbeat_s
        self.is_leader = False
        self.elected_at: float | None = None
        self._running: list[asyncio.Task[None]] = []
        self._loop: asyncio.Task[None] | None = None
        self.changed = asyncio.Event()  # set on every election and deposition (tests wait on it)
        self._check_now = asyncio.Event()
        lock.on_lost(self._check_now.set)  # a lost session: stop the periodic work at once

    def start(self) -> None:
        if self._loop is not None:
            raise RuntimeError("the leader election is already running")
        self._loop = asyncio.create_task(self._campaign(), name="jobrouter-leader")

    async def stop(self) -> None:
        """Stop the periodic work (awaited), then let the lock go."""
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None
        await self._depose("stopping", logging.INFO)  # a normal close: nothing went wrong
        await self.lock.release()

    async def holder(self) -> str | None:
        """Who leads now, as the database sees it (None: nobody, for the moment)."""
        return await self.lock.holder()

    async def _campaign(self) -> None:
        while True:
            try:
                if not self.is_leader:
                    if await self.lock.try_acquire():
                        self._elect()
                else:
                    await self.lock.check()
            except Exception as exc:  # a lost session: whatever we held is gone or going
                if self.is_leader:
                    log.error(
                        "leader %s lost its lock session (%s: %s); stepping down",
                        self.worker_id,
                        type(exc).__name__,
                        exc,
                    )
                else:
                    log.warning("leader election: %s: %s", type(exc).__name__, exc)
                await self._depose("lock session lost")  # tasks end before the lock goes
                await self.lock.release()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.heartbeat_s):
                    await self._check_now.wait()
            self._check_now.clear()

    def _elect(self) -> None:
        self.is_leader = True
        self.elected_at = time.time()
        IS_LEADER.set(1)
        LEADER_CHANGES.labels(change="elected").inc()
        log.info(
            "leader elected: %s runs the periodic work (%s)",
            self.worker_id,
            ", ".join(task.name for task in self.tasks) or "none",
        )
        self._running = [
            asyncio.create_task(self._repeat(task), name=f"periodic-{task.name}")
            for task in self.tasks
        ]
        self.changed.set()

    async def _depose(self, why: str, level: int = logging.WARNING) -> None:
        running, self._running = self._running, []
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        if self.is_leader:
            self.is_leader = False
            self.elected_at = None
            IS_LEADER.set(0)
            LEADER_CHANGES.labels(change="deposed").inc()
            log.log(level, "leader %s stepped down: %s", self.worker_id, why)
            self.changed.set()

    async def _repeat(self, task: PeriodicTask) -> None:
        while True:
            await run_periodic(task, self.worker_id)
            await asyncio.sleep(task.interval_s)


async def run_periodic(task: PeriodicTask, worker_id: str) -> None:
    """One run of a periodic task, logged at its start and end (tests read these lines to show
    that no task ever runs in two processes at once)."""
    log.info("periodic %s started by %s at %.6f", task.name, worker_id, time.time())
    outcome = "ok"
    try:
        await task.run()
    except asyncio.CancelledError:
        log.info("periodic %s cancelled in %s at %.6f", task.name, worker_id, time.time())
        raise
    except Exception:
        outcome = "error"
        log.exception("periodic %s failed in %s", task.name, worker_id)
    PERIODIC_RUNS.labels(task=task.name, outcome=outcome).inc()
    log.info("periodic %s finished by %s at %.6f", task.name, worker_id, time.time())


def leader_lock(connector: Connector, dsn: str, worker_id: str, *, timeout_s: float) -> LeaderLock:
    """The lock for the connector's backend: an advisory lock on PostgreSQL, else this process."""
    if connector.dialect == "postgres":
        return PgAdvisoryLock(dsn, worker_id, connector, timeout_s=timeout_s)
    return SoleLock(worker_id)
