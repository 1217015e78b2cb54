"""The outbox and retention in the store, on every backend: claims keep two processes off one
event, the retry state lives in the row, dead letters and replay, and purge in batches keeps
what must be kept (not terminal, or completion still owed to a configured webhook) and drops
parked events of owners without a webhook with their jobs."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from jobrouter.retention import plan_purge, purge
from jobrouter.states import JobState
from jobrouter.store import SqlStore, open_store
from jobrouter.store.outbox_rows import claim_params
from tests.support.outbox_jobs import DAY_S, age_jobs, count, event_of, job_in

OWNERS = ["shop"]


async def test_a_terminal_job_has_one_due_unclaimed_event(store: SqlStore) -> None:
    job = await job_in(store, JobState.SUCCEEDED, key="k1")
    event = await event_of(store, job)
    assert (event.kind, event.owner, event.tries, event.claimed_by) == (
        "job.succeeded",
        "shop",
        0,
        None,
    )
    assert event.delivered_at is None and event.next_attempt_at is not None
    assert event.next_attempt_at <= time.time()


async def test_a_claimed_event_is_nobody_elses_until_the_claim_expires(
    store: SqlStore, db_url: str
) -> None:
    job = await job_in(store, JobState.SUCCEEDED, key="k1")
    other = await open_store(db_url)  # another process on the same database
    try:
        [mine] = await store.outbox.claim_outbox(OWNERS, "w1", claim_s=0.3, limit=10)
        assert mine.job_id == job.id and mine.claimed_by == "w1"
        assert await other.outbox.claim_outbox(OWNERS, "w2", claim_s=0.3, limit=10) == []
        await asyncio.sleep(0.4)  # w1 died mid-send: its claim runs out
        [taken] = await other.outbox.claim_outbox(OWNERS, "w2", claim_s=5, limit=10)
        assert (taken.id, taken.claimed_by) == (mine.id, "w2")
        assert not await store.outbox.outbox_retry(mine.id, "w1", error="late", next_attempt_at=0.0)
    finally:
        await other.close()


async def test_concurrent_claims_from_two_connections_are_disjoint(
    store: SqlStore, db_url: str
) -> None:
    for n in range(20):
        await job_in(store, JobState.CANCELLED, key=f"k{n}")
    other = await open_store(db_url)
    try:
        batches = await asyncio.gather(
            *(
                (store if n % 2 else other).outbox.claim_outbox(
                    OWNERS, f"w{n}", claim_s=30, limit=3
                )
                for n in range(10)
            )
        )
    finally:
        await other.close()
    ids = [event.id for batch in batches for event in batch]
    assert len(ids) == len(set(ids)) == 20


async def test_only_owners_with_a_webhook_are_claimed(store: SqlStore) -> None:
    """A claim is not a try: both events stay pending, neither retrying. Kills mutant
    `outbox.outbox_counts` 38 (no retrying counted as one)."""
    await job_in(store, JobState.SUCCEEDED, owner="shop", key="k1")
    parked = await job_in(store, JobState.SUCCEEDED, owner="nohook", key="k1")
    claimed = await store.outbox.claim_outbox(OWNERS, "w1", claim_s=30, limit=10)
    assert [event.owner for event in claimed] == ["shop"]
    assert await store.outbox.claim_outbox([], "w1", claim_s=30, limit=10) == []
    assert (await event_of(store, parked)).claimed_by is None
    depth = {d.owner: (d.pending, d.retrying) for d in (await store.outbox.outbox_counts()).pending}
    assert depth == {"shop": (1, 0), "nohook": (1, 0)}


async def test_a_failed_try_is_recorded_in_the_row_and_not_due_before_its_time(
    store: SqlStore,
) -> None:
    job = await job_in(store, JobState.FAILED, key="k1")
    [event] = await store.outbox.claim_outbox(OWNERS, "w1", claim_s=30, limit=10)
    later = time.time() + 60
    assert await store.outbox.outbox_retry(
        event.id, "w1", error="HTTP 500: no", next_attempt_at=later
    )
    row = await event_of(store, job)
    assert (row.tries, row.last_error, row.claimed_by) == (1, "HTTP 500: no", None)
    assert row.next_attempt_at == later
    assert await store.outbox.claim_outbox(OWNERS, "w2", claim_s=30, limit=10) == []
    counts = await store.outbox.outbox_counts()
    assert [(d.owner, d.pending, d.retrying) for d in counts.pending] == [("shop", 1, 1)]


async def test_claimed_events_come_oldest_due_first(store: SqlStore) -> None:
    """Kills mutant `claim_outbox` 25 (sorted by id alone: `next_attempt_at and 0.0`)."""
    await job_in(store, JobState.SUCCEEDED, key="k1")
    await job_in(store, JobState.FAILED, key="k2")
    first, second = sorted(
        await store.outbox.claim_outbox(OWNERS, "w1", claim_s=30, limit=10),
        key=lambda event: event.id,
    )
    now = time.time()
    assert await store.outbox.outbox_retry(
        first.id, "w1", error="HTTP 500", next_attempt_at=now - 1
    )
    assert await store.outbox.outbox_retry(
        second.id, "w1", error="HTTP 500", next_attempt_at=now - 60
    )
    claimed = await store.outbox.claim_outbox(OWNERS, "w1", claim_s=30, limit=10)
    assert [event.id for event in claimed] == [second.id, first.id]


def test_claim_params_are_none_without_an_owner_or_without_room() -> None:
    """Nothing to claim: no statement at all. Kills mutants `x_claim_params` 4 (`or` ->
    `and`), 6 (`limit < 0`) and 7 (`limit <= 1`)."""
    assert claim_params([], "w1", claim_s=30, limit=10) is None
    assert claim_params(["shop"], "w1", claim_s=30, limit=0) is None
    before = time.time()
    params = claim_params(["shop", "b", "shop"], "w1", claim_s=30, limit=1)
    assert params is not None
    assert (params["owners"], params["worker"], params["limit"]) == ('["b", "shop"]', "w1", 1)
    assert params["claim_until"] == params["now"] + 30 and params["now"] >= before


async def test_delivered_marks_the_row_once(store: SqlStore) -> None:
    job = await job_in(store, JobState.SUCCEEDED, key="k1")
    [event] = await store.outbox.claim_outbox(OWNERS, "w1", claim_s=30, limit=10)
    assert await store.outbox.outbox_delivered(event.id)
    assert not await store.outbox.outbox_delivered(event.id)
    row = await event_of(store, job)
    assert row.delivered_at is not None and row.tries == 1 and row.claimed_by is None
    assert (await store.outbox.outbox_counts()).pending == []


async def test_bury_moves_to_dead_letters_and_replay_brings_it_back(store: SqlStore) -> None:
    jobs = [await job_in(store, JobState.SUCCEEDED, key=f"k{n}") for n in range(3)]
    claimed = await store.outbox.claim_outbox(OWNERS, "w1", claim_s=30, limit=10)
    for event in claimed:
        assert await store.outbox.outbox_bury(event.id, "w1", error="HTTP 500: no")
    assert not await store.outbox.outbox_bury(claimed[0].id, "w1", error="twice")
    counts = await store.outbox.outbox_counts()
    assert counts.pending == [] and counts.dead == {"shop": 3}
    dead = await store.outbox.dead_letters()
    assert {d.id for d in dead} == {e.id for e in claimed}
    assert all(d.tries == 1 and d.last_error == "HTTP 500: no" for d in dead)

    assert await store.outbox.replay_dead(claimed[0].id)
    assert not await store.outbox.replay_dead(claimed[0].id)
    assert not await store.outbox.replay_dead("no-such-event")
    assert await store.outbox.replay_all_dead(batch=1) == 2
    assert (await store.outbox.outbox_counts()).dead == {}
    for job, event in zip(jobs, claimed, strict=True):
        back = await event_of(store, job)
        assert back.id == event.id  # the same event id: receivers still de-duplicate
        assert back.tries == 0 and back.delivered_at is None and back.claimed_by is None
        assert "replayed after 1 tries" in (back.last_error or "")
    assert len(await store.outbox.claim_outbox(OWNERS, "w2", claim_s=30, limit=10)) == 3


async def test_release_hands_claims_back(store: SqlStore) -> None:
    await job_in(store, JobState.SUCCEEDED, key="k1")
    await store.outbox.claim_outbox(OWNERS, "w1", claim_s=30, limit=10)
    assert await store.outbox.release_outbox_claims("w1") == 1
    assert len(await store.outbox.claim_outbox(OWNERS, "w2", claim_s=30, limit=10)) == 1


# ---- retention ---------------------------------------------------------------------------------


async def test_purge_in_batches_keeps_unfinished_and_undelivered_jobs(store: SqlStore) -> None:
    delivered = []
    for n in range(5):
        state = [JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED][n % 3]
        job = await job_in(store, state, key=f"done-{n}")
        assert await store.outbox.outbox_delivered((await event_of(store, job)).id)
        delivered.append(job)
    undelivered = await job_in(store, JobState.SUCCEEDED, key="undelivered")
    dead = await job_in(store, JobState.FAILED, key="dead")
    [dead_event] = [
        e
        for e in await store.outbox.claim_outbox(OWNERS, "w1", claim_s=30, limit=10)
        if e.job_id == dead.id
    ]
    await store.outbox.outbox_bury(dead_event.id, "w1", error="gone")
    await store.outbox.release_outbox_claims("w1")
    unfinished = [
        await job_in(store, state, key=f"open-{state}")
        for state in (JobState.QUEUED, JobState.RUNNING, JobState.UNKNOWN)
    ]
    await age_jobs(store, 30 * DAY_S)
    cutoff = time.time() - 7 * DAY_S

    assert await store.outbox.count_purgeable(cutoff, owners=OWNERS) == (5, 2, 0)
    progress: list[int] = []
    done = await purge(store.outbox, cutoff, owners=OWNERS, batch=2, progress=progress.append)
    assert done == (5, 0)
    assert progress == [2, 4, 5]

    for job in delivered:
        assert await store.jobs.get_job(job.id) is None
        for table in ("attempts", "job_events", "outbox"):
            assert await count(store, table, job.id) == 0, table
    for job in [undelivered, dead, *unfinished]:
        kept = await store.jobs.get_job(job.id)
        assert kept is not None and kept.state is job.state
        assert await count(store, "job_events", job.id) > 0
    assert await count(store, "outbox", undelivered.id) == 1
    assert await count(store, "outbox_dead", dead.id) == 1
    assert await store.outbox.count_purgeable(cutoff, owners=OWNERS) == (0, 2, 0)
    assert (await purge(store.outbox, cutoff, owners=OWNERS, batch=2)).jobs == 0


async def test_without_webhooks_old_terminal_jobs_are_purged_with_their_parked_events(
    store: SqlStore,
) -> None:
    finished = [
        await job_in(store, state, key=f"done-{state}")
        for state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
    ]
    dead = await job_in(store, JobState.FAILED, key="dead")  # a webhook existed once, and failed
    [dead_event] = [
        e
        for e in await store.outbox.claim_outbox(OWNERS, "w1", claim_s=30, limit=10)
        if e.job_id == dead.id
    ]
    assert await store.outbox.outbox_bury(dead_event.id, "w1", error="gone")
    await store.outbox.release_outbox_claims("w1")
    unfinished = [
        await job_in(store, state, key=f"open-{state}")
        for state in (JobState.QUEUED, JobState.RUNNING, JobState.UNKNOWN)
    ]
    await age_jobs(store, 30 * DAY_S)
    cutoff = time.time() - 7 * DAY_S

    kept = await plan_purge(store.outbox, cutoff, owners=[])  # parked events keep their jobs ...
    assert (kept.purgeable, kept.kept_undelivered, kept.parked) == (0, 4, 0)
    assert await purge(store.outbox, cutoff, owners=[]) == (0, 0)
    plan = await plan_purge(store.outbox, cutoff, owners=[], drop_parked=True)  # ... unless told
    assert (plan.purgeable, plan.kept_undelivered, plan.parked) == (3, 1, 3)
    assert await purge(store.outbox, cutoff, owners=[], batch=2, drop_parked=True) == (3, 3)

    for job in finished:
        assert await store.jobs.get_job(job.id) is None
        for table in ("attempts", "job_events", "outbox"):
            assert await count(store, table, job.id) == 0, table
    assert await store.jobs.get_job(dead.id) is not None  # a dead letter is always kept
    assert await count(store, "outbox_dead", dead.id) == 1
    for job in unfinished:
        kept = await store.jobs.get_job(job.id)
        assert kept is not None and kept.state is job.state
    assert await store.outbox.count_purgeable(cutoff, owners=[], drop_parked=True) == (0, 1, 0)
    assert await purge(store.outbox, cutoff, owners=[], drop_parked=True) == (0, 0)


async def test_an_undelivered_event_keeps_its_job_only_when_its_owner_has_a_webhook(
    store: SqlStore,
) -> None:
    with_hook = await job_in(store, JobState.SUCCEEDED, owner="a", key="k1")
    without = await job_in(store, JobState.SUCCEEDED, owner="b", key="k1")
    retrying = await job_in(store, JobState.CANCELLED, owner="a", key="k2")
    [event] = [
        e
        for e in await store.outbox.claim_outbox(["a"], "w1", claim_s=30, limit=10)
        if e.job_id == retrying.id
    ]
    assert await store.outbox.outbox_retry(event.id, "w1", error="HTTP 503", next_attempt_at=0.0)
    await store.outbox.release_outbox_claims("w1")
    await age_jobs(store, 30 * DAY_S)
    cutoff = time.time() - 7 * DAY_S

    assert await store.outbox.count_purgeable(cutoff, owners=["a"]) == (0, 3, 0)
    assert await store.outbox.count_purgeable(cutoff, owners=["a"], drop_parked=True) == (1, 2, 1)
    assert await purge(store.outbox, cutoff, owners=iter(["a"]), batch=1, drop_parked=True) == (
        1,
        1,
    )
    assert await store.jobs.get_job(without.id) is None
    assert await count(store, "outbox", without.id) == 0
    for job in (with_hook, retrying):
        assert await store.jobs.get_job(job.id) is not None
        assert await count(store, "outbox", job.id) == 1
    assert (await store.outbox.outbox_counts()).pending[0].owner == "a"

    # once A's events are delivered, their jobs go too (with the delivered rows)
    for job in (with_hook, retrying):
        assert await store.outbox.outbox_delivered((await event_of(store, job)).id)
    assert await purge(store.outbox, cutoff, owners=["a"]) == (2, 0)
    assert await count(store, "jobs") == 0 and await count(store, "outbox") == 0


async def test_a_tried_event_keeps_its_job_even_when_its_webhook_is_gone(
    store: SqlStore,
) -> None:
    """Issue 14: an event that has been tried is never dropped by a purge, whatever the config
    says now (`--drop-parked` included). Before, a purge run without the webhook's section (no
    config file: built-in defaults) deleted jobs whose events were still being retried."""
    retrying = await job_in(store, JobState.SUCCEEDED, owner="a", key="k1")
    claimed = await job_in(store, JobState.FAILED, owner="a", key="k2")
    events = {
        e.job_id: e for e in await store.outbox.claim_outbox(["a"], "w1", claim_s=30, limit=10)
    }
    assert await store.outbox.outbox_retry(
        events[retrying.id].id, "w1", error="HTTP 503", next_attempt_at=0.0
    )
    # the other stays claimed by w1 (a send in flight, not counted as tried yet)
    await age_jobs(store, 30 * DAY_S)
    cutoff = time.time() - 7 * DAY_S
    for drop_parked in (False, True):
        assert await store.outbox.count_purgeable(cutoff, owners=[], drop_parked=drop_parked) == (
            0,
            2,
            0,
        )
        assert await purge(store.outbox, cutoff, owners=[], drop_parked=drop_parked) == (0, 0)
    for job in (retrying, claimed):
        assert await store.jobs.get_job(job.id) is not None
        assert await count(store, "outbox", job.id) == 1


async def test_purge_keeps_jobs_finished_within_the_retention(store: SqlStore) -> None:
    job = await job_in(store, JobState.SUCCEEDED, key="k1")
    await store.outbox.outbox_delivered((await event_of(store, job)).id)
    await age_jobs(store, 6 * DAY_S)
    assert (await purge(store.outbox, time.time() - 7 * DAY_S, owners=OWNERS)).jobs == 0
    assert await store.jobs.get_job(job.id) is not None


async def test_a_key_submitted_again_after_its_job_was_purged_starts_a_new_job(
    store: SqlStore,
) -> None:
    old = await job_in(store, JobState.SUCCEEDED, key="order-42")
    await store.outbox.outbox_delivered((await event_of(store, old)).id)
    await age_jobs(store, 8 * DAY_S)
    assert (await purge(store.outbox, time.time() - 7 * DAY_S, owners=OWNERS)).jobs == 1
    assert await store.jobs.find_job("shop", "order-42") is None

    again = await job_in(store, JobState.QUEUED, key="order-42")
    assert again.created and again.id != old.id and again.state is JobState.QUEUED
    found = await store.jobs.find_job("shop", "order-42")
    assert found is not None and found.id == again.id


async def test_a_key_of_an_owner_without_a_webhook_starts_a_new_job_after_purge(
    store: SqlStore,
) -> None:
    old = await job_in(store, JobState.SUCCEEDED, owner="nohook", key="order-42")
    await age_jobs(store, 8 * DAY_S)
    assert await purge(store.outbox, time.time() - 7 * DAY_S, owners=OWNERS, drop_parked=True) == (
        1,
        1,
    )
    assert await store.jobs.find_job("nohook", "order-42") is None

    again = await job_in(store, JobState.QUEUED, owner="nohook", key="order-42")
    assert again.created and again.id != old.id
    found = await store.jobs.find_job("nohook", "order-42")
    assert found is not None and found.id == again.id


async def test_the_event_payload_is_the_documented_fields_of_the_settled_job(
    store: SqlStore,
) -> None:
    """What a webhook receiver reads as `data` (docs/operations.md): every field by its
    documented name, with the job's value as the terminal change left it. Kills mutants
    `transitions.write_outbox` 4, 8, 9, 12-15, 18, 19 (a key renamed)."""
    job = await job_in(store, JobState.FAILED, key="k1")
    event = await event_of(store, job)
    assert json.loads(event.payload) == {
        "event": "job.failed",
        "job_id": job.id,
        "owner": "shop",
        "idempotency_key": "k1",
        "task": "caption",
        "state": "failed",
        "result": None,
        "error": "test",
        "version": job.version,
    }


async def test_by_default_a_parked_event_keeps_its_job_and_one_owner_is_not_its_letters(
    store: SqlStore,
) -> None:
    """`purge_batch` drops parked events only when told (the default keeps them: a webhook
    configured later still gets its completion); an owner given as one string is that owner,
    not its letters. Kills mutants `outbox.purge_batch` 1 (`drop_parked` True by default)
    and `outbox._owners_json` 3 ("shop" read as the owners s, h, o, p)."""
    job = await job_in(store, JobState.SUCCEEDED, key="k1")
    await age_jobs(store, 30 * DAY_S)
    cutoff = time.time() - 7 * DAY_S
    assert await store.outbox.count_purgeable(cutoff, owners="shop", drop_parked=True) == (0, 1, 0)
    assert await store.outbox.purge_batch(cutoff, 10, owners="shop", drop_parked=True) == (0, 0)
    assert await store.outbox.purge_batch(cutoff, 10, owners=[]) == (0, 0)
    assert await store.jobs.get_job(job.id) is not None


async def test_an_event_read_back_says_when_it_was_written_and_when_it_died(
    store: SqlStore,
) -> None:
    """An event carries the time of the terminal change that wrote it (receivers get it as
    `created_at`), a dead letter the time it was buried, and an unknown id is no event. Kills
    mutants `outbox._event` 6 (`created_at` None), 12, 24, 53, 54, 55 (`dead_at` dropped) and
    `outbox_event` 11 (an unknown id read as a row)."""
    job = await job_in(store, JobState.SUCCEEDED, key="k1")
    event = await event_of(store, job)
    assert event.created_at == pytest.approx(job.updated_at.timestamp())
    assert event.dead_at is None
    [claimed] = await store.outbox.claim_outbox(OWNERS, "w1", claim_s=30, limit=10)
    assert await store.outbox.outbox_bury(claimed.id, "w1", error="HTTP 500: no")
    [dead] = await store.outbox.dead_letters()
    assert dead.dead_at is not None and dead.dead_at >= event.created_at
    assert await store.outbox.outbox_event("no-such-event") is None
