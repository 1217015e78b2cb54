"""Store shorthands the tests use and the product does not: a job submitted without a first
attempt, an attempt left unknown, and how many jobs the store holds (issue 17 took them out of
`SqlStore`)."""

from __future__ import annotations

from jobrouter.listing import JobFilter
from jobrouter.models import Attempt, AttemptUsage, Job, JsonObject
from jobrouter.states import AttemptState, JobState
from jobrouter.store import SqlStore


async def create_job(
    store: SqlStore,
    *,
    owner: str,
    idempotency_key: str,
    task: str,
    input: JsonObject,
    params: JsonObject,
    deadline_s: float | None,
    claimed_by: str | None,
    claim_s: float,
) -> Job:
    """The job (queued), or the one already under the key: `create_and_start` with no first
    attempt."""
    job, _ = await store.jobs.create_and_start(
        owner=owner,
        idempotency_key=idempotency_key,
        task=task,
        input=input,
        params=params,
        deadline_s=deadline_s,
        claimed_by=claimed_by,
        claim_s=claim_s,
    )
    return job


async def count_jobs(store: SqlStore) -> int:
    """Every job in the store, whatever its owner and state: the listing's counts summed."""
    return sum((await store.jobs.count_jobs_by_state(JobFilter())).values())


async def leave_unknown(store: SqlStore, job_id: str, *, provider: str) -> tuple[Job, Attempt]:
    """An exclusive attempt of `provider` whose call timed out, and the job settled `unknown`
    waiting for an operator: what `resolve` acts on."""
    _, attempt = await store.jobs.start_attempt(
        job_id, provider=provider, model=None, worker="w", lease_s=30, exclusive=True
    )
    await store.jobs.finish_attempt(
        attempt.id,
        AttemptState.UNKNOWN,
        error_kind="unknown",
        error="read timeout",
        usage=AttemptUsage(),
    )
    job = await store.jobs.settle_job(job_id, JobState.UNKNOWN, error="needs attention")
    return job, attempt
