"""The job listing on every backend: keyset pages newest first (no job twice, none skipped),
each filter, the counts by state, and plans that seek an index instead of walking or sorting."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jobrouter.listing import JobFilter, attention_states, id_ceiling, id_floor
from jobrouter.models import Job
from jobrouter.states import JobState
from jobrouter.store import SqlStore, listing, open_store
from tests.store.pg import drop_databases, postgres_url
from tests.store.test_store import start, submit


async def walk(store: SqlStore, where: JobFilter, limit: int) -> list[list[str]]:
    """Every page of `where`, following the cursors."""
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = await store.jobs.list_jobs(where, limit=limit, cursor=cursor)
        pages.append([job.id for job in page.items])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


async def some_jobs(store: SqlStore) -> list[Job]:
    jobs = []
    for i in range(7):
        owner = "shop-1" if i % 2 == 0 else "shop-2"
        task = "caption" if i < 4 else "title"
        jobs.append(await submit(store, owner=owner, key=f"k{i}", task=task))
    return jobs


async def test_pages_walk_every_job_once_newest_first(store: SqlStore) -> None:
    jobs = await some_jobs(store)
    pages = await walk(store, JobFilter(), limit=3)
    assert [len(p) for p in pages] == [3, 3, 1]
    # newest first to the millisecond: ids made in one millisecond order by their random part
    assert [i for p in pages for i in p] == sorted((j.id for j in jobs), reverse=True)


async def test_a_page_that_ends_exactly_has_no_next_cursor(store: SqlStore) -> None:
    await some_jobs(store)
    page = await store.jobs.list_jobs(JobFilter(), limit=7)
    assert len(page.items) == 7 and page.next_cursor is None


async def test_owner_task_and_state_filters(store: SqlStore) -> None:
    jobs = await some_jobs(store)
    shop1 = sorted((j.id for j in jobs if j.owner == "shop-1"), reverse=True)
    assert [i for p in await walk(store, JobFilter(owner="shop-1"), 2) for i in p] == shop1
    titles = await store.jobs.list_jobs(JobFilter(task="title"), limit=50)
    assert {j.id for j in titles.items} == {j.id for j in jobs[4:]}
    await store.jobs.settle_job(jobs[1].id, JobState.RUNNING, error=None)
    await store.jobs.settle_job(jobs[1].id, JobState.UNKNOWN, error="no answer")
    attention = await store.jobs.list_jobs(JobFilter.of(needs_attention=True), limit=50)
    assert [j.id for j in attention.items] == [jobs[1].id]
    queued_and_attention = JobFilter.of(state=JobState.QUEUED, needs_attention=True)
    none = await store.jobs.list_jobs(queued_and_attention, limit=50)
    assert none.items == []


async def test_key_filter_finds_the_key_of_one_owner_or_of_every_owner(store: SqlStore) -> None:
    """A key is owner-scoped: under an owner it finds that owner's one job, without an owner
    (an operator's search in the console) the job of each owner that used it.
    mutant: the `list_jobs_key` fragment left out of `_where`, seen failing on both backends."""
    shop1 = await submit(store, owner="shop-1", key="order-7")
    shop2 = await submit(store, owner="shop-2", key="order-7")
    await submit(store, owner="shop-1", key="order-8")
    mine = await store.jobs.list_jobs(
        JobFilter(owner="shop-1", idempotency_key="order-7"), limit=50
    )
    assert [j.id for j in mine.items] == [shop1.id]
    every = await store.jobs.list_jobs(JobFilter(idempotency_key="order-7"), limit=50)
    assert [j.id for j in every.items] == [shop2.id, shop1.id]
    counts = await store.jobs.count_jobs_by_state(JobFilter(idempotency_key="order-8"))
    assert sum(counts.values()) == 1


@pytest.mark.parametrize("rare_below", [listing.RARE_PROVIDER_ATTEMPTS, 1])
async def test_provider_filter_finds_jobs_with_an_attempt_there(
    store: SqlStore, rare_below: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways of reading a provider's jobs (its id list when rare, a walk when common:
    `rare_below=1` makes every provider common) find the same jobs and count them alike."""
    monkeypatch.setattr(listing, "RARE_PROVIDER_ATTEMPTS", rare_below)
    jobs = await some_jobs(store)
    await start(store, jobs[2], provider="backup")
    await start(store, jobs[5], provider="primary")
    page = await store.jobs.list_jobs(JobFilter(provider="backup"), limit=50)
    assert [j.id for j in page.items] == [jobs[2].id]
    counts = await store.jobs.count_jobs_by_state(JobFilter(owner="shop-1", provider="backup"))
    assert sum(counts.values()) == 1 and counts[JobState.RUNNING] == 1


async def test_created_after_and_before(store: SqlStore) -> None:
    first = await submit(store, key="early")
    middle = time.time()
    while time.time() <= middle:  # the next job is created strictly later
        pass
    later = await submit(store, key="late")
    after = await store.jobs.list_jobs(JobFilter(created_after=middle), limit=50)
    before = await store.jobs.list_jobs(JobFilter(created_before=middle), limit=50)
    assert [j.id for j in after.items] == [later.id]
    assert [j.id for j in before.items] == [first.id]


async def test_counts_by_state_cover_every_state(store: SqlStore) -> None:
    jobs = await some_jobs(store)
    await store.jobs.cancel_job(jobs[0].id, "not needed")
    counts = await store.jobs.count_jobs_by_state(JobFilter(owner="shop-1"))
    assert set(counts) == set(JobState)
    assert counts[JobState.CANCELLED] == 1 and counts[JobState.QUEUED] == 3
    assert sum(counts.values()) == 4


def test_id_bounds_bracket_the_ids_of_their_moment() -> None:
    from jobrouter.models import new_id

    now = time.time()
    made = new_id()
    assert id_floor(now) <= made < id_ceiling(now)
    assert attention_states() == (JobState.UNKNOWN,)


@pytest.mark.parametrize(
    "where",
    [
        JobFilter(),
        JobFilter(owner="shop-1"),
        JobFilter(states=(JobState.UNKNOWN,)),
        JobFilter(owner="shop-1", states=(JobState.UNKNOWN,)),
        JobFilter(task="caption"),
        JobFilter(owner="shop-1", task="caption"),
        JobFilter(provider="openai"),
        JobFilter(owner="shop-1", provider="openai"),
        JobFilter(created_after=1.0e9, created_before=2.0e9),
    ],
)
async def test_sqlite_plan_seeks_an_index_and_never_sorts(tmp_path: Path, where: JobFilter) -> None:
    """A page must not cost a sort of every matching job: with 10^6 jobs that is the
    difference between a millisecond and a second (docs/benchmarks.md). Fails without
    migration 0006 (owner and state filters then scan the primary key or sort), and without
    migration 0010 (a task or provider filter then walks every job: on 10^6 jobs, `task=typo`
    took 0.6 s and `provider=typo` 1 s, all of it on the event loop before the long reads
    went to a thread)."""
    store = await open_store(f"sqlite:///{tmp_path}/plan.db")
    try:
        plan = await _plan(store, "list_jobs", where, limit=1)
    finally:
        await store.close()
    assert "TEMP B-TREE" not in plan, plan
    if where.owner is not None or where.states:
        assert "jobs_by_owner" in plan or "jobs_by_state" in plan, plan
    if where.task is not None:
        assert "SCAN" not in plan and ("jobs_by_task" in plan or "jobs_by_owner_task" in plan), plan
    if where.provider is not None:
        assert "SCAN" not in plan and "attempts_by_provider" in plan, plan


@pytest.mark.parametrize(
    "where",
    [
        JobFilter(owner="shop-1"),
        JobFilter(task="caption"),
        JobFilter(owner="shop-1", task="x"),
        JobFilter(provider="openai"),
        JobFilter(owner="shop-1", provider="openai"),
    ],
)
async def test_sqlite_counts_of_a_filter_never_walk_every_job(
    tmp_path: Path, where: JobFilter
) -> None:
    """The counts by state (the console shows them) seek the filter's index like the page does;
    only the counts of every job may walk them all. Fails without migration 0010."""
    store = await open_store(f"sqlite:///{tmp_path}/plan.db")
    try:
        plan = await _plan(store, "count_jobs_by_state", where)
    finally:
        await store.close()
    assert "SCAN" not in plan, plan


async def _plan(store: SqlStore, query: str, where: JobFilter, **extra: object) -> str:
    clause, params = store.jobs._listing._where(where)
    sql = store.connector.queries[query].replace("{where}", clause)
    rows = await store.connector.fetchall("EXPLAIN QUERY PLAN " + sql, {**params, **extra})
    return " | ".join(str(row["detail"]) for row in rows)


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("where", "index"),
    [
        (JobFilter(task="caption"), "jobs_by_task"),
        (JobFilter(owner="shop-1", task="caption"), "jobs_by_owner_task"),
        (JobFilter(provider="openai"), "attempts_by_provider"),
    ],
)
async def test_postgres_plan_can_seek_the_listing_indexes(
    tmp_path: Path, where: JobFilter, index: str
) -> None:
    """PostgreSQL plans by statistics (a small table is read whole), so this asks what it does
    once a walk is dear (`enable_seqscan` off): seek the filter's index (migration 0010), not
    walk the primary key filtering each job. Fails without migration 0010."""
    url = postgres_url(tmp_path)
    store = await open_store(url)
    try:
        clause, params = store.jobs._listing._where(where)
        sql = store.connector.queries["list_jobs"].replace("{where}", clause)
        async with store.connector.write() as tx:  # SET LOCAL: this transaction only
            await tx.execute("SET LOCAL enable_seqscan = off", {})
            rows = await tx.fetchall("EXPLAIN " + sql, {**params, "limit": 1})
    finally:
        await store.close()
        drop_databases([url])
    plan = " | ".join(str(row["QUERY PLAN"]) for row in rows)
    assert index in plan, plan
