"""`SqlStore` against a real database: idempotent submit (I1), the compare-and-swap finish
(I2), exclusive attempts (I4), terminal jobs (I6), leases (I7) and the outbox (I8)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jobrouter.errors import IdempotencyConflict, InvalidTransition
from jobrouter.models import Attempt, AttemptUsage, Job
from jobrouter.states import AttemptState, JobState
from jobrouter.store import SqlStore, open_store
from tests.support.store_jobs import count_jobs, create_job

NO_USAGE = AttemptUsage()


async def submit(
    store: SqlStore,
    *,
    owner: str = "shop-1",
    key: str = "order-42",
    task: str = "caption",
    input: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> Job:
    return await create_job(
        store,
        owner=owner,
        idempotency_key=key,
        task=task,
        input={"product": "tea"} if input is None else input,
        params={} if params is None else params,
        deadline_s=None,
        claimed_by=None,
        claim_s=60.0,
    )


async def start(
    store: SqlStore,
    job: Job,
    provider: str = "a",
    *,
    exclusive: bool = False,
    lease_s: float = 30.0,
) -> Attempt:
    _, attempt = await store.jobs.start_attempt(
        job.id, provider=provider, model=None, worker="w1", lease_s=lease_s, exclusive=exclusive
    )
    return attempt


async def job_of(store: SqlStore, job_id: str) -> Job:
    job = await store.jobs.get_job(job_id)
    assert job is not None
    return job


async def attempt_of(store: SqlStore, attempt_id: str) -> Attempt:
    attempt = await store.jobs.get_attempt(attempt_id)
    assert attempt is not None
    return attempt


async def outbox_counts(store: SqlStore) -> dict[str, int]:
    rows = await store.connector.fetchall(
        "SELECT job_id, COUNT(*) AS n FROM outbox GROUP BY job_id", {}
    )
    return {row["job_id"]: int(row["n"]) for row in rows}


# ---- I1: idempotent submit --------------------------------------------------------------------


async def test_double_click_fifty_concurrent_submits_make_one_job(store: SqlStore) -> None:
    jobs = await asyncio.gather(*(submit(store) for _ in range(50)))
    assert len({job.id for job in jobs}) == 1
    assert sum(job.created for job in jobs) == 1
    assert await count_jobs(store) == 1
    found = await store.jobs.find_job("shop-1", "order-42")
    assert found is not None and found.id == jobs[0].id
    assert [e.kind for e in await store.jobs.list_events(found.id)] == ["job.queued"]


async def test_double_click_across_two_connections_makes_one_job(db_url: str) -> None:
    first = await open_store(db_url)
    second = await open_store(db_url)
    try:
        jobs = await asyncio.gather(*(submit(first if i % 2 else second) for i in range(50)))
        assert len({job.id for job in jobs}) == 1
        assert sum(job.created for job in jobs) == 1
        assert await count_jobs(first) == 1
        assert await count_jobs(second) == 1
    finally:
        await first.close()
        await second.close()


async def test_same_key_same_payload_returns_the_same_job(store: SqlStore) -> None:
    job = await submit(store, input={"b": 1, "a": [1, 2]})
    again = await submit(store, input={"a": [1, 2], "b": 1})  # key order does not matter
    assert job.created and not again.created
    assert again.id == job.id
    assert again.model_dump() == job.model_dump()


@pytest.mark.parametrize(
    "change",
    [
        {"input": {"product": "coffee"}},
        {"params": {"temperature": 0.5}},
        {"task": "summary"},
    ],
    ids=["input", "params", "task"],
)
async def test_same_key_different_payload_is_refused(
    store: SqlStore, change: dict[str, Any]
) -> None:
    job = await submit(store)
    before = await job_of(store, job.id)
    with pytest.raises(IdempotencyConflict) as info:
        await submit(store, **change)
    assert info.value.idempotency_key == "order-42"
    assert info.value.owner == "shop-1"
    assert info.value.job_id == job.id
    assert "order-42" in str(info.value) and job.id in str(info.value)
    assert (await job_of(store, job.id)).model_dump() == before.model_dump()
    assert await count_jobs(store) == 1
    assert len(await store.jobs.list_events(job.id)) == 1


async def test_same_key_under_another_owner_is_another_job(store: SqlStore) -> None:
    mine = await submit(store, owner="shop-1")
    theirs = await submit(store, owner="shop-2", input={"product": "something else"})
    assert theirs.created
    assert theirs.id != mine.id
    assert await count_jobs(store) == 2


# ---- I2: the compare-and-swap finish ------------------------------------------------------------


async def test_reverse_order_finish_first_finisher_wins_the_other_is_lost(
    store: SqlStore,
) -> None:
    job = await submit(store)
    assert job.version == 1 and job.state is JobState.QUEUED
    first = await start(store, job, "a")
    assert (await job_of(store, job.id)).version == 2  # queued -> running
    second = await start(store, job, "b")
    assert (await job_of(store, job.id)).version == 2  # already running: no job change

    won = await store.jobs.finish_attempt_cas(second.id, {"text": "from b"}, NO_USAGE)
    assert won.won
    assert won.attempt.state is AttemptState.SUCCEEDED
    assert won.job.version == 3

    late = await store.jobs.finish_attempt_cas(first.id, {"text": "from a"}, NO_USAGE)
    assert not late.won
    assert late.attempt.state is AttemptState.LOST

    stored_first = await attempt_of(store, first.id)
    assert stored_first.state is AttemptState.LOST
    assert stored_first.output is None  # the loser's payload is discarded
    assert stored_first.finished_at is not None
    stored_second = await attempt_of(store, second.id)
    assert stored_second.state is AttemptState.SUCCEEDED
    assert stored_second.output == {"text": "from b"}

    final = await job_of(store, job.id)
    assert final.state is JobState.SUCCEEDED
    assert final.result == {"text": "from b"}
    assert final.winner_attempt_id == second.id
    assert final.version == 3  # the lost finish changed nothing on the job
    kinds = [e.kind for e in await store.jobs.list_events(job.id)]
    assert kinds.count("job.succeeded") == 1
    assert kinds.count("attempt.lost") == 1
    assert (await outbox_counts(store)) == {job.id: 1}


async def test_concurrent_finishes_have_exactly_one_winner(store: SqlStore) -> None:
    job = await submit(store)
    attempts = [await start(store, job, f"p{i}") for i in range(8)]
    outcomes = await asyncio.gather(
        *(store.jobs.finish_attempt_cas(a.id, {"n": i}, NO_USAGE) for i, a in enumerate(attempts))
    )
    winners = [o for o in outcomes if o.won]
    assert len(winners) == 1
    final = await job_of(store, job.id)
    assert final.winner_attempt_id == winners[0].attempt.id
    assert final.result == winners[0].attempt.output
    states = [a.state for a in await store.jobs.list_attempts(job.id)]
    assert states.count(AttemptState.SUCCEEDED) == 1
    assert states.count(AttemptState.LOST) == 7


async def test_unknown_attempt_that_answers_late_can_still_win(store: SqlStore) -> None:
    job = await submit(store)
    first = await start(store, job, "a")
    await store.jobs.finish_attempt(
        first.id, AttemptState.UNKNOWN, error_kind="unknown", error="timeout", usage=NO_USAGE
    )
    outcome = await store.jobs.finish_attempt_cas(first.id, {"text": "late"}, NO_USAGE)
    assert outcome.won
    assert (await job_of(store, job.id)).result == {"text": "late"}


# ---- I4: exclusive attempts -------------------------------------------------------------------


async def test_exclusive_start_refused_while_an_attempt_is_started(store: SqlStore) -> None:
    job = await submit(store)
    first = await start(store, job, "a", exclusive=True)
    with pytest.raises(InvalidTransition) as info:
        await start(store, job, "b", exclusive=True)
    assert first.id in str(info.value)
    assert len(await store.jobs.list_attempts(job.id)) == 1


async def test_exclusive_start_refused_while_an_attempt_is_unknown(store: SqlStore) -> None:
    job = await submit(store)
    first = await start(store, job, "a", exclusive=True)
    await store.jobs.finish_attempt(
        first.id, AttemptState.UNKNOWN, error_kind="unknown", error="timeout", usage=NO_USAGE
    )
    with pytest.raises(InvalidTransition):
        await start(store, job, "b", exclusive=True)
    assert len(await store.jobs.list_attempts(job.id)) == 1


async def test_exclusive_start_allowed_after_resolve_failed(store: SqlStore) -> None:
    job = await submit(store)
    first = await start(store, job, "a", exclusive=True)
    await store.jobs.finish_attempt(
        first.id, AttemptState.UNKNOWN, error_kind="unknown", error="timeout", usage=NO_USAGE
    )
    _, resolved = await store.jobs.resolve_attempt(first.id, AttemptState.FAILED, None, "checked")
    assert resolved.state is AttemptState.FAILED
    assert resolved.error_kind == "resolved"
    second = await start(store, job, "b", exclusive=True)
    assert second.seq == 2 and second.state is AttemptState.STARTED


async def test_exclusive_start_allowed_after_resolve_cancelled(store: SqlStore) -> None:
    job = await submit(store)
    first = await start(store, job, "a", exclusive=True)
    await store.jobs.finish_attempt(
        first.id, AttemptState.UNKNOWN, error_kind="unknown", error="timeout", usage=NO_USAGE
    )
    await store.jobs.resolve_attempt(first.id, AttemptState.CANCELLED, None, "checked")
    second = await start(store, job, "b", exclusive=True)
    assert second.state is AttemptState.STARTED


async def test_exclusive_start_allowed_after_a_started_attempt_is_cancelled(
    store: SqlStore,
) -> None:
    job = await submit(store)
    first = await start(store, job, "a", exclusive=True)
    await store.jobs.finish_attempt(
        first.id, AttemptState.CANCELLED, error_kind="cancelled", error="stopped", usage=NO_USAGE
    )
    second = await start(store, job, "b", exclusive=True)
    assert second.state is AttemptState.STARTED


async def test_non_exclusive_start_beside_an_open_attempt_is_allowed(store: SqlStore) -> None:
    job = await submit(store)
    await start(store, job, "a", exclusive=False)
    await start(store, job, "b", exclusive=False)
    assert [a.state for a in await store.jobs.list_attempts(job.id)] == [AttemptState.STARTED] * 2


# ---- cancel -----------------------------------------------------------------------------------


async def test_cancel_job_cancels_open_attempts_and_emits_one_outbox_row(
    store: SqlStore,
) -> None:
    job = await submit(store)
    running = await start(store, job, "a")
    unknown = await start(store, job, "b")
    failed = await start(store, job, "c")
    await store.jobs.finish_attempt(
        unknown.id, AttemptState.UNKNOWN, error_kind="unknown", error="timeout", usage=NO_USAGE
    )
    await store.jobs.finish_attempt(
        failed.id, AttemptState.FAILED, error_kind="rejected", error="HTTP 400", usage=NO_USAGE
    )
    cancelled = await store.jobs.cancel_job(job.id, "owner changed their mind")
    assert cancelled.state is JobState.CANCELLED
    assert cancelled.error == "owner changed their mind"
    states = {a.id: a.state for a in await store.jobs.list_attempts(job.id)}
    assert states == {
        running.id: AttemptState.CANCELLED,
        unknown.id: AttemptState.UNKNOWN,  # it may have happened: never rewritten (issue 14)
        failed.id: AttemptState.FAILED,  # already terminal: untouched
    }
    assert (await attempt_of(store, unknown.id)).error == "timeout"
    [cancelled_event] = [
        e for e in await store.jobs.list_events(job.id) if e.kind == "job.cancelled"
    ]
    assert cancelled_event.data["unknown_attempts"] == [unknown.id]
    assert await outbox_counts(store) == {job.id: 1}

    # A late answer of a cancelled attempt changes nothing.
    events_before = await store.jobs.list_events(job.id)
    late = await store.jobs.finish_attempt_cas(running.id, {"text": "late"}, NO_USAGE)
    assert not late.won
    assert (await attempt_of(store, running.id)).state is AttemptState.CANCELLED
    assert (await attempt_of(store, running.id)).output is None
    assert (await job_of(store, job.id)).model_dump() == cancelled.model_dump()
    assert await store.jobs.list_events(job.id) == events_before

    # Cancelling twice is a no-op.
    again = await store.jobs.cancel_job(job.id, "again")
    assert again.model_dump() == cancelled.model_dump()
    assert await store.jobs.list_events(job.id) == events_before
    assert await outbox_counts(store) == {job.id: 1}


async def test_cancel_a_succeeded_job_is_refused(store: SqlStore) -> None:
    job = await submit(store)
    attempt = await start(store, job)
    await store.jobs.finish_attempt_cas(attempt.id, {"text": "done"}, NO_USAGE)
    before = await job_of(store, job.id)
    with pytest.raises(InvalidTransition):
        await store.jobs.cancel_job(job.id, "too late")
    assert (await job_of(store, job.id)).model_dump() == before.model_dump()
    assert await outbox_counts(store) == {job.id: 1}


async def test_a_terminal_job_never_changes_state_again(store: SqlStore) -> None:
    job = await submit(store)
    attempt = await start(store, job)
    await store.jobs.settle_job(job.id, JobState.FAILED, error="nothing worked")
    before = await job_of(store, job.id)
    for state in (JobState.RUNNING, JobState.UNKNOWN, JobState.SUCCEEDED):
        with pytest.raises(InvalidTransition):
            await store.jobs.settle_job(job.id, state, error=None)
    with pytest.raises(InvalidTransition):
        await start(store, job, "b")
    outcome = await store.jobs.finish_attempt_cas(attempt.id, {"text": "late"}, NO_USAGE)
    assert not outcome.won
    assert outcome.attempt.state is AttemptState.LOST
    after = await job_of(store, job.id)
    assert after.model_dump() == before.model_dump()
    assert after.result is None


# ---- events -----------------------------------------------------------------------------------


async def test_event_seq_is_gapless_per_job(store: SqlStore) -> None:
    one = await submit(store, key="one")
    two = await submit(store, key="two")
    a1 = await start(store, one, "a")
    a2 = await start(store, two, "a")
    await store.jobs.finish_attempt(
        a1.id, AttemptState.FAILED, error_kind="rejected", error="x", usage=NO_USAGE
    )
    b1 = await start(store, one, "b")
    await store.jobs.finish_attempt_cas(a2.id, {"text": "two"}, NO_USAGE)
    await store.jobs.finish_attempt_cas(b1.id, {"text": "one"}, NO_USAGE)
    for job in (one, two):
        events = await store.jobs.list_events(job.id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert all(e.job_id == job.id for e in events)
        assert events[0].kind == "job.queued"
        assert events[-1].kind == "job.succeeded"
        for k in range(len(events) + 1):
            rest = await store.jobs.list_events(job.id, after=k)
            assert rest == events[k:]
    assert len(await store.jobs.list_events(one.id)) > len(await store.jobs.list_events(two.id))


# ---- I8: the outbox ---------------------------------------------------------------------------


async def test_every_terminal_job_has_exactly_one_outbox_row(store: SqlStore) -> None:
    succeeded = await submit(store, key="s")
    attempt = await start(store, succeeded)
    await store.jobs.finish_attempt_cas(attempt.id, {"text": "ok"}, NO_USAGE)
    with pytest.raises(InvalidTransition):
        await start(store, succeeded, "b")

    failed = await submit(store, key="f")
    await start(store, failed)
    await store.jobs.settle_job(failed.id, JobState.FAILED, error="no")
    await store.jobs.settle_job(failed.id, JobState.FAILED, error="no")  # repeat: no-op

    cancelled = await submit(store, key="c")
    await store.jobs.cancel_job(cancelled.id, "stop")
    await store.jobs.cancel_job(cancelled.id, "stop")

    queued_then_failed = await submit(store, key="qf")
    await store.jobs.settle_job(queued_then_failed.id, JobState.FAILED, error="no provider")

    unknown = await submit(store, key="u")
    u_attempt = await start(store, unknown)
    await store.jobs.finish_attempt(
        u_attempt.id, AttemptState.UNKNOWN, error_kind="unknown", error="timeout", usage=NO_USAGE
    )
    await store.jobs.settle_job(unknown.id, JobState.UNKNOWN, error="needs a person")

    running = await submit(store, key="r")
    await start(store, running)
    queued = await submit(store, key="q")

    counts = await outbox_counts(store)
    assert counts == {succeeded.id: 1, failed.id: 1, cancelled.id: 1, queued_then_failed.id: 1}
    assert unknown.id not in counts and running.id not in counts and queued.id not in counts

    rows = await store.connector.fetchall("SELECT job_id, kind, owner FROM outbox", {})
    kinds = {row["job_id"]: row["kind"] for row in rows}
    assert kinds[succeeded.id] == "job.succeeded"
    assert kinds[failed.id] == "job.failed"
    assert kinds[cancelled.id] == "job.cancelled"
    assert all(row["owner"] == "shop-1" for row in rows)

    # An unknown job that is later resolved and succeeds gets its single row then.
    await store.jobs.resolve_attempt(
        u_attempt.id, AttemptState.SUCCEEDED, {"text": "it ran"}, "seen"
    )
    assert (await outbox_counts(store))[unknown.id] == 1
    assert (await job_of(store, unknown.id)).state is JobState.SUCCEEDED


# ---- I7: restart and leases -------------------------------------------------------------------


async def test_everything_survives_a_restart(db_url: str) -> None:
    store = await open_store(db_url)
    done = await submit(store, key="done")
    a = await start(store, done, "a")
    await store.jobs.finish_attempt(
        a.id,
        AttemptState.FAILED,
        error_kind="rejected",
        error="HTTP 500",
        usage=AttemptUsage(latency_ms=12.5),
    )
    b = await start(store, done, "b")
    await store.jobs.finish_attempt_cas(
        b.id,
        {"text": "é ✓"},
        AttemptUsage(
            latency_ms=3.0, prompt_tokens=10, completion_tokens=5, cost_usd=0.001, model="m"
        ),
    )
    pending = await submit(store, key="pending", params={"tone": "warm"})
    await start(store, pending, "a")
    before = {
        job.id: (
            await job_of(store, job.id),
            await store.jobs.list_attempts(job.id),
            await store.jobs.list_events(job.id),
        )
        for job in (done, pending)
    }
    await store.close()

    reopened = await open_store(db_url)
    try:
        assert await count_jobs(reopened) == 2
        for job_id, (job, attempts, events) in before.items():
            assert (await job_of(reopened, job_id)).model_dump() == job.model_dump()
            assert await reopened.jobs.list_attempts(job_id) == attempts
            assert await reopened.jobs.list_events(job_id) == events
        assert (await job_of(reopened, done.id)).result == {"text": "é ✓"}
        again = await submit(reopened, key="done")  # the key is still taken after a restart
        assert again.id == done.id and not again.created
    finally:
        await reopened.close()


async def test_expired_lease_makes_an_attempt_unknown(store: SqlStore) -> None:
    job = await submit(store)
    stale = await start(store, job, "a", lease_s=0.01)
    fresh = await start(store, job, "b", lease_s=60)
    await asyncio.sleep(0.05)
    expired = await store.jobs.expire_attempts()
    assert [a.id for a in expired] == [stale.id]
    stored = await attempt_of(store, stale.id)
    assert stored.state is AttemptState.UNKNOWN  # I3/I7: unknown, never failed
    assert stored.error_kind == "unknown"
    assert stored.lease_until is None
    assert (await attempt_of(store, fresh.id)).state is AttemptState.STARTED
    assert (await job_of(store, job.id)).state is JobState.RUNNING

    events = await store.jobs.list_events(job.id)
    assert await store.jobs.expire_attempts() == []  # twice is harmless
    assert await attempt_of(store, stale.id) == stored
    assert await store.jobs.list_events(job.id) == events


async def test_finish_attempt_keeps_the_first_record(store: SqlStore) -> None:
    job = await submit(store)
    attempt = await start(store, job)
    first = await store.jobs.finish_attempt(
        attempt.id, AttemptState.FAILED, error_kind="rejected", error="HTTP 400", usage=NO_USAGE
    )
    second = await store.jobs.finish_attempt(
        attempt.id, AttemptState.UNKNOWN, error_kind="unknown", error="timeout", usage=NO_USAGE
    )
    assert second == first
    assert (await attempt_of(store, attempt.id)).state is AttemptState.FAILED


async def test_finish_attempt_refuses_succeeded(store: SqlStore) -> None:
    job = await submit(store)
    attempt = await start(store, job)
    with pytest.raises(ValueError, match="finish_attempt_cas"):
        await store.jobs.finish_attempt(
            attempt.id, AttemptState.SUCCEEDED, error_kind=None, error=None, usage=NO_USAGE
        )
