"""Claims and leases: which process holds a job, and for how long. A part of the job store.

A worker takes runnable jobs and starts their first attempts in ONE transaction
(`claim_runnable`): on PostgreSQL every transaction is a commit on the server, and a worker that
read the runnable jobs, claimed each, then started each one's attempt paid three per job.
Where the connector can wait on the server (PostgreSQL), that transaction may first wait for a
job to claim (`wait_s`, router/store/server_waits.py): the wake-up is then the claim itself,
not a notification read in a transaction of its own.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobrouter.models import Attempt, AttemptUsage, Job, NewEvent
from jobrouter.states import AttemptState, EndReason, JobState
from jobrouter.store.changes import Changes
from jobrouter.store.connector import Connector, Tx
from jobrouter.store.rows import attempt_from_row, job_from_row
from jobrouter.store.server_waits import await_runnable, server_wait_s
from jobrouter.store.spend import Reservation
from jobrouter.store.starts import start_first_attempts

if TYPE_CHECKING:
    from jobrouter.store.attempts import AttemptWrites


@dataclass(frozen=True)
class AttemptStart:
    """An attempt to start (and record) before its provider is called. Given to
    `create_and_start`, it goes in the transaction that creates the job (a process that runs
    the jobs it accepts then pays one commit for both); chosen for a job `claim_runnable`
    takes, in the transaction that claims it."""

    provider: str
    model: str | None
    worker: str
    lease_s: float
    notes: Sequence[NewEvent] = ()
    # its worst case and the budgets it is held against (None: no budget covers it), charged
    # in the transaction that writes the attempt row, or the attempt is not started
    reservation: Reservation | None = None


@dataclass(frozen=True)
class Claimed:
    """A job `claim_runnable` took; with its first attempt when one was started with it."""

    job: Job
    attempt: Attempt | None = None
    first: AttemptStart | None = None


# Chooses, inside the claiming transaction, the first attempt of a queued job (or None: the
# job's driver decides as usual). Called only after the wait on the server: what it decides on
# (eligibility) must be read then, not before; keep its I/O to cached reads, rows are locked.
FirstAttempt = Callable[[Job], Awaitable[AttemptStart | None]]


class Claims:
    """Claims of jobs and leases of attempts; `attempts` ends the attempts whose lease ran out."""

    def __init__(self, connector: Connector, changes: Changes, attempts: AttemptWrites) -> None:
        self.connector = connector
        self._q = connector.queries
        self._changes = changes
        self._attempts = attempts

    async def claim(self, job_id: str, worker: str, claim_s: float) -> Job | None:
        now = time.time()
        async with self.connector.write() as tx:
            row = await tx.fetchone(
                self._q["claim_job"],
                {"id": job_id, "worker": worker, "now": now, "claim_until": now + claim_s},
            )
        return job_from_row(row) if row else None

    async def claim_runnable(
        self,
        worker: str,
        claim_s: float,
        limit: int | Callable[[], int],
        first: FirstAttempt,
        on_claimed: Callable[[list[Claimed]], None],
        wait_s: float = 0.0,
    ) -> list[Claimed]:
        """Claim up to `limit` runnable jobs (due, unclaimed or with an expired claim), and
        start the first attempt of each queued one `first` chooses one for, all in one
        transaction. PostgreSQL skips rows another worker is claiming at the same moment.
        `on_claimed(claimed)` runs once committed, even if this call is cancelled while
        waiting for the COMMIT: an attempt started here must reach its driver. `wait_s` > 0
        (at most `claim_wait_s`): first wait on the server up to that long for a job to claim;
        cancelling the call cancels the wait. `limit` may be a callable: read once the wait
        is over (free slots taken meanwhile are not claimed for); 0 or less: claim nothing."""
        now = time.time()
        claimed: list[Claimed] = []
        async with self.connector.write() as tx:
            if wait_s > 0:
                now = await await_runnable(tx, self._q, wait_s)
            most = limit() if callable(limit) else limit
            rows = (
                await tx.fetchall(
                    self._q["claim_runnable"],
                    {"worker": worker, "now": now, "claim_until": now + claim_s, "limit": most},
                )
                if most > 0
                else []
            )
            claimed = await self._start_first(tx, [job_from_row(row) for row in rows], first, now)
            tx.after_commit(functools.partial(on_claimed, claimed))
        for item in claimed:
            if item.attempt is not None:
                self._changes.notify(item.job.id, item.job)
        return claimed

    async def _start_first(
        self, tx: Tx, jobs: list[Job], first: FirstAttempt, now: float
    ) -> list[Claimed]:
        """The claimed `jobs`, each queued one with the first attempt `first` chooses started
        (all in a few statements, router/store/starts.py)."""
        starts: dict[str, AttemptStart] = {}
        for job in jobs:
            start = await first(job) if job.state is JobState.QUEUED else None
            if start is not None:
                starts[job.id] = start
        by_job = {job.id: job for job in jobs}
        started = await start_first_attempts(
            self._q, tx, [(by_job[job_id], start) for job_id, start in starts.items()], now
        )
        moved = {job.id: (job, attempt) for job, attempt in started}
        return [
            Claimed(*moved[job.id], starts[job.id]) if job.id in moved else Claimed(job)
            for job in jobs
        ]

    def claim_wait_s(self, wanted: float) -> float:
        """How long a claim may wait on the server for a job, up to `wanted` (0: it cannot:
        SQLite; workers then poll every `poll_s`)."""
        return server_wait_s(self.connector, wanted)

    async def release(self, job_id: str, worker: str, next_run_s: float = 0.0) -> None:
        params = {"id": job_id, "worker": worker, "next_run_at": time.time() + next_run_s}
        async with self.connector.write() as tx:
            await tx.execute(self._q["release_claim"], params)

    async def renew(
        self, worker: str, job_ids: Iterable[str], lease_s: float, claim_s: float
    ) -> None:
        """Heartbeat: extend the claims and attempt leases of the jobs `worker` has in hand
        (one transaction for all of them: a cost per worker and interval, not per job)."""
        now = time.time()
        ids = json.dumps(sorted(job_ids))
        async with self.connector.write() as tx:
            await tx.execute(
                self._q["renew_claims"],
                {"worker": worker, "ids": ids, "claim_until": now + claim_s},
            )
            await tx.execute(
                self._q["renew_attempt_leases"],
                {"worker": worker, "ids": ids, "lease_until": now + lease_s},
            )

    async def expire_attempts(self, limit: int = 100) -> list[Attempt]:
        """I7: a `started` attempt whose lease ran out (its worker died) becomes `unknown`."""
        rows = await self.connector.fetchall(
            self._q["expired_attempts"], {"now": time.time(), "limit": limit}
        )
        expired = []
        for row in rows:
            attempt = attempt_from_row(row)
            done = await self._attempts.finish_attempt(
                attempt.id,
                AttemptState.UNKNOWN,
                error_kind=EndReason.UNKNOWN,
                usage=AttemptUsage(),
                error=f"lease expired: worker {attempt.worker} did not record an outcome nor "
                "renew the lease in time (it stopped, stalled, or lost the database); the "
                "provider may have received the request",
            )
            if done.state is AttemptState.UNKNOWN:
                expired.append(done)
        return expired
