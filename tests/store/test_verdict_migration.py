"""Migration 0018 on verdicts written before it (issue 27's verdict moved onto its attempt).

A database is brought to schema v17 with the migrations of that time and given what the old
code left unfolded: a live verdict of an answered attempt, one whose attempt was purged with
its job, and a golden probe's. Today's store (which applies 0018) must then hold the first on
its attempt, with every field, and the probe in `probe_verdicts`; the orphan is gone. On both
backends.
"""

from __future__ import annotations

import sqlite3
from urllib.parse import urlsplit

import asyncpg

from jobrouter.store import open_store
from jobrouter.store.connector import load_migrations
from jobrouter.store.live_watch import LiveVerdict
from tests.support.backends import empty_url as empty_url  # a fixture, used by name

V17 = 17  # the schema the old rows were written under
VERDICTS = (
    "INSERT INTO live_verdicts (attempt_id, provider, contract, source, failed, failure,"
    " rendering_off, prompt_tokens, prompt_chars, at) VALUES "
)
OLD_ROWS = (
    "INSERT INTO jobs (id, owner, idempotency_key, fingerprint, task, input, params, state,"
    " version, created_at, updated_at, next_run_at, event_seq) VALUES"
    " ('j1', 'shop', 'k1', 'f', 't', '{}', '{}', 'failed', 3, 1, 2, 2, 2)",
    "INSERT INTO attempts (id, job_id, seq, provider, state, error_kind, error, started_at)"
    " VALUES ('a1', 'j1', 1, 'echoing', 'failed', 'rejected', 'broke the contract', 1)",
    VERDICTS + "('a1', 'echoing', 'caption', 'live', 1, 'schema: x', 1, 120, 480, 5)",
    VERDICTS + "('gone', 'echoing', 'caption', 'live', 0, NULL, NULL, NULL, NULL, 6)",
    VERDICTS + "('probe:tea', 'echoing', 'caption', 'probe', 1, 'tea: y', NULL, NULL, NULL, 7)",
)


async def _at_v17(url: str) -> None:
    """The database as the code of schema v17 left it, with its rows."""
    table = (
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT "
        "NULL, applied_at DOUBLE PRECISION NOT NULL)"
    )
    if url.startswith("sqlite"):
        with sqlite3.connect(urlsplit(url).path) as db:
            db.execute(table)
            for number, name, sql in load_migrations("sqlite"):
                if number <= V17:
                    db.executescript(sql)
                    db.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (number, name))
            for row in OLD_ROWS:
                db.execute(row)
        return
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(table)
        for number, name, sql in load_migrations("postgres"):
            if number <= V17:
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations VALUES ($1, $2, 0)", number, name)
        for row in OLD_ROWS:
            await conn.execute(row)
    finally:
        await conn.close()


async def test_unfolded_verdicts_move_onto_their_attempts(empty_url: str) -> None:
    """mutants: the migration's UPDATE without its `failed` (or `rendering_off`) mapping: the
    verdict reads as passed (or not compared); the DELETE of the old live rows left out: the
    orphan is pending as a probe."""
    await _at_v17(empty_url)
    store = await open_store(empty_url)  # applies 0018
    try:
        pending = await store.live_watch.pending(10)
    finally:
        await store.close()
    assert (pending[0].id, pending[0].at) == ("a1", 5.0)
    assert [s.verdict for s in pending] == [
        LiveVerdict(
            "a1",
            "echoing",
            "caption",
            failed=True,
            failure="schema: x",
            rendering_off=True,
            prompt_tokens=120,
            prompt_chars=480,
        ),
        LiveVerdict("probe:tea", "echoing", "caption", failed=True, failure="tea: y", probe=True),
    ]
