"""router/store/starts.py: the first attempts a claim starts in three statements must give each
job its own numbers, whatever its events before the claim and
however many notes its start carries; a claim that fails part way leaves nothing behind; and a
claim as large as `[engine] workers` allows must not exceed the backends' parameter limits."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import asyncpg
import pytest

from jobrouter.models import Job
from jobrouter.states import AttemptState, JobState
from jobrouter.store import SqlStore
from jobrouter.store.claims import Claimed
from jobrouter.store.sqlite import SqliteConnector
from jobrouter.store.starts import AttemptStart
from tests.store.test_claim_runnable import SKIPPED, ignore, submit
from tests.support.claiming import claim_runnable

# Before the claim, job i has PRIOR[i] notes after its job.queued event; its first attempt
# carries NOTES[i] notes. Neither list is constant, nor are their sums: a batch that took one
# job's count or event_seq for another's would misnumber some job.
PRIOR = [0, 2, 1, 3]
NOTES = [1, 0, 3, 2]
# The upstream default of SQLITE_MAX_VARIABLE_NUMBER (3.32+); Debian builds raise it to 250000.
SQLITE_DEFAULT_VARIABLES = 32766


async def job_row(store: SqlStore, job_id: str) -> dict[str, Any]:
    row = await store.connector.fetchone(
        "SELECT state, version, claimed_by, event_seq FROM jobs WHERE id = :id", {"id": job_id}
    )
    assert row is not None
    return row


async def test_each_job_of_a_claim_numbers_its_own_events(store: SqlStore) -> None:
    jobs = [await submit(store, f"k{i}") for i in range(len(PRIOR))]
    for job, prior in zip(jobs, PRIOR, strict=True):
        if prior:
            await store.jobs.note(job.id, [SKIPPED] * prior)
    notes = {job.id: (SKIPPED,) * n for job, n in zip(jobs, NOTES, strict=True)}

    async def first(job: Job) -> AttemptStart:
        return AttemptStart("a", "m", "w1", 30.0, notes[job.id])

    claimed = {c.job.id: c for c in await claim_runnable(store.jobs, "w1", 60.0, 10, first, ignore)}
    assert set(claimed) == {job.id for job in jobs}
    for job, prior, n in zip(jobs, PRIOR, NOTES, strict=True):
        item = claimed[job.id]
        assert item.attempt is not None and item.attempt.job_id == job.id
        events = await store.jobs.list_events(job.id)
        total = 1 + prior + n + 1
        assert [e.seq for e in events] == list(range(1, total + 1)), job.id
        assert (await job_row(store, job.id))["event_seq"] == total
        started = events[-1]
        assert started.kind == "attempt.started" and started.data["attempt_id"] == item.attempt.id
        assert [e.job_state for e in events[1 + prior :]] == [JobState.RUNNING] * (n + 1)
        assert [e.job_state for e in events[: 1 + prior]] == [JobState.QUEUED] * (1 + prior)


async def test_a_claim_starts_attempts_with_and_without_a_model(store: SqlStore) -> None:
    """A NULL parameter in a multi-row VALUES (PostgreSQL types it from the target column)."""
    jobs = [await submit(store, f"k{i}") for i in range(3)]
    models = {jobs[0].id: None, jobs[1].id: "m", jobs[2].id: None}

    async def first(job: Job) -> AttemptStart:
        return AttemptStart("a", models[job.id], "w1", 30.0)

    claimed = await claim_runnable(store.jobs, "w1", 60.0, 10, first, ignore)
    assert all(item.attempt is not None for item in claimed)
    for job in jobs:
        attempts = await store.jobs.list_attempts(job.id)
        assert [(a.model, a.state) for a in attempts] == [(models[job.id], AttemptState.STARTED)]


async def test_a_claim_that_fails_at_its_events_leaves_nothing(store: SqlStore) -> None:
    """The batch's last statement fails (job 1's attempt.started would take seq 2, already
    taken): the claim, the attempts and the moves of every job are rolled back, and nothing is
    handed over."""
    jobs = [await submit(store, f"k{i}") for i in range(3)]
    async with store.connector.write() as tx:
        await tx.execute(
            "INSERT INTO job_events (job_id, seq, kind, job_state, data, at) "
            "VALUES (:job_id, 2, 'test.blocker', 'queued', '{}', 0)",
            {"job_id": jobs[1].id},
        )
    handed: list[list[Claimed]] = []

    async def first(_: Job) -> AttemptStart:
        return AttemptStart("a", "m", "w1", 30.0)

    with pytest.raises((sqlite3.IntegrityError, asyncpg.UniqueViolationError)):
        await claim_runnable(store.jobs, "w1", 60.0, 10, first, handed.append)
    assert handed == []
    for job in jobs:
        assert await store.jobs.list_attempts(job.id) == []
        row = await job_row(store, job.id)
        assert (row["state"], row["version"], row["claimed_by"]) == ("queued", 1, None)


async def test_a_claim_as_large_as_the_workers_allow_starts(store: SqlStore) -> None:
    """`[engine] workers` has no upper bound (router/config.py: ge=1) and a claim takes up to
    the worker's free slots. 1700 jobs whose first attempts each note 3 skipped providers (say
    their circuits are open): 6800 events. Written as one statement with a parameter per value,
    that was 34,001 parameters: over asyncpg's 32,767 and SQLite's upstream 32,766 (the claim
    failed, and failed again at every poll); the rows now travel as one JSON parameter."""
    if isinstance(store.connector, SqliteConnector):  # as SQLite is built upstream
        writer: sqlite3.Connection = store.connector._writer
        writer.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, SQLITE_DEFAULT_VARIABLES)
    count = 1700
    for lot in range(0, count, 100):
        await asyncio.gather(*(submit(store, f"k{i}") for i in range(lot, lot + 100)))

    async def first(_: Job) -> AttemptStart:
        return AttemptStart("a", "m", "w1", 30.0, (SKIPPED,) * 3)

    claimed = await claim_runnable(store.jobs, "w1", 60.0, count, first, ignore)
    assert len(claimed) == count and all(item.attempt is not None for item in claimed)
