"""The first attempts of the jobs one claim takes, started in three statements however many jobs
it took: their attempts, the jobs' moves to running (which number their events), the events.

On PostgreSQL every statement is a round trip inside the claiming transaction, while the
claimed rows stay locked and the worker waits: started one job at a time (`start_attempt_in`,
three statements each) a claim of 16 jobs was 48 round trips. The rows travel as ONE JSON
parameter (queries `start_attempts`, `start_jobs`, `insert_job_events`): the same statement
text for any number of jobs (prepared once per connection, no parameter limit: a claim may
take as many jobs as `[engine] workers` allows). The rules are those of `start_attempt_in`
(transitions.py): only a queued job starts here (`first` chooses for queued jobs only), never
exclusively (a task that may not repeat is not started in a claim), the move obeys the
transition table, and a start's budget reservation is charged here or the job is not started.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from jobrouter.errors import InvalidTransition
from jobrouter.models import Attempt, Job, NewEvent, new_id
from jobrouter.states import JobState
from jobrouter.store.connector import Tx
from jobrouter.store.rows import attempt_from_row, job_from_row
from jobrouter.store.spend import lock_periods_in, reserve_in
from jobrouter.store.transitions import insert_events_of_jobs, moved, started_event

if TYPE_CHECKING:
    from jobrouter.store.claims import AttemptStart

Queries = Mapping[str, str]


async def start_first_attempts(
    q: Queries, tx: Tx, starts: Sequence[tuple[Job, AttemptStart]], now: float
) -> list[tuple[Job, Attempt]]:
    """Start each queued, claimed (locked) job's attempt; the jobs become running. Returns
    (job as moved, attempt) in the order of `starts`."""
    if not starts:
        return []
    for job, _ in starts:
        if job.state is not JobState.QUEUED:
            raise InvalidTransition(
                entity="job", entity_id=job.id, src=job.state, dst="first attempt"
            )
        moved(job.id, job.state, JobState.RUNNING)
    starts, ids = await _reserve(q, tx, starts)
    if not starts:
        return []
    attempts = await _insert_attempts(q, tx, starts, ids, now)
    events = {job.id: [*start.notes, started_event(attempts[job.id])] for job, start in starts}
    jobs = await _move_to_running(q, tx, [job for job, _ in starts], events, now)
    await _insert_events(q, tx, jobs, events, now)
    return [(jobs[job.id][0], attempts[job.id]) for job, _ in starts]


async def _reserve(
    q: Queries, tx: Tx, starts: Sequence[tuple[Job, AttemptStart]]
) -> tuple[list[tuple[Job, AttemptStart]], dict[str, str]]:
    """The starts whose reservations are charged (or that carry none), with their attempts'
    ids by job id. A start a budget refuses is left out: its job stays claimed and queued, and
    its driver meets the refusal when it starts the attempt itself (BudgetCrossed)."""
    reservations = [start.reservation for _, start in starts if start.reservation is not None]
    if len(reservations) > 1:
        await lock_periods_in(q, tx, reservations)
    kept, ids = [], {}
    for job, start in starts:
        attempt_id = new_id()
        reservation = start.reservation
        if reservation is not None and await reserve_in(q, tx, attempt_id, reservation):
            continue  # refused (a Crossed came back): charged nothing
        kept.append((job, start))
        ids[job.id] = attempt_id
    return kept, ids


async def _insert_attempts(
    q: Queries,
    tx: Tx,
    starts: Sequence[tuple[Job, AttemptStart]],
    ids: dict[str, str],
    now: float,
) -> dict[str, Attempt]:
    rows = [
        {
            "id": ids[job.id],
            "job_id": job.id,
            "provider": start.provider,
            "model": start.model,
            "worker": start.worker,
            "lease_until": now + start.lease_s,
        }
        for job, start in starts
    ]
    found = await tx.fetchall(q["start_attempts"], {"rows": json.dumps(rows), "now": now})
    return {attempt.job_id: attempt for attempt in map(attempt_from_row, found)}


async def _move_to_running(
    q: Queries, tx: Tx, jobs: Sequence[Job], events: dict[str, list[NewEvent]], now: float
) -> dict[str, tuple[Job, int]]:
    """Each job moved to running at its version, its event_seq counting its `events`: the job
    and that event_seq, by id."""
    rows = [{"id": job.id, "version": job.version, "n": len(events[job.id])} for job in jobs]
    found = await tx.fetchall(q["start_jobs"], {"rows": json.dumps(rows), "now": now})
    moved_jobs = {str(row["id"]): (job_from_row(row), int(row["event_seq"])) for row in found}
    for job in jobs:
        if job.id not in moved_jobs:  # its claim holds the row lock: cannot happen, but a
            # write that does not take must not pass for one that did
            raise InvalidTransition(
                entity="job",
                entity_id=job.id,
                src=job.state,
                dst=JobState.RUNNING,
                why=f"version {job.version} is no longer current",
            )
    return moved_jobs


async def _insert_events(
    q: Queries,
    tx: Tx,
    jobs: dict[str, tuple[Job, int]],
    events: dict[str, list[NewEvent]],
    now: float,
) -> None:
    rows = []
    for job_id, batch in events.items():
        job, event_seq = jobs[job_id]
        first = event_seq - len(batch) + 1
        rows += [(job_id, first + i, event, job.state) for i, event in enumerate(batch)]
    await insert_events_of_jobs(q, tx, rows, now)
