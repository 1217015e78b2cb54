"""Reads that wait on the PostgreSQL server (migration 0012, router/store/server_waits.py): a
waiter's read of settled jobs and a worker's claim each wait inside one statement, one
transaction however long they wait. Decided on events: the server's `pg_stat_activity` shows
the wait running, a row arrives, `pg_stat_database.xact_commit` once every other backend has
gone; each guard is a ceiling against a hang, and where a verdict is "it returned because of
the event, not its bound", the guard is shorter than the bound."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest

from jobrouter import Router
from jobrouter.config import DatabaseConfig, EngineConfig, RouterConfig, TaskConfig
from jobrouter.models import AttemptUsage, Job
from jobrouter.states import JobState
from jobrouter.store import SqlStore
from jobrouter.store.claims import Claimed
from jobrouter.store.connector import load_queries
from jobrouter.store.postgres import PostgresConnector
from jobrouter.store.server_waits import STEP_S
from jobrouter.store.starts import AttemptStart
from jobrouter.store.waits import SETTLED
from tests.store.pg import ADMIN_URL, fresh_database
from tests.store.test_postgres_wakeups import opened
from tests.support.claiming import claim_runnable
from tests.support.fakes import FakeProvider
from tests.support.store_jobs import create_job

pytestmark = pytest.mark.postgres

GUARD_S = 60.0  # against a hang only
BOUND_S = 30.0  # a wait's bound where the verdict is that an event, not the bound, ended it
BEFORE_BOUND_S = 20.0  # the ceiling for such an event: a return by the bound fails it
# Read from the admin database: a read in the test's own would count among its commits.
RUNNING = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND state = 'active' "
    "AND query LIKE $2"
)


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


async def active(url: str, function: str) -> int:
    """How many statements calling `function` run on the server in `url`'s database."""
    conn = await asyncpg.connect(ADMIN_URL)
    try:
        return int(await conn.fetchval(RUNNING, urlsplit(url).path[1:], f"%{function}(%"))
    finally:
        await conn.close()


async def quiet_commits(url: str) -> int:
    """The commits of `url`'s database, less one per session started (a connection's start is
    a commit on the server, and a pool opens one more whenever two statements overlap, which
    varies from run to run), once no backend is connected to it (each has then reported its
    own); read from the admin database, so nothing of the reading is counted."""
    conn = await asyncpg.connect(ADMIN_URL)
    name = urlsplit(url).path[1:]
    try:
        async with asyncio.timeout(GUARD_S):
            while await conn.fetchval(  # noqa: ASYNC110 (the server has no event for it)
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", name
            ):
                await asyncio.sleep(0.05)
        return int(
            await conn.fetchval(
                "SELECT xact_commit - sessions FROM pg_stat_database WHERE datname = $1", name
            )
        )
    finally:
        await conn.close()


async def running(url: str, function: str, count: int = 1) -> None:
    """Return once `count` statements calling `function` are running on the server."""
    conn = await asyncpg.connect(ADMIN_URL)
    name = urlsplit(url).path[1:]
    try:
        async with asyncio.timeout(GUARD_S):
            while await conn.fetchval(RUNNING, name, f"%{function}(%") < count:  # noqa: ASYNC110
                await asyncio.sleep(0.01)  # the server has no event for it
    finally:
        await conn.close()


async def settled_read(store: SqlStore, ids: list[str], wait_s: float) -> list[dict[str, Any]]:
    params = {"ids": json.dumps(ids), "states": SETTLED, "wait_s": wait_s, "step_s": STEP_S}
    return await store.connector.fetchall(store.connector.queries["await_settled"], params)


async def submit(store: SqlStore, key: str) -> Job:
    return await create_job(
        store,
        owner="shop",
        idempotency_key=key,
        task="caption",
        input={"k": key},
        params={},
        deadline_s=None,
        claimed_by=None,
        claim_s=30.0,
    )


def ignore(_: list[Claimed]) -> None:
    pass


async def no_first(_: Job) -> AttemptStart | None:
    return None


async def test_the_waiting_read_returns_a_job_settled_by_another_connection(
    pg_url: str,
) -> None:
    async with opened(pg_url) as store, opened(pg_url) as elsewhere:
        job = await submit(elsewhere, "k1")
        other = await submit(elsewhere, "k2")
        reading = asyncio.create_task(settled_read(store, [job.id, other.id], BOUND_S))
        await running(pg_url, "jobrouter_await_settled")
        await elsewhere.jobs.settle_job(job.id, JobState.FAILED, error="elsewhere")
        async with asyncio.timeout(BEFORE_BOUND_S):
            rows = await reading
    assert [(row["id"], row["state"], row["error"]) for row in rows] == [
        (job.id, "failed", "elsewhere")
    ]


async def test_the_waiting_read_returns_empty_after_its_bound(pg_url: str) -> None:
    async with opened(pg_url) as store:
        job = await submit(store, "k1")
        began = asyncio.get_running_loop().time()
        async with asyncio.timeout(GUARD_S):
            rows = await settled_read(store, [job.id], 0.2)
        waited = asyncio.get_running_loop().time() - began
        assert rows == []
        assert waited >= 0.2  # it waited on the server; it did not answer at once
        still = await store.jobs.get_job(job.id)
        assert still is not None and still.state is JobState.QUEUED


async def test_a_wait_on_another_process_job_is_one_waiting_read(pg_url: str) -> None:
    """`awaiting` with few waits open: no polled read, one waiting read that brings the row."""
    async with opened(pg_url) as store, opened(pg_url) as elsewhere:
        queries: list[str] = []
        real = store.connector.fetchall

        async def counted(query: str, params: Any) -> Any:
            queries.append(query)
            return await real(query, params)

        store.connector.fetchall = counted  # type: ignore[method-assign]
        job = await submit(elsewhere, "k1")
        with store.jobs.watching(job.id) as change, store.jobs.awaiting(job.id):
            await running(pg_url, "jobrouter_await_settled")
            await elsewhere.jobs.cancel_job(job.id, "elsewhere")
            async with asyncio.timeout(GUARD_S):
                await change.wait()
            heard = change.take()
    assert heard is not None and heard.state is JobState.CANCELLED
    assert store.connector.queries["settled_jobs"] not in queries  # no polled read
    assert queries and set(queries) == {store.connector.queries["await_settled"]}


async def test_a_waiting_claim_takes_a_job_submitted_while_it_waits(pg_url: str) -> None:
    async with opened(pg_url) as worker, opened(pg_url) as submitter:
        claiming = asyncio.create_task(
            claim_runnable(worker.jobs, "w1", 60.0, 10, no_first, ignore, wait_s=BOUND_S)
        )
        await running(pg_url, "jobrouter_await_runnable")
        job = await submit(submitter, "k1")
        async with asyncio.timeout(BEFORE_BOUND_S):
            claimed = await claiming
    assert [item.job.id for item in claimed] == [job.id]
    conn = await asyncpg.connect(pg_url)
    try:
        assert await conn.fetchval("SELECT claimed_by FROM jobs WHERE id = $1", job.id) == "w1"
    finally:
        await conn.close()


async def test_two_waiting_workers_wake_once_for_one_job(pg_url: str) -> None:
    """The wait locks the job it found: the other worker's wait passes over it and goes on
    waiting (no claim that finds nothing), and exactly one of them claims it."""
    async with opened(pg_url) as a, opened(pg_url) as b, opened(pg_url) as submitter:
        claims = {
            name: asyncio.create_task(
                claim_runnable(store.jobs, name, 60.0, 10, no_first, ignore, wait_s=BOUND_S)
            )
            for name, store in (("wa", a), ("wb", b))
        }
        await running(pg_url, "jobrouter_await_runnable", 2)
        job = await submit(submitter, "k1")
        async with asyncio.timeout(BEFORE_BOUND_S):
            done, _ = await asyncio.wait(claims.values(), return_when=asyncio.FIRST_COMPLETED)
        (first,) = done
        (other,) = set(claims.values()) - done
        assert [item.job.id for item in first.result()] == [job.id]
        await running(pg_url, "jobrouter_await_runnable")  # the other still waits
        assert not other.done()
        other.cancel()
        await asyncio.gather(other, return_exceptions=True)


async def test_a_worker_stopped_during_a_server_wait_stops_at_once(pg_url: str) -> None:
    """Its claim waits on the server up to `poll_interval` (40 s here, within half of the
    statement timeout: 20 s): closing cancels the statement, so the close ends well before
    the bound, and the server runs no wait afterwards."""
    task = TaskConfig(providers=["a"], side_effects="none", certification="none")
    cfg = RouterConfig(
        tasks={"caption": task},
        engine=EngineConfig(poll_interval=40.0),
        database=DatabaseConfig(command_timeout=40.0),
    )
    router = await Router.open(pg_url, cfg, providers={"a": FakeProvider("a")})
    try:
        await running(pg_url, "jobrouter_await_runnable")
    finally:
        async with asyncio.timeout(10.0):  # the server wait would hold it 20 s
            await router.close()
    assert await active(pg_url, "jobrouter_await_runnable") == 0


def counted(method: str, sent: list[str]) -> Any:
    real = getattr(PostgresConnector, method)

    async def call(self: PostgresConnector, query: str, params: Any) -> Any:
        sent.append(query)
        return await real(self, query, params)

    return call


async def test_a_job_at_concurrency_one_costs_four_commits(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Submitted in one process, claimed (with its first attempt) by a waiting claim in
    another, finished there, its settle read by the first with one waiting read: 4
    transactions per job (create; claim; finish; the read), nothing else. Counted for 1 and
    for 6 jobs, the difference being the 5 more jobs': what the stores send (write
    transactions and autocommit reads), and the server's count once every backend has gone
    (less the connections' starts)."""

    async def first(_: Job) -> AttemptStart | None:
        return AttemptStart(provider="a", model="m", worker="w1", lease_s=30.0)

    async def run(jobs: int, keys: str) -> int:
        before = await quiet_commits(pg_url)
        async with opened(pg_url) as worker, opened(pg_url) as waiter:
            waiter.jobs._waits._wait_calls.wait_s = (
                BOUND_S  # no read ends by its bound on a slow machine
            )
            for n in range(jobs):
                claiming = asyncio.create_task(
                    claim_runnable(worker.jobs, "w1", 60.0, 10, first, ignore, wait_s=BOUND_S)
                )
                await running(pg_url, "jobrouter_await_runnable")
                job = await submit(waiter, f"{keys}-{n}")
                async with asyncio.timeout(BEFORE_BOUND_S):
                    (claimed,) = await claiming
                assert claimed.attempt is not None
                with waiter.jobs.watching(job.id) as change, waiter.jobs.awaiting(job.id):
                    await running(pg_url, "jobrouter_await_settled")
                    await worker.jobs.finish_attempt_cas(
                        claimed.attempt.id, {"text": "ok"}, AttemptUsage()
                    )
                    async with asyncio.timeout(BEFORE_BOUND_S):
                        await change.wait()
                    done = change.take()
                assert done is not None and done.state is JobState.SUCCEEDED
        return await quiet_commits(pg_url) - before

    sent: list[str] = []
    for method in ("fetchone", "fetchall"):
        monkeypatch.setattr(PostgresConnector, method, counted(method, sent))
    real_write = PostgresConnector.write

    def write(self: PostgresConnector) -> Any:
        sent.append("write")
        return real_write(self)

    monkeypatch.setattr(PostgresConnector, "write", write)
    async with opened(pg_url):  # the schema first: its migrations are no job's commits
        pass
    sent.clear()
    one = await run(1, "one")
    sent_one, sent[:] = list(sent), []
    six = await run(6, "six")
    per_job = ["write"] * 3 + [load_queries("postgres")["await_settled"]]
    assert sorted(sent) == sorted(sent_one + per_job * 5)  # what the stores send: exactly 4
    # The server's count: the same 4 per job, plus, seldom (1 run in 8 on a loaded machine),
    # one or two commits that none of the stores' statements explains.
    assert 5 * 4 <= six - one <= 5 * 4 + 2
