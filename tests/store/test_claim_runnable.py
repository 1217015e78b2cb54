"""`claim_runnable` on every backend: a worker takes runnable jobs and starts the first attempt
of each queued one in ONE transaction (it was a read, a claim per job and a start per job);
two workers claiming at once never take the same job; nothing is started for a job whose
transaction did not commit."""

from __future__ import annotations

import asyncio

import pytest

from jobrouter.models import Attempt, Job, NewEvent
from jobrouter.states import AttemptState, JobState
from jobrouter.store import SqlStore, open_store
from jobrouter.store.claims import Claimed
from jobrouter.store.starts import AttemptStart
from tests.support.claiming import FirstAttempt, claim_runnable
from tests.support.store_jobs import create_job

SKIPPED = NewEvent(kind="provider.skipped", data={"provider": "c"})


async def submit(store: SqlStore, key: str) -> Job:
    return await create_job(
        store,
        owner="shop-1",
        idempotency_key=key,
        task="caption",
        input={"n": key},
        params={},
        deadline_s=60.0,
        claimed_by=None,
        claim_s=60.0,
    )


def ignore(_: list[Claimed]) -> None:
    pass


def start_on(provider: str, worker: str = "w1") -> AttemptStart:
    return AttemptStart(provider=provider, model="m", worker=worker, lease_s=30.0, notes=(SKIPPED,))


async def test_claims_and_starts_first_attempts_in_one_transaction(store: SqlStore) -> None:
    jobs = [await submit(store, f"k{i}") for i in range(3)]
    handed: list[list[Claimed]] = []

    async def first(job: Job) -> AttemptStart | None:
        return None if job.id == jobs[2].id else start_on("a")  # the driver decides that one

    before = store.connector.stats.write_transactions
    claimed = await claim_runnable(store.jobs, "w1", 60.0, 10, first, handed.append)
    assert store.connector.stats.write_transactions - before == 1
    assert handed == [claimed]  # after the commit, with what was claimed
    by_id = {item.job.id: item for item in claimed}
    assert set(by_id) == {job.id for job in jobs}
    for job in jobs[:2]:
        item = by_id[job.id]
        assert item.attempt is not None and item.first is not None
        assert item.job.state is JobState.RUNNING
        stored = await store.jobs.list_attempts(job.id)
        assert [(a.provider, a.worker, a.state) for a in stored] == [
            ("a", "w1", AttemptState.STARTED)
        ]
        kinds = [e.kind for e in await store.jobs.list_events(job.id)]
        assert kinds == ["job.queued", "provider.skipped", "attempt.started"]
    untouched = by_id[jobs[2].id]
    assert untouched.attempt is None and untouched.job.state is JobState.QUEUED
    assert await store.jobs.list_attempts(jobs[2].id) == []


async def claim_round_trips(store: SqlStore, jobs: int, key: str) -> tuple[int, list[Claimed]]:
    for i in range(jobs):
        await submit(store, f"{key}{i}")

    async def first(_: Job) -> AttemptStart:
        return start_on("a")

    before = store.connector.stats.round_trips
    claimed = await claim_runnable(store.jobs, "w1", 60.0, 100, first, ignore)
    return store.connector.stats.round_trips - before, claimed


async def test_a_claim_costs_the_same_round_trips_for_one_job_as_for_twenty(
    store: SqlStore,
) -> None:
    """The first attempts of a claim's jobs start in a few statements, not three per job; and
    each job still gets its own attempt, version and gapless events."""
    one, _ = await claim_round_trips(store, 1, "one-")
    twenty, claimed = await claim_round_trips(store, 20, "twenty-")
    assert one == twenty
    assert len(claimed) == 20
    for item in claimed:
        assert item.attempt is not None and item.attempt.job_id == item.job.id
        assert item.attempt.seq == 1
        assert (item.job.state, item.job.version) == (JobState.RUNNING, 2)
        stored = await store.jobs.get_job(item.job.id)
        assert stored is not None and stored.version == 2
        events = await store.jobs.list_events(item.job.id)
        assert [(e.seq, e.kind) for e in events] == [
            (1, "job.queued"),
            (2, "provider.skipped"),
            (3, "attempt.started"),
        ]
        assert events[2].data["attempt_id"] == item.attempt.id
        assert {e.job_state for e in events[1:]} == {JobState.RUNNING}


async def test_a_claimed_job_is_not_runnable_and_an_expired_claim_is(store: SqlStore) -> None:
    job = await submit(store, "k1")

    async def none(_: Job) -> AttemptStart | None:
        return None

    held = await claim_runnable(store.jobs, "w1", 60.0, 10, none, ignore)
    assert [c.job.id for c in held] == [job.id]
    assert await claim_runnable(store.jobs, "w2", 60.0, 10, none, ignore) == []
    await store.jobs.release(job.id, "w1")
    gone = await claim_runnable(store.jobs, "w1", -1.0, 10, none, ignore)  # expired at once
    assert [c.job.id for c in gone] == [job.id]
    taken = await claim_runnable(store.jobs, "w2", 60.0, 10, none, ignore)
    assert [(c.job.id, c.job.state) for c in taken] == [(job.id, JobState.QUEUED)]


async def test_a_failed_claim_starts_nothing_and_hands_nothing_over(store: SqlStore) -> None:
    job = await submit(store, "k1")
    handed: list[list[Claimed]] = []

    async def broken(_: Job) -> AttemptStart | None:
        raise RuntimeError("the chooser failed")

    with pytest.raises(RuntimeError):
        await claim_runnable(store.jobs, "w1", 60.0, 10, broken, handed.append)
    assert handed == []
    assert await store.jobs.list_attempts(job.id) == []
    again = await store.jobs.get_job(job.id)
    assert again is not None and again.state is JobState.QUEUED


async def test_two_workers_claiming_together_never_take_the_same_job(db_url: str) -> None:
    """Two stores (two processes' pools) claim and start at once: every job is taken by
    exactly one of them, with exactly one first attempt (PostgreSQL: SKIP LOCKED; SQLite:
    its write lock)."""
    first_store, second_store = await open_store(db_url), await open_store(db_url)
    try:
        jobs = [await submit(first_store, f"k{i}") for i in range(20)]

        def chooser(worker: str) -> FirstAttempt:
            async def first(_: Job) -> AttemptStart | None:
                return start_on("a", worker)

            return first

        got = await asyncio.gather(
            *(
                claim_runnable(store.jobs, worker, 60.0, 5, chooser(worker), ignore)
                for _ in range(4)
                for store, worker in ((first_store, "w1"), (second_store, "w2"))
            )
        )
        taken = [item.job.id for batch in got for item in batch]
        assert len(taken) == len(set(taken)) == len(jobs)
        for job in jobs:
            attempts = await first_store.jobs.list_attempts(job.id)
            assert len(attempts) == 1 and attempts[0].state is AttemptState.STARTED
    finally:
        await first_store.close()
        await second_store.close()


class HandoffRecorder:
    """A port for the store's hand-over (router/store/handoff.py), as the engine is one."""

    def __init__(self) -> None:
        self.handed: list[tuple[str, str | None]] = []

    def committed(self, job: Job, attempt: Attempt | None) -> None:
        self.handed.append((job.id, attempt.id if attempt else None))


async def test_a_claim_hands_each_job_over_once_committed_and_a_failed_one_nothing(
    store: SqlStore,
) -> None:
    """The engine's port hears of every job a claim took, with its first attempt, after the
    COMMIT only; a claim whose body fails hands nothing over; a job created unclaimed is not
    this process's to drive. Mutants: the claim's `tx.after_commit` hand-over dropped (nothing
    handed), its jobs handed without their attempts, and `create_and_start` handing over an
    unclaimed job: each seen failing here."""
    port = HandoffRecorder()
    store.jobs.hand_over_to(port)
    jobs = [await submit(store, f"k{i}") for i in range(2)]
    with pytest.raises(RuntimeError, match="the engine failed"):
        async with store.jobs.claiming("w1", 60.0) as claim:
            await claim.take(10)
            raise RuntimeError("the engine failed")
    assert port.handed == []
    start = start_on("a")
    async with store.jobs.claiming("w1", 60.0) as claim:
        taken = await claim.take(10)
        claimed = await claim.start({jobs[0].id: start})
        assert port.handed == []  # not before the COMMIT
    assert {job.id for job in taken} == {job.id for job in jobs}
    assert sorted(port.handed, key=str) == sorted(
        [(jobs[0].id, start.id), (jobs[1].id, None)], key=str
    )
    assert [c.attempt.id for c in claimed if c.attempt] == [start.id]
