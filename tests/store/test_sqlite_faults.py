"""SQLite faults (issue 14): a full disk and a read-only database are a transient `StoreError`
(HTTP 503 with Retry-After), never an unexpected error; a damaged file is refused at open with
the command to inspect it.

Faults are SQLite's own: `PRAGMA max_page_count` makes SQLite answer SQLITE_FULL exactly as a
full disk does, `PRAGMA query_only` makes it answer SQLITE_READONLY as a read-only file does
(the machine offers no small filesystem to fill, nor a read-only mount); the damage is real
bytes overwritten in the file. On the code before issue 14 the first two raised a bare
`sqlite3.OperationalError` (a 500) and the damaged file opened, its lookups finding nothing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jobrouter.errors import StoreError
from jobrouter.store import SqlStore, open_store
from tests.support.store_jobs import count_jobs, create_job


async def _create(store: SqlStore, key: str) -> None:
    await create_job(
        store,
        owner="o",
        idempotency_key=key,
        task="t",
        input={"n": key},
        params={},
        deadline_s=None,
        claimed_by=None,
        claim_s=0,
    )


async def _filled(path: Path, jobs: int) -> None:
    store = await open_store(f"sqlite:///{path}")
    try:
        for n in range(jobs):
            await _create(store, f"k{n}")
    finally:
        await store.close()


def _writer(store: SqlStore) -> sqlite3.Connection:
    conn: sqlite3.Connection = store.connector._writer  # type: ignore[attr-defined]
    return conn


async def test_a_full_disk_is_a_transient_store_error(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        writer = _writer(store)
        pages = writer.execute("PRAGMA page_count").fetchone()[0]
        writer.execute(f"PRAGMA max_page_count={pages}")
        with pytest.raises(StoreError, match="disk full") as caught:
            for n in range(200):  # until a new page is needed
                await _create(store, f"big{n}" + "x" * 2000)
        assert caught.value.transient
    finally:
        await store.close()


async def test_a_read_only_database_is_a_transient_store_error(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        _writer(store).execute("PRAGMA query_only=ON")
        with pytest.raises(StoreError, match="read-only") as caught:
            await store.health.prove_write()
        assert caught.value.transient
        assert await store.health.open_job_counts() == {
            "queued": 0,
            "running": 0,
        }  # reads still work
    finally:
        await store.close()


async def test_a_damaged_file_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    await _filled(path, 300)
    with sqlite3.connect(path) as conn:  # the WAL into the main file, so the damage sticks
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_jobs_2'"
        ).fetchone()[0]
    with path.open("r+b") as file:  # garbage over the key index's root page
        file.seek((root - 1) * page_size)
        file.write(b"\xa5" * page_size)
    with pytest.raises(StoreError, match="damaged") as caught:
        await open_store(f"sqlite:///{path}")
    assert not caught.value.transient
    assert f"sqlite3 '{path}' 'PRAGMA integrity_check'" in str(caught.value)


async def test_a_sound_file_opens(tmp_path: Path) -> None:
    """quick_check at open passes a sound file, and its rows are all there."""
    path = tmp_path / "jobs.db"
    await _filled(path, 3)
    store = await open_store(f"sqlite:///{path}")
    try:
        assert await count_jobs(store) == 3
    finally:
        await store.close()
