"""Jobs in a chosen state, straight through the store, for outbox and retention tests."""

from __future__ import annotations

from jobrouter.models import AttemptUsage, Job
from jobrouter.states import AttemptState, EndReason, JobState
from jobrouter.store import SqlStore
from jobrouter.store.outbox import OutboxEvent
from tests.support.store_jobs import create_job

# the end reason each ended attempt of these jobs records
REASON = {AttemptState.FAILED: EndReason.REJECTED, AttemptState.UNKNOWN: EndReason.UNKNOWN}

DAY_S = 86_400.0


async def new_job(store: SqlStore, *, owner: str = "shop", key: str = "k1") -> Job:
    return await create_job(
        store,
        owner=owner,
        idempotency_key=key,
        task="caption",
        input={"product": "tea"},
        params={},
        deadline_s=None,
        claimed_by=None,
        claim_s=60.0,
    )


async def job_in(store: SqlStore, state: JobState, *, owner: str = "shop", key: str) -> Job:
    """A job brought to `state` the way the engine would (attempts and events included)."""
    job = await new_job(store, owner=owner, key=key)
    if state is JobState.QUEUED:
        return job
    _, attempt = await store.jobs.start_attempt(
        job.id, provider="a", model=None, worker="w1", lease_s=30.0, exclusive=False
    )
    if state is JobState.SUCCEEDED:
        return (await store.jobs.finish_attempt_cas(attempt.id, {"text": key}, AttemptUsage())).job
    if state is JobState.CANCELLED:
        return await store.jobs.cancel_job(job.id, "test")
    if state in (JobState.FAILED, JobState.UNKNOWN):
        ended = AttemptState.FAILED if state is JobState.FAILED else AttemptState.UNKNOWN
        await store.jobs.finish_attempt(
            attempt.id, ended, error_kind=REASON[ended], error="test", usage=AttemptUsage()
        )
        return await store.jobs.settle_job(job.id, state, error="test")
    assert state is JobState.RUNNING
    fresh = await store.jobs.get_job(job.id)
    assert fresh is not None
    return fresh


async def outbox_event_of_job(store: SqlStore, job_id: str) -> OutboxEvent | None:
    """The job's completion event while in the outbox (pending or delivered; not a dead
    letter), read through the store's own read by event id."""
    row = await store.connector.fetchone(
        "SELECT id FROM outbox WHERE job_id = :job_id", {"job_id": job_id}
    )
    return await store.outbox.outbox_event(str(row["id"])) if row else None


async def event_of(store: SqlStore, job: Job) -> OutboxEvent:
    event = await outbox_event_of_job(store, job.id)
    assert event is not None, f"job {job.id} has no outbox event"
    return event


async def succeeded_events(store: SqlStore, count: int, *, prefix: str = "k") -> list[OutboxEvent]:
    """`count` jobs brought to succeeded (keys `<prefix>0`, `<prefix>1`...), each with its
    completion event waiting in the outbox: the events, in that order."""
    return [
        await event_of(store, await job_in(store, JobState.SUCCEEDED, key=f"{prefix}{n}"))
        for n in range(count)
    ]


async def age_jobs(store: SqlStore, seconds: float) -> None:
    """Pretend every job last changed `seconds` earlier than it did."""
    async with store.connector.write() as tx:
        await tx.execute("UPDATE jobs SET updated_at = updated_at - :s", {"s": seconds})


async def count(store: SqlStore, table: str, job_id: str | None = None) -> int:
    where = " WHERE job_id = :job_id" if job_id else ""
    row = await store.connector.fetchone(
        f"SELECT COUNT(*) AS n FROM {table}{where}", {"job_id": job_id} if job_id else {}
    )
    assert row is not None
    return int(row["n"])
