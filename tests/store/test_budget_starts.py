"""Every start path charges its attempt's budget reservation in the transaction that writes the
attempt row, on every backend: `start_attempt` (a job's driver), `create_and_start` (a job
started as it is created) and the batched first attempts of `claim_runnable`. A reservation a
budget refuses starts nothing and charges nothing: the driver's start raises BudgetCrossed;
the two shortcuts leave the job queued for its driver (which meets the refusal itself)."""

from __future__ import annotations

from typing import Any

import pytest

from jobrouter.errors import BudgetCrossed
from jobrouter.models import Attempt, Job
from jobrouter.states import JobState
from jobrouter.store import SqlStore
from jobrouter.store.spend import Hold, Reservation
from jobrouter.store.starts import AttemptStart
from tests.store.test_claim_runnable import ignore, submit
from tests.support.claiming import claim_runnable

DAY = 1_764_720_000.0  # a period's start (00:00 UTC)
CAP = Hold("shop1_daily", DAY, 1.0, None)
WORST = Reservation((CAP,), 0.4, 300)  # two fit under the $1 cap, a third does not


def start(reservation: Reservation | None = WORST) -> AttemptStart:
    return AttemptStart("a", "m", "w1", 30.0, (), reservation)


async def holds(store: SqlStore) -> list[dict[str, Any]]:
    return await store.connector.fetchall(
        "SELECT attempt_id, budget, usd, tokens FROM budget_holds ORDER BY attempt_id", {}
    )


async def job_row(store: SqlStore, job_id: str) -> dict[str, Any]:
    row = await store.connector.fetchone(
        "SELECT state, claimed_by FROM jobs WHERE id = :id", {"id": job_id}
    )
    assert row is not None
    return row


async def charged(store: SqlStore) -> tuple[float, int]:
    periods = [p for p in await store.spend.periods() if p.budget == CAP.budget]
    return (periods[0].charged_usd, periods[0].charged_tokens) if periods else (0.0, 0)


async def drive_start(store: SqlStore, job: Job) -> Attempt:
    _, attempt = await store.jobs.start_attempt(
        job.id, provider="a", model="m", worker="w1", lease_s=30.0, exclusive=False,
        reservation=WORST,
    )  # fmt: skip
    return attempt


async def create(store: SqlStore, key: str) -> tuple[Job, Attempt | None]:
    return await store.jobs.create_and_start(
        owner="shop-1",
        idempotency_key=key,
        task="caption",
        input={"n": key},
        params={},
        deadline_s=60.0,
        claimed_by="w1",
        claim_s=60.0,
        first=start(),
    )


async def test_a_drivers_start_charges_with_its_attempt_or_raises(store: SqlStore) -> None:
    """Two starts fit and each holds its worst case under its attempt's id; the third raises
    BudgetCrossed naming the budget, side, cap and charge, and writes no attempt. Mutants
    killed: `start_attempt_in` not charging `start.reservation` (nothing held, the third
    starts); `reserve_or_raise` not raising on a crossing (the third starts uncharged)."""
    jobs = [await submit(store, f"k{i}") for i in range(3)]
    first, second = [await drive_start(store, job) for job in jobs[:2]]
    with pytest.raises(BudgetCrossed) as refused:
        await drive_start(store, jobs[2])
    error = refused.value
    assert (error.budget, error.side, error.limit) == ("shop1_daily", "usd", 1.0)
    assert error.charged == pytest.approx(0.8)
    assert await store.jobs.list_attempts(jobs[2].id) == []
    assert (await job_row(store, jobs[2].id))["state"] == JobState.QUEUED
    assert sorted(h["attempt_id"] for h in await holds(store)) == sorted([first.id, second.id])
    assert await charged(store) == (pytest.approx(0.8), 600)


async def test_create_and_start_charges_or_creates_the_job_queued(store: SqlStore) -> None:
    """A job started as it is created holds its worst case; one the budget refuses is created
    queued, without an attempt, and charges nothing. Mutant killed: `_charged` not charging
    (True without a charge: the third job starts running with nothing held)."""
    made = [await create(store, f"k{i}") for i in range(3)]
    for job, attempt in made[:2]:
        assert job.state is JobState.RUNNING and attempt is not None
    refused_job, refused_attempt = made[2]
    assert refused_job.created and refused_job.state is JobState.QUEUED
    assert refused_attempt is None and await store.jobs.list_attempts(refused_job.id) == []
    held = sorted(h["attempt_id"] for h in await holds(store))
    assert held == sorted(a.id for _, a in made[:2] if a is not None)
    assert await charged(store) == (pytest.approx(0.8), 600)


async def test_create_and_start_of_a_found_job_charges_nothing(store: SqlStore) -> None:
    """The key's job exists: no attempt, and the charge made before the insert is taken back.
    Mutant killed: `take_back_in` skipped in `_insert_started` (a replay charges $0.40)."""
    await create(store, "k1")
    job, attempt = await create(store, "k1")
    assert not job.created and attempt is None
    assert len(await holds(store)) == 1
    assert await charged(store) == (pytest.approx(0.4), 300)


async def test_a_claim_starts_only_the_jobs_the_budget_holds(store: SqlStore) -> None:
    """Three queued jobs claimed at once, room for two: two start, each holding its worst
    case; the third stays queued and claimed, for its driver. Mutant killed: `_reserve` in
    starts.py keeping a start its budget refused (three start, $0.80 charged for three)."""
    jobs = [await submit(store, f"k{i}") for i in range(3)]

    async def first(job: Job) -> AttemptStart:
        return start()

    claimed = await claim_runnable(store.jobs, "w1", 60.0, 10, first, ignore)
    started = [c for c in claimed if c.attempt is not None]
    waiting = [c for c in claimed if c.attempt is None]
    assert len(started) == 2 and len(waiting) == 1
    assert waiting[0].job.state is JobState.QUEUED
    left = await job_row(store, waiting[0].job.id)
    assert (left["state"], left["claimed_by"]) == (JobState.QUEUED, "w1")
    held = sorted(h["attempt_id"] for h in await holds(store))
    assert held == sorted(c.attempt.id for c in started if c.attempt is not None)
    assert await charged(store) == (pytest.approx(0.8), 600)
    assert {c.job.id for c in claimed} == {job.id for job in jobs}


async def test_a_start_without_a_reservation_charges_nothing(store: SqlStore) -> None:
    """No budget covers it (reservation None): every path starts it and the ledger is empty."""
    job = await submit(store, "k0")
    await store.jobs.start_attempt(
        job.id, provider="a", model="m", worker="w1", lease_s=30.0, exclusive=False
    )
    created, attempt = await store.jobs.create_and_start(
        owner="shop-1", idempotency_key="k1", task="caption", input={}, params={},
        deadline_s=60.0, claimed_by="w1", claim_s=60.0, first=start(None),
    )  # fmt: skip
    assert attempt is not None and created.state is JobState.RUNNING
    assert await holds(store) == [] and await store.spend.periods() == []
