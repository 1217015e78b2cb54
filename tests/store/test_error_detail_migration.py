"""Migration 0011 on rows written before it (issue 14: raw provider detail is operator-only).

A database is brought to schema v10 with the migrations of that time, filled the way the old
code wrote a failed job (the provider's words in the job's and the attempt's `error`, in their
events, in the outbox row and in a dead letter), then opened by today's store, which applies
0011. The provider's words must then be found only in `error_detail`; the summaries are our own;
texts that were our own (a cancellation's reason) stay as they were. On both backends. A
`\\u0000` escape in the old text (PostgreSQL's `jsonb` refuses it) must not stop the migration.
"""

from __future__ import annotations

import json
import sqlite3
from urllib.parse import urlsplit

import asyncpg

from jobrouter.store import open_store
from jobrouter.store.connector import load_migrations
from tests.support.backends import empty_url as empty_url  # a fixture, used by name

WORDS = "Incorrect API key provided: [redacted]. PROVIDER-WORDS"
OLD_ERROR = f"echoing: not_sent (HTTP 401): {WORDS}"
OLD_JOB_ERROR = f"all 1 attempts used; attempts: echoing: not_sent {OLD_ERROR}"
V10 = 10  # the schema the old rows were written under


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _old_rows() -> list[str]:
    """The rows the code before 0011 wrote for a job failed on a 401, and a cancelled one."""
    event = json.dumps(
        {
            "attempt_id": "a1",
            "error": OLD_ERROR + " \u0000",
            "error_kind": "not_sent",
            "provider": "echoing",
        },
        separators=(",", ":"),
    )
    failed = json.dumps({"error": OLD_JOB_ERROR}, separators=(",", ":"))
    payload = json.dumps(
        {
            "error": OLD_JOB_ERROR,
            "event": "job.failed",
            "idempotency_key": "k1",
            "job_id": "j1",
            "owner": "shop",
            "result": None,
            "state": "failed",
            "task": "t",
            "version": 4,
        },
        separators=(",", ":"),
    )
    job = (
        "INSERT INTO jobs (id, owner, idempotency_key, fingerprint, task, input, params, state,"
        " version, error, created_at, updated_at, next_run_at, event_seq) VALUES "
    )
    return [
        job + f"('j1', 'shop', 'k1', 'f', 't', '{{}}', '{{}}', 'failed', 4, "
        f"{_quoted(OLD_JOB_ERROR)}, 1, 2, 2, 2)",
        job + "('j2', 'shop', 'k2', 'f', 't', '{}', '{}', 'cancelled', 3, 'changed my mind', "
        "1, 2, 2, 0)",
        "INSERT INTO attempts (id, job_id, seq, provider, state, error_kind, error, started_at) "
        f"VALUES ('a1', 'j1', 1, 'echoing', 'failed', 'not_sent', {_quoted(OLD_ERROR)}, 1)",
        "INSERT INTO attempts (id, job_id, seq, provider, state, error_kind, error, started_at) "
        "VALUES ('a2', 'j2', 1, 'echoing', 'cancelled', 'cancelled', 'changed my mind', 1)",
        "INSERT INTO job_events (job_id, seq, kind, job_state, data, at) VALUES "
        f"('j1', 1, 'attempt.failed', 'running', {_quoted(event)}, 1), "
        f"('j1', 2, 'job.failed', 'failed', {_quoted(failed)}, 2)",
        "INSERT INTO outbox (id, job_id, owner, kind, payload, created_at, next_attempt_at) "
        f"VALUES ('o1', 'j1', 'shop', 'job.failed', {_quoted(payload)}, 2, 2)",
        "INSERT INTO outbox_dead (id, job_id, owner, kind, payload, created_at, tries, dead_at) "
        f"VALUES ('d1', 'jx', 'shop', 'job.failed', {_quoted(payload)}, 2, 5, 3)",
    ]


async def _at_v10(url: str) -> None:
    """The database as the code of schema v10 left it, with its rows."""
    statements = (
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT "
        "NULL, applied_at DOUBLE PRECISION NOT NULL)"
    )
    if url.startswith("sqlite"):
        with sqlite3.connect(urlsplit(url).path) as db:
            db.execute(statements)
            for number, name, sql in load_migrations("sqlite"):
                if number > V10:
                    continue
                db.executescript(sql)
                db.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (number, name))
            for row in _old_rows():
                db.execute(row)
        return
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(statements)
        for number, name, sql in load_migrations("postgres"):
            if number <= V10:
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations VALUES ($1, $2, 0)", number, name)
        for row in _old_rows():
            await conn.execute(row)
    finally:
        await conn.close()


async def test_old_rows_keep_the_provider_words_as_operator_detail_only(empty_url: str) -> None:
    await _at_v10(empty_url)
    store = await open_store(empty_url)  # applies 0011
    try:
        failed, cancelled = await store.jobs.get_job("j1"), await store.jobs.get_job("j2")
        [attempt] = await store.jobs.list_attempts("j1")
        [kept] = await store.jobs.list_attempts("j2")
        events = await store.jobs.list_events("j1")
        payloads = [
            row["payload"]
            for row in await store.connector.fetchall(
                "SELECT payload FROM outbox UNION ALL SELECT payload FROM outbox_dead", {}
            )
        ]
    finally:
        await store.close()
    assert failed is not None and cancelled is not None
    # the operator's detail: the old texts, whole
    assert (failed.error_detail, attempt.error_detail) == (OLD_JOB_ERROR, OLD_ERROR)
    # the summaries: our words only
    assert failed.error == "no provider produced a usable answer (each attempt says how it ended)"
    assert attempt.error == (
        "provider echoing did not act on the request (it refused it "
        "unprocessed, or it was not reached)"
    )
    shown = [json.dumps(e.data) for e in events] + payloads
    assert len(shown) == 4 and all("PROVIDER-WORDS" not in text for text in shown), shown
    assert events[0].data == {
        "attempt_id": "a1",
        "error": attempt.error,
        "error_kind": "not_sent",
        "provider": "echoing",
    }
    assert all(
        json.loads(p)["error"] == failed.error and json.loads(p)["version"] == 4 for p in payloads
    )
    # our own words stay where they were, with nothing behind them
    assert (cancelled.error, cancelled.error_detail) == ("changed my mind", None)
    assert (kept.error, kept.error_detail) == ("changed my mind", None)
