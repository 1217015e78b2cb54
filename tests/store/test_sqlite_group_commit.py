"""SQLite group commit: concurrent write transactions of one process share one COMMIT.

Each property is checked on a real SQLite file: batching really happens, one member's failure
undoes only its own statements, a failed COMMIT fails every member (none was committed), a
cancelled member neither breaks the connection nor undoes the others, a write lock held by
another process is waited for off the event loop, and with one job in flight the COMMIT runs
inline.

How batches form: a writer with nobody queued behind it commits at once (on a thread); the
writers that arrive while that COMMIT runs wait for it, then share the next one. So a test
starts a "primer" writer first: the writers started right after it share one COMMIT.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jobrouter.errors import StoreError
from jobrouter.store import SqlStore, open_store
from jobrouter.store.sqlite import SqliteConnector
from tests.store.test_store import submit
from tests.support.store_jobs import count_jobs


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    store = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    yield store
    await store.close()


def connector(store: SqlStore) -> SqliteConnector:
    assert isinstance(store.connector, SqliteConnector)
    return store.connector


async def test_concurrent_writers_share_commits_and_all_land(sqlite_store: SqlStore) -> None:
    stats = connector(sqlite_store).stats
    before_tx, before_commits = stats.write_transactions, stats.commits
    jobs = await asyncio.gather(*(submit(sqlite_store, key=f"k{i % 50}") for i in range(100)))
    assert len({job.id for job in jobs}) == 50  # 50 keys, each submitted twice
    assert sum(job.created for job in jobs) == 50
    assert await count_jobs(sqlite_store) == 50
    logical = stats.write_transactions - before_tx
    commits = stats.commits - before_commits
    assert logical == 100
    assert commits < logical / 5, f"{commits} commits for {logical} write transactions"


async def test_a_failing_member_undoes_only_its_own_statements(sqlite_store: SqlStore) -> None:
    conn = connector(sqlite_store)

    async def failing() -> None:
        async with conn.write() as tx:
            await tx.execute("INSERT INTO schema_migrations VALUES (999, 'x', 0)", {})
            raise ValueError("this writer changes its mind")

    before = conn.stats.commits
    results = await asyncio.gather(
        submit(sqlite_store, key="primer"),
        submit(sqlite_store, key="a"),
        failing(),
        submit(sqlite_store, key="b"),
        return_exceptions=True,
    )
    assert conn.stats.commits - before == 2, "the primer's COMMIT, then one for the other three"
    assert isinstance(results[2], ValueError)
    jobs = [r for r in results if r is not None and not isinstance(r, BaseException)]
    assert {job.idempotency_key for job in jobs} == {"primer", "a", "b"}
    assert await count_jobs(sqlite_store) == 3
    row = await conn.fetchone("SELECT count(*) AS n FROM schema_migrations WHERE version = 999", {})
    assert row == {"n": 0}


async def test_a_failing_writer_alone_rolls_back_and_the_next_commits(
    sqlite_store: SqlStore,
) -> None:
    """A writer that opened its batch rolls the whole transaction back (nobody joined it)."""
    conn = connector(sqlite_store)
    with pytest.raises(ValueError):
        async with conn.write() as tx:
            await tx.execute("INSERT INTO schema_migrations VALUES (998, 'x', 0)", {})
            raise ValueError("this writer changes its mind")
    assert (await submit(sqlite_store, key="next")).created
    row = await conn.fetchone("SELECT count(*) AS n FROM schema_migrations WHERE version = 998", {})
    assert row == {"n": 0}
    assert await count_jobs(sqlite_store) == 1


async def orphan_event(conn: SqliteConnector) -> None:
    """A write whose COMMIT fails for real: a deferred foreign key is checked only then."""
    async with conn.write() as tx:
        await tx.execute("PRAGMA defer_foreign_keys=ON", {})
        await tx.execute(
            "INSERT INTO job_events VALUES ('no-such-job', 1, 'x', 'queued', '{}', 0)", {}
        )


async def test_a_failed_commit_fails_every_member(sqlite_store: SqlStore) -> None:
    """The job created in the same batch as the failing write must not be reported as created,
    and must not exist."""
    conn = connector(sqlite_store)
    before = conn.stats.commits
    primer, *results = await asyncio.gather(
        submit(sqlite_store, key="primer"),
        submit(sqlite_store, key="a"),
        orphan_event(conn),
        return_exceptions=True,
    )
    assert conn.stats.commits - before == 2, "the primer's COMMIT, then one for the other two"
    assert not isinstance(primer, BaseException)
    assert all(isinstance(r, sqlite3.IntegrityError) for r in results), results
    assert await count_jobs(sqlite_store) == 1  # the primer only
    again = await submit(sqlite_store, key="a")  # the connection is usable afterwards
    assert again.created


async def test_with_one_job_in_flight_commits_run_inline(sqlite_store: SqlStore) -> None:
    conn = connector(sqlite_store)
    conn.jobs_in_flight = lambda: 1
    before = conn.stats.commits
    for key in ("a", "b", "c"):
        assert (await submit(sqlite_store, key=key)).created
    assert conn.stats.commits - before == 3
    assert conn._commit_in_flight is None, "no COMMIT went to a thread"
    with pytest.raises(sqlite3.IntegrityError):
        await orphan_event(conn)
    assert await count_jobs(sqlite_store) == 3


async def test_a_cancelled_member_keeps_the_connection_and_the_others(
    sqlite_store: SqlStore,
) -> None:
    conn = connector(sqlite_store)
    primer = asyncio.create_task(submit(sqlite_store, key="primer"))
    first = asyncio.create_task(submit(sqlite_store, key="cancelled"))
    second = asyncio.create_task(submit(sqlite_store, key="kept"))
    await asyncio.sleep(0)  # the primer's COMMIT is on its thread; the other two wait for it
    primer_commit = conn._commit_in_flight
    assert primer_commit is not None
    await asyncio.wait({primer_commit})
    for _ in range(5):  # a loop turn each: both bodies run, the last starts their COMMIT
        await asyncio.sleep(0)
    shared = conn._commit_in_flight
    assert shared is not primer_commit and shared is not None and not shared.done()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert (await second).created and (await primer).created
    # The cancelled writer's transaction was already in the batch: it committed all the same
    # (a cancellation is not a rollback), and the store goes on working.
    assert await sqlite_store.jobs.find_job("shop-1", "cancelled") is not None
    assert (await submit(sqlite_store, key="after")).created


async def test_a_lock_held_by_another_process_is_waited_for_off_the_loop(
    sqlite_store: SqlStore,
    tmp_path: Path,
) -> None:
    """Another connection (as another process would) holds the write lock for 0.6 s: the write
    waits for it on a worker thread while the event loop keeps running."""
    held, release = threading.Event(), threading.Event()

    def other_process() -> None:
        other = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        held.set()
        release.wait(5)
        other.execute("COMMIT")
        other.close()

    holder = threading.Thread(target=other_process)
    holder.start()
    assert await asyncio.to_thread(held.wait, 5)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    asyncio.get_running_loop().call_later(0.6, release.set)
    began = time.monotonic()
    job = await submit(sqlite_store, key="waited")
    waited = time.monotonic() - began
    ticking.cancel()
    holder.join(5)
    assert job.created
    assert waited >= 0.5, f"the write did not wait for the lock ({waited:.2f}s)"
    assert ticks >= 20, f"the event loop stalled while waiting ({ticks} ticks in {waited:.2f}s)"


async def test_a_write_that_makes_sqlite_roll_everything_back_fails_its_batch_only(
    sqlite_store: SqlStore,
) -> None:
    """An interrupted statement (SQLITE_INTERRUPT, like a full disk or an I/O error) makes
    SQLite roll back the whole transaction, not just the statement: the writers already in
    that batch are told it failed, and the next writer starts a fresh batch and is told the
    truth about its own row."""
    conn = connector(sqlite_store)
    writer = conn._writer

    async def insert(version: int, interrupt: bool = False) -> None:
        async with conn.write() as tx:
            if interrupt:
                writer.set_progress_handler(lambda: 1, 1)
            try:
                await tx.execute(
                    "INSERT INTO schema_migrations VALUES (:v, 'x', 0)", {"v": version}
                )
            finally:
                writer.set_progress_handler(None, 1)

    results = await asyncio.gather(
        insert(900), insert(901), insert(902, interrupt=True), insert(903), return_exceptions=True
    )
    assert results[0] is None  # the primer, in its own batch
    assert isinstance(results[1], StoreError)  # its batch was rolled back under it
    assert isinstance(results[2], sqlite3.OperationalError)  # interrupted
    assert results[3] is None  # a fresh batch
    rows = await conn.fetchall("SELECT version FROM schema_migrations WHERE version >= 900", {})
    assert sorted(row["version"] for row in rows) == [900, 903]


async def test_a_writer_cancelled_twice_while_waiting_for_the_lock_leaves_no_transaction(
    sqlite_store: SqlStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Waiting on a thread for another process's write lock, the writer is cancelled twice:
    its BEGIN must still be undone once it gets the lock, or every later write would fail.
    The lock is let go only after both cancels (not on a timer a busy machine could beat)."""
    conn = connector(sqlite_store)
    other = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    entered = threading.Event()
    real_wait = SqliteConnector._begin_waiting

    def begin_waiting(self: SqliteConnector) -> None:
        entered.set()
        real_wait(self)

    monkeypatch.setattr(SqliteConnector, "_begin_waiting", begin_waiting)
    waiting = asyncio.create_task(submit(sqlite_store, key="cancelled"))
    assert await asyncio.to_thread(entered.wait, 60)  # it waits for the lock on its thread
    waiting.cancel()
    await asyncio.sleep(0)
    waiting.cancel()
    other.commit()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert not conn._writer.in_transaction and conn._batch is None
    assert (await submit(sqlite_store, key="after")).created
    assert await sqlite_store.jobs.find_job("shop-1", "cancelled") is None
    other.close()
