"""Jobs in the store: submit (create, or find by idempotency key; the first attempt in the
same transaction when asked) and the job's own outcomes (settle, note, cancel, reopen). A part
of the job store; the steps inside a transaction are in transitions.py.

Every state change runs in one write transaction together with its events (and, for a terminal
change, its outbox row), so the log, the row and the outbox can never disagree.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from jobrouter.errors import IdempotencyConflict, JobNotFound
from jobrouter.models import (
    Attempt,
    AttemptUsage,
    Job,
    JsonObject,
    NewEvent,
    new_id,
    payload_fingerprint,
)
from jobrouter.states import AttemptState, EndReason, EventKind, JobState
from jobrouter.store.changes import Changes
from jobrouter.store.claims import AttemptStart
from jobrouter.store.connector import Connector, Row, Tx
from jobrouter.store.outbox import OutboxWritten
from jobrouter.store.reads import JobReads
from jobrouter.store.rows import attempt_from_row, dumps, job_from_row
from jobrouter.store.spend import charge_in, record_holds_in, take_back_in
from jobrouter.store.transitions import (
    append_events,
    end_attempt,
    insert_events,
    lock_job,
    move_job,
    moved,
    started_event,
    write_outbox,
)


class JobWrites:
    """Jobs' own writes; `reads` finds the job already under a key, `written` hears of the
    outbox rows of terminal changes."""

    def __init__(
        self, connector: Connector, changes: Changes, reads: JobReads, written: OutboxWritten
    ) -> None:
        self.connector = connector
        self._q = connector.queries
        self._changes = changes
        self._reads = reads
        self._outbox_written = written

    # ---- submit ------------------------------------------------------------------------------

    async def create_and_start(
        self,
        *,
        owner: str,
        idempotency_key: str,
        task: str,
        input: JsonObject,
        params: JsonObject,
        deadline_s: float | None,
        claimed_by: str | None,
        claim_s: float,
        first: AttemptStart | None = None,
        on_created: Callable[[Job, Attempt | None], None] | None = None,
    ) -> tuple[Job, Attempt | None]:
        """Insert the job, or return the one with the same key (I1); never read-then-insert.
        When it creates the job and `first` is given, that first attempt in the same
        transaction (the job is then `running`). A job found under the key gets no attempt:
        (job, None). `on_created(job, attempt)` runs once the new job is committed,
        even if this call is cancelled while waiting for the commit (the job must reach a
        worker all the same)."""
        now = time.time()
        fingerprint = payload_fingerprint(task, input, params)
        row_params = {
            "id": new_id(),
            "owner": owner,
            "idempotency_key": idempotency_key,
            "fingerprint": fingerprint,
            "task": task,
            "input": dumps(input),
            "params": dumps(params),
            "now": now,
            "deadline_at": now + deadline_s if deadline_s else None,
            "claimed_by": claimed_by,
            "claim_until": now + claim_s if claimed_by else None,
        }
        queued = NewEvent(kind=EventKind.JOB_QUEUED, data={"task": task})
        job = attempt = None
        try:
            async with self.connector.write() as tx:
                if first is not None and not await self._charged(tx, first):
                    first = None  # a budget refuses it: the job is created queued, and its
                    # driver meets the refusal when it starts the attempt (BudgetCrossed)
                if first is None:
                    row = await self._insert_queued(tx, row_params, queued, now)
                else:
                    row, attempt = await self._insert_started(tx, row_params, queued, first, now)
                if row is not None:
                    job = job_from_row(row, created=True)
                    self._changes.remember_created(job)
                    if on_created is not None:
                        tx.after_commit(functools.partial(on_created, job, attempt))
        except BaseException:
            self._changes.forget_created(str(row_params["id"]))
            raise
        if job is None:
            return await self._existing(owner, idempotency_key, fingerprint), None
        if attempt is not None:
            self._changes.notify(job.id, job)
        return job, attempt

    async def _charged(self, tx: Tx, first: AttemptStart) -> bool:
        """Whether `first`'s reservation (if any) is charged: False when a budget refuses it."""
        return first.reservation is None or await charge_in(self._q, tx, first.reservation) is None

    async def _insert_queued(
        self, tx: Tx, row_params: dict[str, Any], queued: NewEvent, now: float
    ) -> Row | None:
        row = await tx.fetchone(
            self._q["insert_job"],
            {**row_params, "state": JobState.QUEUED, "version": 1, "event_seq": 1},
        )
        if row is not None:
            await insert_events(self._q, tx, row["id"], [(queued, JobState.QUEUED)], 1, now)
        return row

    async def _insert_started(
        self,
        tx: Tx,
        row_params: dict[str, Any],
        queued: NewEvent,
        first: AttemptStart,
        now: float,
    ) -> tuple[Row | None, Attempt | None]:
        """Insert the job already running, its first attempt and all their events: three
        statements, where a queued job and a separate move would take six. The move from
        queued is the transition table's, as `start_attempt_in`'s is. `first`'s reservation
        was charged (`_charged`): held by the attempt, or taken back when the job exists."""
        running = moved(str(row_params["id"]), JobState.QUEUED, JobState.RUNNING)
        events = [queued, *first.notes]
        row = await tx.fetchone(
            self._q["insert_job"],
            {**row_params, "state": running, "version": 2, "event_seq": len(events) + 1},
        )
        if row is None:  # the key's job exists: it gets no attempt, and nothing is charged
            if first.reservation is not None:
                await take_back_in(self._q, tx, first.reservation)
            return None, None
        attempt_id = new_id()
        if first.reservation is not None:
            await record_holds_in(self._q, tx, attempt_id, first.reservation)
        attempt_row = await tx.fetchone(
            self._q["insert_attempt"],
            {
                "id": attempt_id,
                "job_id": row["id"],
                "provider": first.provider,
                "model": first.model,
                "now": now,
                "worker": first.worker,
                "lease_until": now + first.lease_s,
            },
        )
        assert attempt_row is not None
        attempt = attempt_from_row(attempt_row)
        events.append(started_event(attempt))
        states = [JobState.QUEUED] + [running] * (len(events) - 1)
        await insert_events(self._q, tx, row["id"], list(zip(events, states, strict=True)), 1, now)
        return row, attempt

    async def _existing(self, owner: str, idempotency_key: str, fingerprint: str) -> Job:
        existing = await self._reads.find_job(owner, idempotency_key)
        if existing is None:  # purged between the two statements: the caller may submit again
            raise JobNotFound(f"{owner}/{idempotency_key}")
        if existing.fingerprint != fingerprint:
            raise IdempotencyConflict(
                owner=owner, idempotency_key=idempotency_key, job_id=existing.id
            )
        return existing

    # ---- job outcomes ------------------------------------------------------------------------

    async def settle_job(
        self,
        job_id: str,
        state: JobState,
        *,
        error: str | None,
        notes: Sequence[NewEvent] = (),
        error_detail: str | None = None,
    ) -> Job:
        """Move a job to failed / unknown (or back to running), with its events and outbox row.
        Only the summary `error` goes into them; `error_detail` stays on the row."""
        now = time.time()
        async with self.connector.write() as tx:
            job = await lock_job(self._q, tx, job_id)
            if job.state is state:
                return job
            data: JsonObject = {"error": error} if error else {}
            events = [*notes, NewEvent(kind=EventKind.job_moved(state), data=data)]
            job = await move_job(
                self._q,
                tx,
                job,
                state,
                now=now,
                error=error,
                error_detail=error_detail,
                events=events,
            )
            if state.terminal:
                await write_outbox(self._q, tx, job, now, self._outbox_written)
        self._changes.notify(job_id, job)
        return job

    async def note(self, job_id: str, events: Sequence[NewEvent]) -> None:
        """Append informational events (a provider skipped, the job waiting) without a change."""
        now = time.time()
        async with self.connector.write() as tx:
            job = await lock_job(self._q, tx, job_id)
            await append_events(self._q, tx, job_id, job.state, events, now)
        self._changes.notify(job_id)

    async def cancel_job(self, job_id: str, reason: str) -> Job:
        now = time.time()
        async with self.connector.write() as tx:
            job = await lock_job(self._q, tx, job_id)
            if job.state is JobState.CANCELLED:
                return job
            events, unknown = [], []
            for row in await tx.fetchall(self._q["open_attempts_of_job"], {"job_id": job_id}):
                attempt = attempt_from_row(row)
                if attempt.state is AttemptState.UNKNOWN:  # it may have happened: cancelling
                    unknown.append(attempt.id)  # the job does not undo that, so the attempt
                    continue  # keeps saying so (an operator may still resolve it)
                await end_attempt(
                    self._q,
                    tx,
                    attempt,
                    AttemptState.CANCELLED,
                    AttemptUsage(),
                    now,
                    error_kind=EndReason.CANCELLED,
                    error=reason,
                )
                events.append(
                    NewEvent(
                        kind=EventKind.ATTEMPT_CANCELLED,
                        data={"attempt_id": attempt.id, "error": reason},
                    )
                )
            events.append(
                NewEvent(
                    kind=EventKind.JOB_CANCELLED,
                    data={"reason": reason, **({"unknown_attempts": unknown} if unknown else {})},
                )
            )
            job = await move_job(
                self._q, tx, job, JobState.CANCELLED, now=now, error=reason, events=events
            )
            await write_outbox(self._q, tx, job, now, self._outbox_written)
        self._changes.notify(job_id)
        return job
