"""Attempts in the store: start one (written before the provider is called), finish it (the
compare-and-swap of I2 for a success), and an operator's resolution of an `unknown` one. A part
of the job store; the steps inside a transaction are in transitions.py.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from jobrouter.errors import InvalidTransition
from jobrouter.models import Attempt, AttemptUsage, FinishOutcome, Job, NewEvent
from jobrouter.states import AttemptState, EventKind
from jobrouter.store.changes import Changes
from jobrouter.store.claims import AttemptStart
from jobrouter.store.connector import Connector, Tx
from jobrouter.store.outbox import OutboxWritten
from jobrouter.store.reads import JobReads
from jobrouter.store.rows import dumps, job_from_row
from jobrouter.store.transitions import (
    append_events,
    end_attempt,
    insert_numbered,
    lock_attempt,
    lock_job,
    start_attempt_in,
    write_outbox,
)


class AttemptWrites:
    """Attempts' writes; `reads` reads the job of a resolved attempt, `written` hears of the
    outbox row of a win."""

    def __init__(
        self, connector: Connector, changes: Changes, reads: JobReads, written: OutboxWritten
    ) -> None:
        self.connector = connector
        self._q = connector.queries
        self._changes = changes
        self._reads = reads
        self._outbox_written = written

    async def start_attempt(
        self,
        job_id: str,
        *,
        provider: str,
        model: str | None,
        worker: str,
        lease_s: float,
        exclusive: bool,
        notes: Sequence[NewEvent] = (),
    ) -> tuple[Job, Attempt]:
        """Write the attempt row before the provider is called; the job becomes `running`."""
        now = time.time()
        start = AttemptStart(provider, model, worker, lease_s, tuple(notes))
        async with self.connector.write() as tx:
            job = await lock_job(self._q, tx, job_id)
            job, attempt = await start_attempt_in(self._q, tx, job, start, exclusive, now)
        self._changes.notify(job_id, job)
        return job, attempt

    async def finish_attempt_cas(
        self,
        attempt_id: str,
        output: Any,
        usage: AttemptUsage,
        *,
        only_from: AttemptState | None = None,
    ) -> FinishOutcome:
        """The compare-and-swap of I2: the first finisher wins, later ones are recorded `lost`.
        `only_from`: refuse (InvalidTransition) unless the attempt is in that state, under the
        job's lock."""
        now = time.time()
        async with self.connector.write() as tx:
            job, attempt = await lock_attempt(self._q, tx, attempt_id)
            _require_state(attempt, only_from, AttemptState.SUCCEEDED)
            if attempt.state.terminal:  # recorded already: by this call's own earlier try
                # (its COMMIT acknowledgement lost: the win is reported again, never lost) or
                # by a cancel under it (nothing to record)
                return FinishOutcome(
                    won=job.winner_attempt_id == attempt_id, job=job, attempt=attempt
                )
            won_row, events = None, won_events(attempt)
            if job.winner_attempt_id is None and not job.state.terminal:
                won_row = await tx.fetchone(
                    self._q["finish_job_cas"],
                    {
                        "id": job.id,
                        "version": job.version,
                        "attempt_id": attempt_id,
                        "result": dumps(output),
                        "now": now,
                        "events": len(events),  # numbered by the CAS's update
                    },
                )
            if won_row is None:
                outcome = await self._record_lost(tx, job, attempt, usage, now)
            else:
                won = job_from_row(won_row), int(won_row["event_seq"])
                outcome = await self._record_won(tx, won, attempt, events, output, usage, now)
        self._changes.notify(attempt.job_id, outcome.job if outcome.won else None)
        return outcome

    async def _record_lost(
        self, tx: Tx, job: Job, attempt: Attempt, usage: AttemptUsage, now: float
    ) -> FinishOutcome:
        """Another attempt won (or the job ended without one): this one is recorded `lost`."""
        lost = await end_attempt(
            self._q,
            tx,
            attempt,
            AttemptState.LOST,
            usage,
            now,
            error=f"finished after {job.winner_attempt_id} won",
        )
        await append_events(
            self._q,
            tx,
            job.id,
            job.state,
            [
                NewEvent(
                    kind=EventKind.ATTEMPT_LOST,
                    data={
                        "attempt_id": attempt.id,
                        "provider": attempt.provider,
                        "winner_attempt_id": job.winner_attempt_id,
                    },
                )
            ],
            now,
        )
        return FinishOutcome(won=False, job=job, attempt=lost)

    async def _record_won(
        self,
        tx: Tx,
        won: tuple[Job, int],
        attempt: Attempt,
        events: Sequence[NewEvent],
        output: Any,
        usage: AttemptUsage,
        now: float,
    ) -> FinishOutcome:
        """The CAS took: `won` is the job, succeeded with this attempt's output, and its
        event_seq as the CAS left it (counting `events`); the attempt, the events and the
        outbox row go in the same transaction."""
        job, event_seq = won
        done = await end_attempt(
            self._q, tx, attempt, AttemptState.SUCCEEDED, usage, now, output=output
        )
        await insert_numbered(self._q, tx, job.id, job.state, events, event_seq, now)
        await write_outbox(self._q, tx, job, now, self._outbox_written)
        return FinishOutcome(won=True, job=job, attempt=done)

    async def finish_attempt(
        self,
        attempt_id: str,
        state: AttemptState,
        *,
        error_kind: str | None,
        error: str | None,
        usage: AttemptUsage,
        output: Any = None,
        only_from: AttemptState | None = None,
        error_detail: str | None = None,
    ) -> Attempt:
        """An attempt ends without a result: failed, unknown or cancelled. `output` keeps an
        answer that did not win (an exclusive task's unusable answer, an answer whose result
        could not be recorded) on the attempt, for the operator who resolves it (`only_from`:
        as in finish_attempt_cas). `error` is the summary, the only text the attempt's event
        carries; `error_detail` (operators only) stays on the row (router/disclosure.py)."""
        if state is AttemptState.SUCCEEDED:
            raise ValueError("a success goes through finish_attempt_cas")
        now = time.time()
        async with self.connector.write() as tx:
            job, attempt = await lock_attempt(self._q, tx, attempt_id)
            _require_state(attempt, only_from, state)
            if attempt.state.terminal or attempt.state is state:  # already recorded (cancel,
                return attempt  # or a second sweeper): keep the first record
            done = await end_attempt(
                self._q, tx, attempt, state, usage, now, error_kind, error, output, error_detail
            )
            data = {
                "attempt_id": attempt_id,
                "provider": attempt.provider,
                "error_kind": error_kind,
                "error": error,
            }
            await append_events(
                self._q,
                tx,
                job.id,
                job.state,
                [NewEvent(kind=EventKind.attempt_ended(state), data=data)],
                now,
            )
        self._changes.notify(attempt.job_id)
        return done

    async def resolve_attempt(
        self, attempt_id: str, outcome: AttemptState, result: Any, note: str
    ) -> tuple[Job, Attempt]:
        """An operator says what became of an `unknown` attempt (out of band). Only an unknown
        attempt: checked under the job's lock, so a sweeper or a late answer that changed it
        meanwhile wins and the resolution is refused (InvalidTransition)."""
        if outcome is AttemptState.SUCCEEDED:
            finished = await self.finish_attempt_cas(
                attempt_id, result, AttemptUsage(), only_from=AttemptState.UNKNOWN
            )
            return finished.job, finished.attempt
        attempt = await self.finish_attempt(
            attempt_id,
            outcome,
            error_kind="resolved",
            error=note,
            usage=AttemptUsage(),
            only_from=AttemptState.UNKNOWN,
        )
        job = await self._reads.get_job(attempt.job_id)
        assert job is not None
        return job, attempt


def won_events(attempt: Attempt) -> list[NewEvent]:
    """The events of a win, appended in the transaction of its compare-and-swap."""
    return [
        NewEvent(
            kind=EventKind.ATTEMPT_SUCCEEDED,
            data={"attempt_id": attempt.id, "provider": attempt.provider},
        ),
        NewEvent(kind=EventKind.JOB_SUCCEEDED, data={"winner_attempt_id": attempt.id}),
    ]


def _require_state(attempt: Attempt, only_from: AttemptState | None, dst: AttemptState) -> None:
    if only_from is not None and attempt.state is not only_from:
        why = f"only an attempt in state {only_from} may"
        raise InvalidTransition(
            entity="attempt", entity_id=attempt.id, src=attempt.state, dst=dst, why=why
        )
