"""Attempts in the store: start one (written before the provider is called), finish it (the
compare-and-swap of I2 for a success), and an operator's resolution of an `unknown` one (one
transaction with the job's move). A part
of the job store; the steps inside a transaction are in transitions.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from jobrouter.errors import InvalidTransition
from jobrouter.models import Attempt, AttemptUsage, FinishOutcome, Job, NewEvent
from jobrouter.states import AttemptState, EndReason, EventKind, JobState
from jobrouter.store.changes import Changes
from jobrouter.store.connector import Connector, Tx
from jobrouter.store.live_watch import LiveVerdict, verdict_columns
from jobrouter.store.outbox import OutboxWritten
from jobrouter.store.rows import attempt_from_row, dumps, job_from_row
from jobrouter.store.spend import Reservation
from jobrouter.store.starts import AttemptStart, Starting, start_attempts
from jobrouter.store.transitions import (
    append_events,
    end_attempt,
    insert_numbered,
    lock_attempt,
    lock_job,
    reopen_in,
    write_outbox,
)


class AttemptWrites:
    """Attempts' writes; `written` hears of the outbox row of a win."""

    def __init__(self, connector: Connector, changes: Changes, written: OutboxWritten) -> None:
        self.connector = connector
        self._q = connector.queries
        self._changes = changes
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
        reservation: Reservation | None = None,
    ) -> tuple[Job, Attempt]:
        """Write the attempt row before the provider is called; the job becomes `running`.
        `reservation` is charged with it, or BudgetCrossed and nothing is written."""
        now = time.time()
        start = AttemptStart(provider, model, worker, lease_s, tuple(notes), reservation)
        async with self.connector.write() as tx:
            job = await lock_job(self._q, tx, job_id)
            [(job, attempt)] = await start_attempts(
                self._q, tx, [Starting(job, start)], now, exclusive=exclusive
            )
        self._changes.notify(job_id, job)
        return job, attempt

    async def finish_attempt_cas(
        self,
        attempt_id: str,
        output: Any,
        usage: AttemptUsage,
        *,
        only_from: AttemptState | None = None,
        verdict: LiveVerdict | None = None,
    ) -> FinishOutcome:
        """The compare-and-swap of I2: the first finisher wins, later ones are recorded `lost`.
        `only_from`: refuse (InvalidTransition) unless the attempt is in that state, under the
        job's lock. `verdict`: what the router judged of the answer, kept with the end."""
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
            outcome = await self._cas_in(tx, job, attempt, output, usage, now, verdict=verdict)
        self._changes.notify(attempt.job_id, outcome.job if outcome.won else None)
        return outcome

    async def _cas_in(
        self,
        tx: Tx,
        job: Job,
        attempt: Attempt,
        output: Any,
        usage: AttemptUsage,
        now: float,
        record: Mapping[str, str] | None = None,
        verdict: LiveVerdict | None = None,
    ) -> FinishOutcome:
        """The compare-and-swap inside the open transaction, `job` locked and `attempt` open;
        `record`: an operator's resolution, kept in the attempt's event; `verdict`: the
        answer's, kept by the attempt's end, won or lost."""
        won_row, events = None, won_events(attempt, record)
        if job.winner_attempt_id is None and not job.state.terminal:
            won_row = await tx.fetchone(
                self._q["finish_job_cas"],
                {
                    "id": job.id,
                    "version": job.version,
                    "attempt_id": attempt.id,
                    "result": dumps(output),
                    "now": now,
                    "events": len(events),  # numbered by the CAS's update
                },
            )
        if won_row is None:
            return await self._record_lost(tx, job, attempt, usage, now, record, verdict)
        won = job_from_row(won_row), int(won_row["event_seq"])
        return await self._record_won(tx, won, attempt, events, output, usage, now, verdict)

    async def _record_lost(
        self,
        tx: Tx,
        job: Job,
        attempt: Attempt,
        usage: AttemptUsage,
        now: float,
        record: Mapping[str, str] | None = None,
        verdict: LiveVerdict | None = None,
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
            verdict=verdict,
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
                        **_resolved(record),
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
        verdict: LiveVerdict | None,
    ) -> FinishOutcome:
        """The CAS took: `won` is the job, succeeded with this attempt's output, and its
        event_seq as the CAS left it (counting `events`); the attempt (its verdict on it), the
        events and the outbox row go in the same transaction."""
        job, event_seq = won
        done = await end_attempt(
            self._q, tx, attempt, AttemptState.SUCCEEDED, usage, now, output=output, verdict=verdict
        )
        await insert_numbered(self._q, tx, job.id, job.state, events, event_seq, now)
        await write_outbox(self._q, tx, job, now, self._outbox_written)
        return FinishOutcome(won=True, job=job, attempt=done)

    async def finish_attempt(
        self,
        attempt_id: str,
        state: AttemptState,
        *,
        error_kind: EndReason | None,
        error: str | None,
        usage: AttemptUsage,
        output: Any = None,
        only_from: AttemptState | None = None,
        error_detail: str | None = None,
        verdict: LiveVerdict | None = None,
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
                if verdict is not None and attempt.state is state:  # or a second sweeper)
                    # an answer that came after the sweep made its attempt unknown: the
                    # first record stays, but the answer is evidence (a late good answer's
                    # CAS keeps its pass; dropping only the broken ones would hide drift)
                    await tx.execute(
                        self._q["keep_late_verdict"],
                        {"id": attempt_id, **verdict_columns(verdict, now)},
                    )
                return attempt  # keep the first record
            done = await end_attempt(
                self._q,
                tx,
                attempt,
                state,
                usage,
                now,
                error_kind,
                error,
                output,
                error_detail,
                verdict,  # an answer that broke the contract
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
        self, attempt_id: str, outcome: AttemptState, result: Any, note: str, by: str = ""
    ) -> tuple[Job, Attempt]:
        """An operator says what became of an `unknown` attempt (out of band), checked by
        router/resolution.py. Only an unknown attempt: checked under the job's lock, so a
        sweeper or a late answer that changed it meanwhile wins and the resolution is refused
        (InvalidTransition). ONE transaction: the attempt's end, who resolved it and the note
        (on the attempt and in its event), and the job's move (won by the compare-and-swap, or
        an `unknown` job reopened for the policy): no crash between them strands the job."""
        now = time.time()
        record = {"outcome": str(outcome), "note": note, "by": by}
        async with self.connector.write() as tx:
            job, attempt = await lock_attempt(self._q, tx, attempt_id)
            _require_state(attempt, AttemptState.UNKNOWN, outcome)
            won = False
            if outcome is AttemptState.SUCCEEDED:
                finished = await self._cas_in(tx, job, attempt, result, AttemptUsage(), now, record)
                job, done, won = finished.job, finished.attempt, finished.won
            else:
                done = await end_attempt(
                    self._q, tx, attempt, outcome, AttemptUsage(), now, EndReason.RESOLVED, note
                )
                job = await self._after_resolution(tx, job, done, record, now)
            row = await tx.fetchone(
                self._q["record_resolution"], {"id": attempt_id, "by": by or None, "note": note}
            )
            assert row is not None  # the attempt is there: its job is locked
            done = attempt_from_row(row)
        self._changes.notify(attempt.job_id, job if won else None)
        return job, done

    async def _after_resolution(
        self, tx: Tx, job: Job, done: Attempt, record: Mapping[str, str], now: float
    ) -> Job:
        """The event of an attempt resolved failed or cancelled; an `unknown` job is reopened
        in the same transaction, so the policy decides again (fail over, or finish)."""
        data = {
            "attempt_id": done.id,
            "provider": done.provider,
            "error_kind": done.error_kind,
            "error": done.error,
            **_resolved(record),
        }
        ended = NewEvent(kind=EventKind.attempt_ended(done.state), data=data)
        await append_events(self._q, tx, job.id, job.state, [ended], now)
        if job.state is not JobState.UNKNOWN:
            return job
        reopened = {"reason": record["note"], **_resolved(record)}
        return await reopen_in(self._q, tx, job, reopened, now)


def won_events(attempt: Attempt, record: Mapping[str, str] | None = None) -> list[NewEvent]:
    """The events of a win, appended in the transaction of its compare-and-swap (`record`:
    the operator's resolution that made it, if one did)."""
    return [
        NewEvent(
            kind=EventKind.ATTEMPT_SUCCEEDED,
            data={"attempt_id": attempt.id, "provider": attempt.provider, **_resolved(record)},
        ),
        NewEvent(kind=EventKind.JOB_SUCCEEDED, data={"winner_attempt_id": attempt.id}),
    ]


def _resolved(record: Mapping[str, str] | None) -> dict[str, Any]:
    """An event's `resolution` member: outcome, note and who, when an operator resolved."""
    return {} if record is None else {"resolution": dict(record)}


def _require_state(attempt: Attempt, only_from: AttemptState | None, dst: AttemptState) -> None:
    if only_from is not None and attempt.state is not only_from:
        why = f"only an attempt in state {only_from} may"
        raise InvalidTransition(
            entity="attempt", entity_id=attempt.id, src=attempt.state, dst=dst, why=why
        )
