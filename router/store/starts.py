"""The first attempts of the jobs one claim takes, started in three statements however many jobs
it took: their attempts, the jobs' moves to running (which number their events), the events.

On PostgreSQL every statement is a round trip inside the claiming transaction, while the
claimed rows stay locked and the worker waits: started one job at a time (`start_attempt_in`,
three statements each) a claim of 16 jobs was 48 round trips. The rules are those of
`start_attempt_in` (transitions.py): only a queued job starts here (`first` chooses for queued
jobs only), never exclusively (a task that may not repeat is not started in a claim), and the
move obeys the transition table.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from router.errors import InvalidTransition
from router.models import Attempt, Job, NewEvent, new_id
from router.states import JobState
from router.store.connector import Tx
from router.store.rows import attempt_from_row, dumps, job_from_row
from router.store.transitions import moved, started_event

if TYPE_CHECKING:
    from router.store.claims import AttemptStart


async def start_first_attempts(
    tx: Tx, starts: Sequence[tuple[Job, AttemptStart]], now: float
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
    attempts = await _insert_attempts(tx, starts, now)
    events = {job.id: [*start.notes, started_event(attempts[job.id])] for job, start in starts}
    jobs = await _move_to_running(tx, [job for job, _ in starts], events, now)
    await _insert_events(tx, jobs, events, now)
    return [(jobs[job.id][0], attempts[job.id]) for job, _ in starts]


async def _insert_attempts(
    tx: Tx, starts: Sequence[tuple[Job, AttemptStart]], now: float
) -> dict[str, Attempt]:
    params: dict[str, Any] = {"now": now}
    for i, (job, start) in enumerate(starts):
        params.update(
            {
                f"id{i}": new_id(),
                f"job_id{i}": job.id,
                f"provider{i}": start.provider,
                f"model{i}": start.model,
                f"worker{i}": start.worker,
                f"lease_until{i}": now + start.lease_s,
            }
        )
    rows = await tx.fetchall(attempts_insert(len(starts)), params)
    return {attempt.job_id: attempt for attempt in map(attempt_from_row, rows)}


async def _move_to_running(
    tx: Tx, jobs: Sequence[Job], events: dict[str, list[NewEvent]], now: float
) -> dict[str, tuple[Job, int]]:
    """Each job moved to running at its version, its event_seq counting its `events`: the job
    and that event_seq, by id."""
    params: dict[str, Any] = {"now": now}
    for i, job in enumerate(jobs):
        params.update({f"id{i}": job.id, f"version{i}": job.version, f"n{i}": len(events[job.id])})
    rows = await tx.fetchall(jobs_start_update(len(jobs)), params)
    moved_jobs = {str(row["id"]): (job_from_row(row), int(row["event_seq"])) for row in rows}
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
    tx: Tx, jobs: dict[str, tuple[Job, int]], events: dict[str, list[NewEvent]], now: float
) -> None:
    params: dict[str, Any] = {"at": now}
    i = 0
    for job_id, batch in events.items():
        job, event_seq = jobs[job_id]
        first = event_seq - len(batch) + 1
        for offset, event in enumerate(batch):
            params.update(
                {
                    f"job_id{i}": job_id,
                    f"seq{i}": first + offset,
                    f"kind{i}": event.kind,
                    f"state{i}": job.state,
                    f"data{i}": dumps(event.data),
                }
            )
            i += 1
    await tx.execute(events_insert(i), params)


# The statements, by the number of rows (the same text for the same count: translated and
# prepared once per backend and connection). Each attempt's seq is computed as insert_attempt
# computes it (queries.sql); the casts type what PostgreSQL would otherwise read as text.
@lru_cache(maxsize=64)
def attempts_insert(rows: int) -> str:
    values = ", ".join(
        f"(:id{i}, :job_id{i}, (SELECT COALESCE(MAX(seq), 0) + 1 FROM attempts "
        f"WHERE job_id = :job_id{i}), :provider{i}, :model{i}, 'started', :now, :worker{i}, "
        f":lease_until{i})"
        for i in range(rows)
    )
    return (
        "INSERT INTO attempts (id, job_id, seq, provider, model, state, started_at, worker, "
        f"lease_until) VALUES {values} RETURNING *"
    )


@lru_cache(maxsize=64)
def jobs_start_update(rows: int) -> str:
    ids = ", ".join(f":id{i}" for i in range(rows))
    versions = " ".join(f"WHEN :id{i} THEN CAST(:version{i} AS BIGINT)" for i in range(rows))
    counts = " ".join(f"WHEN :id{i} THEN CAST(:n{i} AS BIGINT)" for i in range(rows))
    return (
        "UPDATE jobs SET state = 'running', error = NULL, error_detail = NULL, "
        "version = version + 1, updated_at = :now, next_run_at = :now, "
        f"event_seq = event_seq + CASE id {counts} END "
        f"WHERE id IN ({ids}) AND version = CASE id {versions} END "
        "AND winner_attempt_id IS NULL RETURNING *"
    )


@lru_cache(maxsize=64)
def events_insert(rows: int) -> str:
    values = ", ".join(
        f"(:job_id{i}, :seq{i}, :kind{i}, :state{i}, :data{i}, :at)" for i in range(rows)
    )
    return f"INSERT INTO job_events (job_id, seq, kind, job_state, data, at) VALUES {values}"
