"""Starting attempts: the one way an attempt row is written, for every path that starts one.

`start_attempts` serves the three: a job created with its first attempt (jobs.py), the first
attempts of the jobs one claim takes (claims.py), and a driver starting an attempt of its job,
exclusive or not (attempts.py). Whatever the path, in the transaction that holds the jobs' locks:
each move obeys the transition table (queued -> running), an exclusive start refuses while an
attempt of its job is open (I4), the start's budget reservation is charged or it does not start,
and a batch costs three statements however many jobs it starts: their attempts, the queued jobs'
moves to running (which number their events), the events.

On PostgreSQL every statement is a round trip inside the transaction while its rows stay locked:
started one job at a time (three statements each) a claim of 16 jobs was 48 round trips. The rows
travel as ONE JSON parameter (queries `insert_attempt`, `start_jobs`, `insert_job_events`): the
same statement text for any number of jobs (prepared once per connection, no parameter limit: a
claim may take as many jobs as `[engine] workers` allows).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from jobrouter.errors import BudgetCrossed, InvalidTransition
from jobrouter.models import Attempt, Job, NewEvent, new_id
from jobrouter.states import JobState
from jobrouter.store.connector import Tx
from jobrouter.store.rows import attempt_from_row, job_from_row
from jobrouter.store.spend import Reservation, lock_periods_in, reserve_in
from jobrouter.store.transitions import (
    event_numbers,
    insert_events_of_jobs,
    moved,
    refuse_if_open,
    started_event,
)

Queries = Mapping[str, str]


@dataclass(frozen=True)
class AttemptStart:
    """An attempt to start (and record) before its provider is called: given with a job to
    create, it goes in the transaction that creates the job (one commit for both); chosen for a
    job a claim takes, in the transaction that claims it; asked by a driver, in one of its own.
    `id` is the attempt's, chosen before it is written: the engine knows its start by it once
    the start is committed."""

    provider: str
    model: str | None
    worker: str
    lease_s: float
    notes: Sequence[NewEvent] = ()
    # its worst case and the budgets it is held against (None: no budget covers it), charged
    # in the transaction that writes the attempt row, or the attempt is not started
    reservation: Reservation | None = None
    id: str = field(default_factory=new_id)


class OnCrossed(Enum):
    """What a start a budget refuses does to its batch."""

    RAISE = "raise"  # BudgetCrossed, nothing written (a driver's start: it records why)
    SKIP = "skip"  # that start is left out, the rest start (its job stays queued: its driver
    # meets the refusal when it starts the attempt itself)


@dataclass(frozen=True)
class Starting:
    """One start of a batch: the locked `job` (queued or running) and its `start`. `earlier`:
    events already counted in the job's `event_seq` but not yet written (a job created in this
    transaction: its `job.queued`), recorded with the job's state before the start."""

    job: Job
    start: AttemptStart
    earlier: Sequence[NewEvent] = ()


async def start_attempts(
    q: Queries,
    tx: Tx,
    batch: Sequence[Starting],
    now: float,
    *,
    exclusive: bool = False,
    on_crossed: OnCrossed = OnCrossed.RAISE,
) -> list[tuple[Job, Attempt]]:
    """Start each of `batch`'s attempts (its jobs distinct and locked); the queued jobs become
    running. With `exclusive`, a job with an open attempt refuses (InvalidTransition). Returns
    (job as it is now, attempt) for each start that was made, in the order of `batch`."""
    for item in batch:
        _check_startable(item.job)
        if exclusive:
            await refuse_if_open(q, tx, item.job.id)
    kept = await _reserved(q, tx, batch, on_crossed)
    if not kept:
        return []
    attempts = await _insert_attempts(q, tx, kept, now)
    events = {
        item.job.id: [*item.start.notes, started_event(attempts[item.job.id])] for item in kept
    }
    jobs = await _move_jobs(q, tx, [item.job for item in kept], events, now)
    rows: list[tuple[str, int, NewEvent, JobState]] = []
    for item in kept:
        job, event_seq = jobs[item.job.id]
        written = [
            *((e, item.job.state) for e in item.earlier),
            *((e, job.state) for e in events[job.id]),
        ]
        seqs = event_numbers(event_seq, len(written))
        rows += [
            (job.id, seq, event, state) for seq, (event, state) in zip(seqs, written, strict=True)
        ]
    await insert_events_of_jobs(q, tx, rows, now)
    return [(jobs[item.job.id][0], attempts[item.job.id]) for item in kept]


def _check_startable(job: Job) -> None:
    if job.state is JobState.QUEUED:
        moved(job.id, job.state, JobState.RUNNING)
    elif job.state is not JobState.RUNNING:
        raise InvalidTransition(
            entity="job",
            entity_id=job.id,
            src=job.state,
            dst="new attempt",
            why="only a queued or running job starts attempts",
        )


async def _reserved(
    q: Queries, tx: Tx, batch: Sequence[Starting], on_crossed: OnCrossed
) -> list[Starting]:
    """The starts whose reservations are charged (or that carry none). Several reservations
    lock their budget periods first, in one order (two claims never wait on each other)."""
    reservations = [item.start.reservation for item in batch if item.start.reservation]
    if len(reservations) > 1:
        await lock_periods_in(q, tx, reservations)
    kept = []
    for item in batch:
        reservation = item.start.reservation
        crossed = await reserve_in(q, tx, item.start.id, reservation) if reservation else None
        if crossed is None:
            kept.append(item)
        elif on_crossed is OnCrossed.RAISE:
            raise BudgetCrossed(
                budget=crossed.budget,
                side=crossed.side,
                limit=crossed.limit,
                charged=crossed.charged,
            )
    return kept


async def _insert_attempts(
    q: Queries, tx: Tx, batch: Sequence[Starting], now: float
) -> dict[str, Attempt]:
    rows = [
        {
            "id": item.start.id,
            "job_id": item.job.id,
            "provider": item.start.provider,
            "model": item.start.model,
            "worker": item.start.worker,
            "lease_until": now + item.start.lease_s,
        }
        for item in batch
    ]
    found = await tx.fetchall(q["insert_attempt"], {"rows": json.dumps(rows), "now": now})
    return {attempt.job_id: attempt for attempt in map(attempt_from_row, found)}


async def _move_jobs(
    q: Queries, tx: Tx, jobs: Sequence[Job], events: dict[str, list[NewEvent]], now: float
) -> dict[str, tuple[Job, int]]:
    """Each queued job moved to running at its version (`start_jobs`, the one spelling of that
    move), a running one's event_seq bumped; each counting its `events`: by id, the job as it
    is now and its event_seq."""
    queued = [job for job in jobs if job.state is JobState.QUEUED]
    rows = [{"id": job.id, "version": job.version, "n": len(events[job.id])} for job in queued]
    found = (
        await tx.fetchall(q["start_jobs"], {"rows": json.dumps(rows), "now": now}) if rows else []
    )
    out = {str(row["id"]): (job_from_row(row), int(row["event_seq"])) for row in found}
    for job in queued:
        if job.id not in out:  # the transaction holds the row lock: cannot happen, but a
            # write that does not take must not pass for one that did
            raise InvalidTransition(
                entity="job",
                entity_id=job.id,
                src=job.state,
                dst=JobState.RUNNING,
                why=f"version {job.version} is no longer current",
            )
    for job in jobs:
        if job.state is JobState.RUNNING:
            row = await tx.fetchone(q["bump_event_seq"], {"id": job.id, "n": len(events[job.id])})
            assert row is not None  # locked by this transaction
            out[job.id] = (job, int(row["event_seq"]))
    return out
