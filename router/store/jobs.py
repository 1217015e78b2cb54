"""Jobs in the store: submit (create, or find by idempotency key; the first attempt in the
same transaction when asked) and the job's own outcomes (settle, note, cancel, reopen). A part
of the job store; the steps inside a transaction are in transitions.py.

Every state change runs in one write transaction together with its events (and, for a terminal
change, its outbox row), so the log, the row and the outbox can never disagree.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

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
from jobrouter.store.connector import Connector, Row, Tx
from jobrouter.store.handoff import Handoff
from jobrouter.store.outbox import OutboxWritten
from jobrouter.store.reads import JobReads
from jobrouter.store.rows import attempt_from_row, dumps, job_from_row
from jobrouter.store.starts import AttemptStart, OnCrossed, Starting, start_attempts
from jobrouter.store.transitions import (
    append_events,
    end_attempt,
    insert_numbered,
    lock_job,
    move_job,
    write_outbox,
)


class JobWrites:
    """Jobs' own writes; `reads` finds the job already under a key, `written` hears of the
    outbox rows of terminal changes, `handoff` of the jobs created."""

    def __init__(
        self,
        connector: Connector,
        changes: Changes,
        reads: JobReads,
        written: OutboxWritten,
        handoff: Handoff,
    ) -> None:
        self.connector = connector
        self._q = connector.queries
        self._changes = changes
        self._reads = reads
        self._outbox_written = written
        self._handoff = handoff

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
    ) -> tuple[Job, Attempt | None]:
        """Insert the job, or return the one with the same key (I1); never read-then-insert.
        When it creates the job and `first` is given, that first attempt in the same
        transaction (the job is then `running`; a budget that refuses it leaves the job queued,
        and its driver meets the refusal). A job found under the key gets no attempt:
        (job, None). A job created claimed is handed over (`Handoff`) once committed."""
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
        created: tuple[Job, Attempt | None] | None = None
        try:
            async with self.connector.write() as tx:
                row = await tx.fetchone(self._q["insert_job"], row_params)
                if row is not None:
                    created = await self._queued_or_started(tx, row, first, now)
                    self._changes.remember_created(created[0])
                    if claimed_by is not None:  # this process's: its engine drives it
                        tx.after_commit(functools.partial(self._handoff.committed, *created))
        except BaseException:
            self._changes.forget_created(str(row_params["id"]))
            raise
        if created is None:
            return await self._existing(owner, idempotency_key, fingerprint), None
        if created[1] is not None:
            self._changes.notify(created[0].id, created[0])
        return created

    async def _queued_or_started(
        self, tx: Tx, row: Row, first: AttemptStart | None, now: float
    ) -> tuple[Job, Attempt | None]:
        """The job just inserted (born queued, its `job.queued` event counted but not yet
        written), with `first` started when given and no budget refuses it."""
        job = job_from_row(row, created=True)
        queued = NewEvent(kind=EventKind.JOB_QUEUED, data={"task": job.task})
        if first is not None:
            started = await start_attempts(
                self._q,
                tx,
                [Starting(job, first, earlier=[queued])],
                now,
                on_crossed=OnCrossed.SKIP,
            )
            if started:
                running, attempt = started[0]
                return running.model_copy(update={"created": True}), attempt
        await insert_numbered(self._q, tx, job.id, job.state, [queued], int(row["event_seq"]), now)
        return job, None

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
