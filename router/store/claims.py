"""Claims and leases: which process holds a job, and for how long. A part of the job store.

A worker takes runnable jobs and starts their first attempts in ONE transaction (`claiming`,
a `Claim`): on PostgreSQL every transaction is a commit on the server, and a worker that read
the runnable jobs, claimed each, then started each one's attempt paid three per job.
Where the connector can wait on the server (PostgreSQL), that transaction may first wait for a
job to claim (`wait_s`, router/store/server_waits.py): the wake-up is then the claim itself,
not a notification read in a transaction of its own.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobrouter.models import Attempt, AttemptUsage, Job
from jobrouter.states import AttemptState, EndReason, JobState
from jobrouter.store.changes import Changes
from jobrouter.store.connector import Connector, Tx
from jobrouter.store.handoff import Handoff
from jobrouter.store.rows import attempt_from_row, job_from_row
from jobrouter.store.server_waits import await_runnable, server_wait_s
from jobrouter.store.starts import AttemptStart, OnCrossed, Queries, Starting, start_attempts

if TYPE_CHECKING:
    from jobrouter.store.attempts import AttemptWrites


@dataclass(frozen=True)
class Claimed:
    """A job a claim took; with its first attempt when one was started with it."""

    job: Job
    attempt: Attempt | None = None
    first: AttemptStart | None = None


class Claim:
    """One claim, inside its open transaction (`Claims.claiming`): `take` the runnable jobs,
    then `start` the first attempts chosen for the queued ones among them."""

    def __init__(self, q: Queries, tx: Tx, worker: str, claim_s: float, now: float) -> None:
        self._q, self._tx, self._now = q, tx, now
        self._params = {"worker": worker, "now": now, "claim_until": now + claim_s}
        self.claimed: list[Claimed] = []

    async def take(self, limit: int) -> list[Job]:
        """Claim up to `limit` runnable jobs (due, unclaimed or with an expired claim; locked
        until the transaction ends; PostgreSQL skips rows another worker is claiming)."""
        if limit <= 0:
            return []
        rows = await self._tx.fetchall(self._q["claim_runnable"], {**self._params, "limit": limit})
        jobs = [job_from_row(row) for row in rows]
        self.claimed = [Claimed(job) for job in jobs]
        return jobs

    async def start(self, starts: Mapping[str, AttemptStart]) -> list[Claimed]:
        """Start, by job id, the first attempt of each queued job taken (starts.py: a few
        statements however many; a start a budget refuses leaves its job queued). Returns
        every job taken, with its attempt when one started."""
        batch = [
            Starting(item.job, starts[item.job.id])
            for item in self.claimed
            if item.job.id in starts and item.job.state is JobState.QUEUED
        ]
        started = await start_attempts(
            self._q, self._tx, batch, self._now, on_crossed=OnCrossed.SKIP
        )
        moved = {job.id: (job, attempt) for job, attempt in started}
        self.claimed = [
            Claimed(*moved[item.job.id], starts[item.job.id]) if item.job.id in moved else item
            for item in self.claimed
        ]
        return self.claimed


class Claims:
    """Claims of jobs and leases of attempts; `attempts` ends the attempts whose lease ran out."""

    def __init__(
        self, connector: Connector, changes: Changes, attempts: AttemptWrites, handoff: Handoff
    ) -> None:
        self.connector = connector
        self._q = connector.queries
        self._changes = changes
        self._attempts = attempts
        self._handoff = handoff

    async def claim(self, job_id: str, worker: str, claim_s: float) -> Job | None:
        now = time.time()
        async with self.connector.write() as tx:
            row = await tx.fetchone(
                self._q["claim_job"],
                {"id": job_id, "worker": worker, "now": now, "claim_until": now + claim_s},
            )
        return job_from_row(row) if row else None

    @contextlib.asynccontextmanager
    async def claiming(
        self, worker: str, claim_s: float, wait_s: float = 0.0
    ) -> AsyncIterator[Claim]:
        """A claim's one transaction (`Claim`: take jobs, start first attempts), its jobs handed
        over (`Handoff`) once it commits, even if the caller is cancelled while waiting for
        the COMMIT (an attempt started here must reach its driver). `wait_s` > 0 (at most
        `claim_wait_s`): first wait on the server up to that long for a job to claim
        (cancelling the call cancels the wait); what the caller reads inside is read after it."""
        async with self.connector.write() as tx:
            now = await await_runnable(tx, self._q, wait_s) if wait_s > 0 else time.time()
            claim = Claim(self._q, tx, worker, claim_s, now)
            yield claim
            tx.after_commit(functools.partial(self._hand_over, claim.claimed))
        for item in claim.claimed:
            if item.attempt is not None:
                self._changes.notify(item.job.id, item.job)

    def _hand_over(self, claimed: list[Claimed]) -> None:
        for item in claimed:
            self._handoff.committed(item.job, item.attempt)

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
