"""One leader among the router processes of a database, and the periodic work only it runs.

Periodic work (sweeping expired attempt leases, re-claiming outbox events of dead processes,
the retention purge, certification expiry warnings: see `jobrouter.periodic`) must run in one
process at a time. On PostgreSQL the processes elect that one with a session-level advisory
lock bound to a lease the leader renews (router/store/leader_lock.py; the connector gives a
process its `LeaderLock`, so this module knows no dialect and no SQL):

- every `heartbeat` seconds a follower tries the lock (and when the holder's lease expires, if
  sooner); the one that gets it takes the lease (1.5 heartbeats) with the next term and is the
  leader. A follower that finds the lock held but the lease expired (the leader froze:
  SIGSTOP, a stalled VM, while its TCP session lives) ends that session, which frees the lock,
  and takes over: within about two heartbeats of the leader's last renewal. A lock holder the
  lease does not name (a candidate that froze before it took the lease) is ended the same way,
  once the lease has been expired for longer than a try may take;
- the leader renews the lease every half heartbeat on the lock's connection. A failed or
  silent renewal, a lease another took, or the connection seen closed (a termination listener:
  at once, not at the next heartbeat) deposes it: its periodic tasks are cancelled and awaited
  first, and only then is the connection dropped, so it cannot start a task after the next
  leader could;
- the leader's own clock cuts it off too: without a renewal that succeeded within 0.8 of the
  lease, it steps down, and the lease (timed by the database from the renewal's arrival,
  later) has not yet expired for the followers;
- every run is fenced: just before it, the lease is renewed under the leader's term, so a
  leader that wakes after being replaced, or that lost its session, runs nothing;
- a leader that dies (SIGKILL, a lost machine) loses its session, and PostgreSQL frees the lock
  as soon as it notices: at once for a killed process on a live machine, after about 11 s of
  TCP keepalive for a vanished one (a follower ends it once its lease expires, sooner).

A session ended by the server itself (`pg_terminate_backend`, a server restart) frees the lock
at the moment the leader sees its connection close, and the next leader may take it within
those milliseconds; a run whose fence passed just before keeps going until the leader's
termination listener cancels it. That window is harmless because every periodic task is
idempotent (each change guarded by its WHERE clause: an attempt already unknown, a claim
already freed, a job already purged).

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

from prometheus_client import Counter, Gauge

from jobrouter.aio import stop_if_cancelled
from jobrouter.metrics import REGISTRY
from jobrouter.store.connector import LeaderLock

log = logging.getLogger("jobrouter.leader")

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


# Of the lease: a leader whose last renewal was sent longer ago than this stops its periodic
# work; the database times the lease from the renewal's arrival, so the followers see it
# expire only after that.
CUT_FRACTION = 0.8
RENEWALS_PER_HEARTBEAT = 2  # two chances to renew before the cut-off of a 1.5-heartbeat lease
# A follower waking at the holder's lease expiry (by the database's clock) tries this much
# later, so the lease is seen expired and not a millisecond short of it.
EXPIRY_MARGIN_S = 0.01


@dataclass(frozen=True)
class PeriodicTask:
    name: str
    interval_s: float
    run: Callable[[], Awaitable[object]]
    # Wait a whole interval before the first run: work that costs provider calls (the golden
    # probes) must not run again at every election, or a leader that changes often would
    # multiply its cap.
    wait_first: bool = False


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
        self._valid_until: float | None = None  # loop time; None: no lease to outlive
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
        await self._depose("stopping", lost=False)
        await self.lock.release()

    async def holder(self) -> str | None:
        """Who leads now, as the database sees it (None: nobody, for the moment)."""
        return await self.lock.holder()

    async def _campaign(self) -> None:
        while True:
            stop_if_cancelled()
            try:
                if not self.is_leader:
                    sent = asyncio.get_running_loop().time()
                    if await self.lock.try_acquire():
                        self._renewed(sent)
                        self._elect()
                else:
                    await self._renew()
            except Exception as exc:  # a lost lease or session: whatever we held is gone or going
                if self.is_leader:
                    log.warning(
                        "leader %s lost its lease (%s: %s); stepping down",
                        self.worker_id,
                        type(exc).__name__,
                        exc,
                    )
                else:
                    log.warning("leader election: %s: %s", type(exc).__name__, exc)
                await self._depose("lease lost", lost=True)  # tasks end before the lock goes
                await self.lock.release()
            await self._until_due()

    async def _until_due(self) -> None:
        """Wait for a lost session, or the next renewal (leading; at the latest the lease's
        cut-off) or try (following; at the latest when the holder's lease expires)."""
        now = asyncio.get_running_loop().time()
        if self.is_leader:
            due = now + self.heartbeat_s / RENEWALS_PER_HEARTBEAT
            if self._valid_until is not None:
                due = min(due, self._valid_until)
        else:
            due = now + self.heartbeat_s
            if self.lock.retry_in is not None:
                due = min(due, now + self.lock.retry_in + EXPIRY_MARGIN_S)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(due):
                await self._check_now.wait()
        self._check_now.clear()

    async def _renew(self) -> None:
        """Renew the lease, within its cut-off: raises when it was not renewed in time."""
        loop = asyncio.get_running_loop()
        sent = loop.time()
        if self._valid_until is not None and sent >= self._valid_until:
            # a frozen process wakes up here, its lease expired or taken meanwhile
            raise TimeoutError(f"lease not renewed within {CUT_FRACTION} of its length")
        async with asyncio.timeout_at(self._valid_until):
            await self.lock.check()
        self._renewed(sent)

    def _renewed(self, sent: float) -> None:
        lease = self.lock.lease_s
        self._valid_until = None if lease is None else sent + CUT_FRACTION * lease

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

    async def _depose(self, why: str, *, lost: bool) -> None:
        running, self._running = self._running, []
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        if self.is_leader:
            self.is_leader = False
            self.elected_at = None
            self._valid_until = None
            IS_LEADER.set(0)
            LEADER_CHANGES.labels(change="deposed").inc()
            log.log(
                logging.WARNING if lost else logging.INFO,
                "leader %s stepped down: %s",
                self.worker_id,
                why,
            )
            self.changed.set()

    async def _repeat(self, task: PeriodicTask) -> None:
        if task.wait_first:
            await asyncio.sleep(task.interval_s)
        while True:
            stop_if_cancelled()
            if await self._fenced(task.name):
                await run_periodic(task, self.worker_id)
            await asyncio.sleep(task.interval_s)

    async def _fenced(self, name: str) -> bool:
        """The fence of a run: the lease renewed under this leader's term just before it. False
        (and the campaign woken to step down) when the lease is not this leader's any more."""
        try:
            await self._renew()
        except Exception as exc:
            log.warning(
                "periodic %s not run by %s: %s: %s", name, self.worker_id, type(exc).__name__, exc
            )
            self._check_now.set()
            return False
        return True


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
