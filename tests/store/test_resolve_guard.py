"""The store refuses to resolve an attempt that is not `unknown`, under the job's lock: every
path that resolves (Router.resolve, the HTTP API, the CLI) goes through it. Kills the mutant
"resolve accepts an attempt in any state" (the `only_from` guard of finish_attempt_cas /
finish_attempt removed: these tests then fail)."""

from __future__ import annotations

import pytest

from jobrouter.errors import InvalidTransition
from jobrouter.models import Attempt, AttemptUsage
from jobrouter.states import AttemptState
from jobrouter.store import SqlStore
from tests.support.store_jobs import create_job

NO_USAGE = AttemptUsage()
OUTCOMES = [AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.CANCELLED]


async def started(store: SqlStore, key: str) -> Attempt:
    job = await create_job(
        store,
        owner="shop",
        idempotency_key=key,
        task="post",
        input={"text": "hi"},
        params={},
        deadline_s=None,
        claimed_by=None,
        claim_s=60.0,
    )
    _, attempt = await store.jobs.start_attempt(
        job.id, provider="a", model=None, worker="w1", lease_s=30.0, exclusive=True
    )
    return attempt


@pytest.mark.parametrize("outcome", OUTCOMES, ids=str)
async def test_a_started_attempt_is_not_the_operators_to_resolve(
    store: SqlStore, outcome: AttemptState
) -> None:
    attempt = await started(store, "k1")
    job_before = await store.jobs.get_job(attempt.job_id)
    with pytest.raises(InvalidTransition, match="cannot go from started"):
        await store.jobs.resolve_attempt(attempt.id, outcome, {"text": "guess"}, "guess")
    assert await store.jobs.get_attempt(attempt.id) == attempt
    assert await store.jobs.get_job(attempt.job_id) == job_before


@pytest.mark.parametrize("ended", [AttemptState.FAILED, AttemptState.SUCCEEDED], ids=str)
@pytest.mark.parametrize("outcome", OUTCOMES, ids=str)
async def test_a_finished_attempt_stays_as_it_ended(
    store: SqlStore, ended: AttemptState, outcome: AttemptState
) -> None:
    attempt = await started(store, "k1")
    if ended is AttemptState.SUCCEEDED:
        await store.jobs.finish_attempt_cas(attempt.id, {"text": "real"}, NO_USAGE)
    else:
        await store.jobs.finish_attempt(
            attempt.id, ended, error_kind="rejected", error="HTTP 500", usage=NO_USAGE
        )
    before = await store.jobs.get_attempt(attempt.id)
    job_before = await store.jobs.get_job(attempt.job_id)
    with pytest.raises(InvalidTransition, match=f"cannot go from {ended}"):
        await store.jobs.resolve_attempt(attempt.id, outcome, {"text": "guess"}, "guess")
    assert await store.jobs.get_attempt(attempt.id) == before
    assert await store.jobs.get_job(attempt.job_id) == job_before


async def test_an_unknown_attempt_is_resolved(store: SqlStore) -> None:
    attempt = await started(store, "k1")
    await store.jobs.finish_attempt(
        attempt.id, AttemptState.UNKNOWN, error_kind="unknown", error="read timeout", usage=NO_USAGE
    )
    job, resolved = await store.jobs.resolve_attempt(
        attempt.id, AttemptState.SUCCEEDED, {"text": "it ran"}, "seen"
    )
    assert resolved.state is AttemptState.SUCCEEDED and job.result == {"text": "it ran"}
