"""Fill a database with N finished jobs (each with one attempt and three events), so the
benchmark can show that submit and claim stay flat as the tables grow. Bulk paths of each
driver (sqlite3 executemany, asyncpg COPY): a million jobs take seconds, not an hour."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

from jobrouter.models import new_id
from jobrouter.store.sqlite_file import sqlite_path

BATCH = 50_000


Rows = tuple[tuple[Any, ...], tuple[Any, ...], list[tuple[Any, ...]]]


def _rows(n: int, now: float) -> Iterator[Rows]:
    result = json.dumps({"text": "prefilled"})
    for i in range(n):
        job_id, attempt_id = new_id(), new_id()
        job = (
            job_id,
            "prefill",
            f"prefill-{i}",
            "0" * 64,
            "bench",
            "{}",
            "{}",
            "succeeded",
            3,
            attempt_id,
            result,
            None,
            now,
            now,
            None,
            now,
            None,
            None,
            4,
        )
        attempt = (
            attempt_id,
            job_id,
            1,
            "stub",
            "openai/stub",
            "succeeded",
            None,
            None,
            result,
            now,
            now,
            1.0,
            20,
            12,
            None,
            "prefill",
            None,
        )
        events = [
            (job_id, seq, kind, "succeeded", "{}", now)
            for seq, kind in enumerate(
                ("job.queued", "attempt.started", "attempt.succeeded", "job.succeeded"), 1
            )
        ]
        yield job, attempt, events


JOB_COLUMNS = (
    "id",
    "owner",
    "idempotency_key",
    "fingerprint",
    "task",
    "input",
    "params",
    "state",
    "version",
    "winner_attempt_id",
    "result",
    "error",
    "created_at",
    "updated_at",
    "deadline_at",
    "next_run_at",
    "claimed_by",
    "claim_until",
    "event_seq",
)
ATTEMPT_COLUMNS = (
    "id",
    "job_id",
    "seq",
    "provider",
    "model",
    "state",
    "error_kind",
    "error",
    "output",
    "started_at",
    "finished_at",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "worker",
    "lease_until",
)
EVENT_COLUMNS = ("job_id", "seq", "kind", "job_state", "data", "at")


def _batches(n: int) -> Iterator[tuple[list[Any], list[Any], list[Any]]]:
    jobs: list[Any] = []
    attempts: list[Any] = []
    events: list[Any] = []
    for job, attempt, job_events in _rows(n, time.time() - 3600):
        jobs.append(job)
        attempts.append(attempt)
        events.extend(job_events)
        if len(jobs) >= BATCH:
            yield jobs, attempts, events
            jobs, attempts, events = [], [], []
    if jobs:
        yield jobs, attempts, events


def prefill_sqlite(url: str, n: int) -> None:
    conn = sqlite3.connect(sqlite_path(url))
    try:
        for jobs, attempts, events in _batches(n):
            with conn:
                conn.executemany(_insert("jobs", JOB_COLUMNS), jobs)
                conn.executemany(_insert("attempts", ATTEMPT_COLUMNS), attempts)
                conn.executemany(_insert("job_events", EVENT_COLUMNS), events)
    finally:
        conn.close()


async def prefill_postgres(url: str, n: int) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        for jobs, attempts, events in _batches(n):
            async with conn.transaction():
                await conn.copy_records_to_table("jobs", records=jobs, columns=JOB_COLUMNS)
                await conn.copy_records_to_table(
                    "attempts", records=attempts, columns=ATTEMPT_COLUMNS
                )
                await conn.copy_records_to_table(
                    "job_events", records=events, columns=EVENT_COLUMNS
                )
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


def _insert(table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
