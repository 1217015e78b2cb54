"""Claims, leases and reopening on every backend: a job is in one worker's hands at a time, a
heartbeat renews only what its worker holds, a reopened job is free for any worker at once, and
a note changes nothing but the log. (Written after mutation testing found these store methods
reached by no in-process SQLite test: docs/testing.md.)"""

from __future__ import annotations

import time
from typing import Any

from jobrouter.models import AttemptUsage, NewEvent
from jobrouter.states import AttemptState, JobState
from jobrouter.store import SqlStore
from tests.store.test_store import attempt_of, job_of, start, submit


async def claim_row(store: SqlStore, job_id: str) -> dict[str, Any]:
    row = await store.connector.fetchone(
        "SELECT claimed_by, claim_until, next_run_at FROM jobs WHERE id = :id", {"id": job_id}
    )
    assert row is not None
    return row


async def test_a_job_is_claimed_by_one_worker_until_it_releases_it(store: SqlStore) -> None:
    job = await submit(store)
    before = time.time()
    claimed = await store.jobs.claim(job.id, "w1", 60.0)
    assert claimed is not None and claimed.id == job.id
    row = await claim_row(store, job.id)
    assert row["claimed_by"] == "w1" and before + 59 <= row["claim_until"] <= time.time() + 61
    assert await store.jobs.claim(job.id, "w2", 60.0) is None  # held
    assert await store.jobs.claim(job.id, "w1", 60.0) is not None  # its holder may claim again
    await store.jobs.release(job.id, "w2", next_run_s=0.0)  # not w2's to release
    assert (await claim_row(store, job.id))["claimed_by"] == "w1"
    await store.jobs.release(job.id, "w1", next_run_s=30.0)
    row = await claim_row(store, job.id)
    assert row["claimed_by"] is None and row["claim_until"] is None
    assert row["next_run_at"] >= before + 29  # due again only later
    assert await store.jobs.claim(job.id, "w2", 60.0) is not None


async def test_an_expired_claim_can_be_taken_over(store: SqlStore) -> None:
    job = await submit(store)
    assert await store.jobs.claim(job.id, "w1", -1.0) is not None  # already expired
    assert await store.jobs.claim(job.id, "w2", 60.0) is not None


async def test_a_heartbeat_renews_only_what_its_worker_holds(store: SqlStore) -> None:
    mine, theirs, dropped = [await submit(store, key=k) for k in ("mine", "theirs", "dropped")]
    for job, worker in ((mine, "w1"), (theirs, "w2"), (dropped, "w1")):
        assert await store.jobs.claim(job.id, worker, 1.0) is not None
    attempt = await start(store, mine, "a", lease_s=1.0)  # worker "w1" (see `start`)
    before = time.time()
    await store.jobs.renew("w1", [mine.id], lease_s=120.0, claim_s=300.0)
    assert (await claim_row(store, mine.id))["claim_until"] >= before + 299
    renewed = await attempt_of(store, attempt.id)
    assert renewed.lease_until is not None and renewed.lease_until.timestamp() >= before + 119
    assert (await claim_row(store, theirs.id))["claim_until"] <= before + 1.5  # not w1's
    assert (await claim_row(store, dropped.id))["claim_until"] <= before + 1.5  # not in hand


async def test_a_reopened_job_runs_again_and_is_free_for_any_worker(store: SqlStore) -> None:
    job = await submit(store)
    assert await store.jobs.claim(job.id, "w1", 600.0) is not None
    attempt = await start(store, job, "a", exclusive=True)
    await store.jobs.finish_attempt(
        attempt.id,
        AttemptState.UNKNOWN,
        error_kind="unknown",
        error="read timeout",
        usage=AttemptUsage(),
    )
    unknown = await store.jobs.settle_job(job.id, JobState.UNKNOWN, error="needs attention")
    before = time.time()
    note = "resolved failed by an operator"
    reopened, _ = await store.jobs.resolve_attempt(attempt.id, AttemptState.FAILED, None, note)
    assert reopened.state is JobState.RUNNING and reopened.version > unknown.version
    row = await claim_row(store, job.id)
    assert row["claimed_by"] is None and row["next_run_at"] <= time.time()
    assert row["next_run_at"] >= before - 1
    assert await store.jobs.claim(job.id, "w2", 60.0) is not None
    [event] = [e for e in await store.jobs.list_events(job.id) if e.kind == "job.reopened"]
    assert event.data["reason"] == note
    assert event.job_state is JobState.RUNNING


async def test_a_resolution_reopens_only_a_job_that_is_unknown(store: SqlStore) -> None:
    """The attempt timed out but the job is still running (its policy has not settled it
    `unknown` yet): resolving the attempt `failed` ends the attempt and leaves the job as it
    is, with no `job.reopened`. Mutant: attempts._after_resolution's `if job.state is not
    JobState.UNKNOWN: return job` removed (the running job is "reopened": refused as
    running -> running, or a second reopened event)."""
    job = await submit(store)
    assert await store.jobs.claim(job.id, "w1", 600.0) is not None
    attempt = await start(store, job, "a", exclusive=True)
    await store.jobs.finish_attempt(
        attempt.id,
        AttemptState.UNKNOWN,
        error_kind="unknown",
        error="read timeout",
        usage=AttemptUsage(),
    )
    running = await job_of(store, job.id)
    after, done = await store.jobs.resolve_attempt(attempt.id, AttemptState.FAILED, None, "ok")
    assert done.state is AttemptState.FAILED
    assert after.state is JobState.RUNNING
    assert (await job_of(store, job.id)).state is JobState.RUNNING
    assert running.state is JobState.RUNNING
    kinds = [e.kind for e in await store.jobs.list_events(job.id)]
    assert "job.reopened" not in kinds and "attempt.failed" in kinds


async def test_a_note_adds_to_the_log_and_changes_nothing_else(store: SqlStore) -> None:
    job = await submit(store)
    await store.jobs.note(
        job.id,
        [
            NewEvent(kind="provider.skipped", data={"provider": "b"}),
            NewEvent(kind="job.waiting", data={"until": 12.5}),
        ],
    )
    after = await job_of(store, job.id)
    assert (after.state, after.version) == (job.state, job.version)
    events = await store.jobs.list_events(job.id)
    assert [(e.seq, e.kind, e.data) for e in events[-2:]] == [
        (2, "provider.skipped", {"provider": "b"}),
        (3, "job.waiting", {"until": 12.5}),
    ]
    assert all(e.job_state is JobState.QUEUED for e in events)
