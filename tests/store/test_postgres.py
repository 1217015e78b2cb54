"""PostgreSQL only: what several router processes sharing one database rely on. Two `open_store`
instances are two pools, i.e. two processes as far as the database can tell.

Migrations run once when routers start together, and give the SQLite schema; a double submit,
two finishing attempts and two claimers collide across stores with exactly one winner (the
collisions are forced: both wait on one row lock, then go); events committed by one store wake
watchers of the other through LISTEN/NOTIFY, also after the listen connection was killed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg
import pytest

from jobrouter.errors import StoreError
from jobrouter.listing import JobFilter
from jobrouter.models import AttemptUsage, Job, NewEvent
from jobrouter.states import JobState
from jobrouter.store import SqlStore, open_store
from jobrouter.store.connector import load_migrations
from jobrouter.store.postgres import migrate, translate
from tests.store.pg import fresh_database
from tests.support.store_jobs import count_jobs, create_job

pytestmark = pytest.mark.postgres

if TYPE_CHECKING:  # asyncpg's classes are generic only in its stubs
    Conn: TypeAlias = asyncpg.Connection[asyncpg.Record]


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


@asynccontextmanager
async def stores(url: str, count: int) -> AsyncIterator[list[SqlStore]]:
    """`count` stores opened at the same time (so they also migrate at the same time)."""
    opened = list(await asyncio.gather(*(open_store(url) for _ in range(count))))
    try:
        yield opened
    finally:
        for store in opened:
            await store.close()


@asynccontextmanager
async def connection(url: str) -> AsyncIterator[Conn]:
    conn = await asyncpg.connect(url)
    try:
        yield conn
    finally:
        await conn.close()


async def submit(store: SqlStore, key: str = "order-42", claimed_by: str | None = None) -> Job:
    return await create_job(
        store,
        owner="shop-1",
        idempotency_key=key,
        task="caption",
        input={"product": "tea"},
        params={},
        deadline_s=None,
        claimed_by=claimed_by,
        claim_s=60.0,
    )


async def eventually(check: Callable[[], Awaitable[bool]], what: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within}s: {what}")
        await asyncio.sleep(0.02)


async def after_both_wait_on_a_lock(watch: Conn, *tasks: asyncio.Task[Any]) -> None:
    """Let `tasks` run until all of them wait on a row lock in the database."""

    async def waiting() -> bool:
        count = await watch.fetchval(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        done = [task for task in tasks if task.done()]
        assert not done, f"finished without waiting: {done[0].result()}"
        return int(count) >= len(tasks)

    await eventually(waiting, f"{len(tasks)} statements waiting on the lock")


# ---- migrations ---------------------------------------------------------------------------


async def schema_of(conn: Conn) -> dict[str, list[tuple[Any, ...]]]:
    queries = {
        "columns": "SELECT table_name, column_name, ordinal_position, data_type, is_nullable, "
        "column_default FROM information_schema.columns WHERE table_schema = 'public' "
        "ORDER BY 1, 3",
        "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes "
        "WHERE schemaname = 'public' ORDER BY 1, 2",
        "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
        "FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
        "triggers": "SELECT event_object_table, trigger_name, event_manipulation, "
        "action_timing, action_condition, action_statement FROM information_schema.triggers "
        "ORDER BY 1, 2, 3",
        "migrations": "SELECT version, name FROM schema_migrations ORDER BY version",
    }
    return {key: [tuple(row) for row in await conn.fetch(sql)] for key, sql in queries.items()}


async def test_migrations_run_once_when_three_routers_start_together() -> None:
    async with (
        fresh_database() as url,
        connection(url) as a,
        connection(url) as b,
        connection(url) as c,
    ):
        applied = await asyncio.gather(migrate(a), migrate(b), migrate(c))
        numbers = [number for number, _, _ in load_migrations("postgres")]
        assert sorted(applied, key=len) == [[], [], numbers]
        assert await a.fetchval("SELECT COUNT(*) FROM schema_migrations") == len(numbers)


async def test_replayed_and_concurrent_migrations_give_the_same_schema() -> None:
    async with fresh_database() as once, fresh_database() as together:
        for _ in range(2):  # the second open replays: everything is already applied
            async with stores(once, 1):
                pass
        async with stores(together, 3):
            pass
        async with connection(once) as a, connection(together) as b:
            schema = await schema_of(a)
            assert schema == await schema_of(b)
        assert [row[0] for row in schema["migrations"]] == [
            number for number, _, _ in load_migrations("postgres")
        ]


def sqlite_schema(path: Path) -> dict[str, list[tuple[str, bool]]]:
    import sqlite3

    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            table: [
                (col[1], bool(col[3] or col[5]))
                for col in db.execute(f"PRAGMA table_info({table})")
            ]  # (name, not null or primary key)
            for table in tables
        }


async def test_postgres_schema_has_the_tables_and_columns_of_the_sqlite_schema(
    pg_url: str, tmp_path: Path
) -> None:
    assert [n for n, _, _ in load_migrations("postgres")] == [
        n for n, _, _ in load_migrations("sqlite")
    ], "every SQLite migration needs its PostgreSQL twin (and back)"
    sqlite_store = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    await sqlite_store.close()
    expected = sqlite_schema(tmp_path / "jobs.db")
    async with stores(pg_url, 1), connection(pg_url) as conn:
        rows = await conn.fetch(
            "SELECT table_name, column_name, is_nullable FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
        )
    actual: dict[str, list[tuple[str, bool]]] = {}
    for row in rows:
        actual.setdefault(row[0], []).append((row[1], row[2] == "NO"))
    # Who LISTENs for which notifications (migration 0014): SQLite has no notifications.
    assert actual.pop("jobrouter_follows") == [
        ("pid", True),
        ("kinds", True),
        ("alive_until", True),
    ]
    # The leader's lease (migration 0016): on SQLite the single process leads.
    assert actual.pop("jobrouter_leader_lease") == [
        ("id", True),
        ("holder", True),
        ("term", True),
        ("pid", True),
        ("expires_at", True),
    ]
    assert actual == expected


async def test_every_named_query_prepares_with_typed_parameters(pg_url: str) -> None:
    async with stores(pg_url, 1) as (store,), connection(pg_url) as conn:
        generated = _listings(store)
        for name, query in {**store.connector.queries, **generated}.items():
            if name.startswith("list_jobs_") or "{where}" in query:
                continue  # the listing's fragments: prepared put together, in _listings
            sql, _ = translate(query)
            try:
                await conn.prepare(sql)
            except asyncpg.PostgresError as exc:
                pytest.fail(f"query {name} does not prepare on PostgreSQL: {exc}")


def _listings(store: SqlStore) -> dict[str, str]:
    """The listing's statements with every fragment in use (router/store/listing.py)."""
    every = JobFilter(
        owner="o",
        states=(JobState.UNKNOWN,),
        task="t",
        provider="p",
        created_after=1.0,
        created_before=2.0,
        idempotency_key="k",
    )
    several = JobFilter(states=(JobState.QUEUED, JobState.RUNNING))
    found = {}
    for label, where in (("every filter", every), ("several states", several)):
        clause, _ = store.jobs._listing._where(where)
        found[f"list_jobs({label})"] = store.connector.queries["list_jobs"].replace(
            "{where}", clause + " " + store.connector.queries["list_jobs_cursor"]
        )
        found[f"count_jobs_by_state({label})"] = store.connector.queries[
            "count_jobs_by_state"
        ].replace("{where}", clause)
    return found


# ---- races across stores ------------------------------------------------------------------


async def test_double_submit_across_two_stores_makes_one_job(pg_url: str) -> None:
    async with stores(pg_url, 2) as (first, second):
        for key in ("a", "b", "c"):
            jobs = await asyncio.gather(
                *(submit(first if i % 2 else second, key) for i in range(20))
            )
            assert len({job.id for job in jobs}) == 1
            assert sum(job.created for job in jobs) == 1
        assert await count_jobs(first) == 3


async def test_two_attempts_finishing_at_once_in_two_stores_have_one_winner(pg_url: str) -> None:
    async with stores(pg_url, 2) as (first, second), connection(pg_url) as watch:
        job = await submit(first)
        _, one = await first.jobs.start_attempt(
            job.id, provider="a", model=None, worker="w1", lease_s=30, exclusive=False
        )
        _, two = await second.jobs.start_attempt(
            job.id, provider="b", model=None, worker="w2", lease_s=30, exclusive=False
        )
        async with first.connector.write() as tx:  # hold the job row: both finishers queue up
            await tx.fetchone(first.connector.queries["lock_job"], {"id": job.id})
            finishes = [
                asyncio.create_task(
                    first.jobs.finish_attempt_cas(one.id, {"text": "a"}, AttemptUsage())
                ),
                asyncio.create_task(
                    second.jobs.finish_attempt_cas(two.id, {"text": "b"}, AttemptUsage())
                ),
            ]
            await after_both_wait_on_a_lock(watch, *finishes)
        outcomes = await asyncio.gather(*finishes)
        assert sorted(o.won for o in outcomes) == [False, True]
        winner = next(o for o in outcomes if o.won)
        loser = next(o for o in outcomes if not o.won)
        final = await second.jobs.get_job(job.id)
        assert final is not None and final.state == "succeeded"
        assert final.winner_attempt_id == winner.attempt.id
        assert final.result == winner.attempt.output
        assert loser.attempt.state == "lost"
        assert await watch.fetchval("SELECT COUNT(*) FROM outbox WHERE job_id = $1", job.id) == 1
        kinds = [event.kind for event in await first.jobs.list_events(job.id)]
        assert kinds.count("job.succeeded") == 1 and kinds.count("attempt.lost") == 1


async def test_claim_waits_for_the_other_claim_and_then_gets_nothing(pg_url: str) -> None:
    """READ COMMITTED re-checks the UPDATE's WHERE on the row the first claimer committed."""
    async with stores(pg_url, 2) as (first, second), connection(pg_url) as watch:
        job = await submit(first)
        async with first.connector.write() as tx:
            row = await tx.fetchone(
                first.connector.queries["claim_job"],
                {"id": job.id, "worker": "w1", "now": time.time(), "claim_until": time.time() + 60},
            )
            assert row is not None and row["claimed_by"] == "w1"
            late = asyncio.create_task(second.jobs.claim(job.id, "w2", 60))
            await after_both_wait_on_a_lock(watch, late)
        assert await late is None
        assert await watch.fetchval("SELECT claimed_by FROM jobs WHERE id = $1", job.id) == "w1"


async def test_racing_claims_from_two_stores_give_each_job_to_exactly_one(pg_url: str) -> None:
    async with stores(pg_url, 2) as (first, second):
        jobs = [await submit(first, f"k{i}") for i in range(30)]
        for job in jobs:
            got = await asyncio.gather(
                first.jobs.claim(job.id, "w1", 60), second.jobs.claim(job.id, "w2", 60)
            )
            assert sum(claim is not None for claim in got) == 1, got


# ---- LISTEN / NOTIFY ------------------------------------------------------------------------


GUARD_S = 60.0  # a ceiling against a hang only: a notification arrives in milliseconds


async def woken_by(store: SqlStore, job_id: str, change: Awaitable[Any]) -> None:
    """`change`, committed through another store, wakes `store`'s watcher of the job. The
    watcher has no poll of its own here (only the guard), so nothing but the LISTEN/NOTIFY
    delivery can end the wait: no clock decides."""
    await store.jobs.follow_events()
    with store.jobs.watching(job_id) as changed:
        await change
        async with asyncio.timeout(GUARD_S):
            await changed.event.wait()


async def test_a_commit_in_one_store_wakes_a_watcher_in_the_other(pg_url: str) -> None:
    async with stores(pg_url, 2) as (first, second):
        job = await submit(first)
        note = first.jobs.note(job.id, [NewEvent(kind="job.waiting", data={"why": "test"})])
        await woken_by(second, job.id, note)
        assert [e.kind for e in await second.jobs.list_events(job.id)][-1] == "job.waiting"


async def test_watchers_read_again_after_the_listen_connection_was_killed(pg_url: str) -> None:
    """Notifications sent while the listener was away are lost: once it is back, every watcher
    is told to read again (`on_change("")`), and it LISTENs again for the events it followed."""
    async with stores(pg_url, 2) as (first, second), connection(pg_url) as admin:
        job = await submit(first)
        await second.jobs.follow_events()
        listeners = (
            "SELECT pid, application_name FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name LIKE 'jobrouter-listen%'"
        )
        killed = {row[0] for row in await admin.fetch(listeners)}
        assert len(killed) == 2
        with second.jobs.watching(job.id) as changed:
            await admin.execute("SELECT pg_terminate_backend(pid) FROM (" + listeners + ") l")

            async def back() -> bool:
                rows = await admin.fetch(listeners)
                names = sorted(row[1] for row in rows)
                fresh = not {row[0] for row in rows} & killed
                return fresh and names == ["jobrouter-listen:", "jobrouter-listen:events"]

            await eventually(back, "both stores listen again, the second for events")
            # Nothing was committed meanwhile: only the reconnect can wake this watcher.
            async with asyncio.timeout(GUARD_S):
                await changed.wait()
            assert changed.take() is None  # no job with it: read again
        note = first.jobs.note(job.id, [NewEvent(kind="job.waiting")])
        await woken_by(second, job.id, note)


async def test_a_pooled_connection_is_not_reset_after_each_statement(pg_url: str) -> None:
    """asyncpg's default reset on release (`... UNLISTEN *; RESET ALL`) was one more server
    transaction after every statement; the pool keeps sessions as they are. On the old code
    the backend's last statement is the reset query."""
    async with stores(pg_url, 1) as (store,), connection(pg_url) as admin:
        job = await submit(store)
        assert await store.jobs.get_job(job.id) is not None
        last = await admin.fetch(
            "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'jobrouter' AND state = 'idle'"
        )
        assert last and all("RESET ALL" not in row["query"] for row in last), last


# ---- errors -------------------------------------------------------------------------------


async def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    with pytest.raises(StoreError) as caught:
        await open_store("postgresql://postgres:s3cret@127.0.0.1:1/jobs")
    assert "s3cret" not in str(caught.value)
    assert "postgresql://postgres:***@127.0.0.1:1/jobs" in str(caught.value)


async def test_a_missing_database_is_a_store_error(pg_url: str) -> None:
    missing = pg_url + "_missing"
    with pytest.raises(StoreError, match="does not exist"):
        await open_store(missing)


async def test_a_connection_lost_in_a_transaction_is_a_store_error_and_the_pool_recovers(
    pg_url: str,
) -> None:
    async with stores(pg_url, 1) as (store,), connection(pg_url) as admin:
        job = await submit(store)
        with pytest.raises(StoreError, match="PostgreSQL write failed"):
            async with store.connector.write() as tx:
                row = await tx.fetchone("SELECT pg_backend_pid() AS pid", {})
                assert row is not None
                await admin.execute("SELECT pg_terminate_backend($1)", row["pid"])
                await tx.fetchone("SELECT 1 AS one", {})
        assert await store.jobs.get_job(job.id) is not None
