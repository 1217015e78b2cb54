"""An attempt's end reason (`error_kind`) is a closed vocabulary, `jobrouter.states.EndReason`:
the provider layer's kinds under the same strings, and the router's own; the store refuses
any other value on the way in, and a row holding one on the way out, loudly."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobrouter.errors import StoreError
from jobrouter.models import AttemptUsage
from jobrouter.providers import ErrorKind
from jobrouter.states import AttemptState, EndReason
from jobrouter.store import SqlStore, open_store
from jobrouter.store.rows import attempt_from_row
from tests.support.store_jobs import create_job
from tests.unit.test_rows import ATTEMPT_ROW

# Every error_kind an attempt row may carry: written out here, not read from the code.
EXPECTED = {
    "not_sent",
    "rejected",
    "unknown",
    "unrecorded",
    "cassette_miss",
    "cancelled",
    "resolved",
}


def test_the_vocabulary_is_the_one_written_here() -> None:
    assert {str(reason) for reason in EndReason} == EXPECTED


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_a_provider_error_kind_ends_an_attempt_under_the_same_string(kind: ErrorKind) -> None:
    """No data migration: the provider kinds stay the strings stored and sent. Mutant:
    `EndReason.REJECTED = "rejected_by_provider"`, seen failing here."""
    reason = EndReason.of_error(kind)
    assert (reason.name, str(reason)) == (kind.name, str(kind))


def test_a_row_with_an_end_reason_this_version_does_not_know_is_refused() -> None:
    """Mutant: `attempt_from_row` passing the row's `error_kind` on unchecked (the string
    "rate_limited" reached the model), seen failing."""
    with pytest.raises(StoreError) as refused:
        attempt_from_row({**ATTEMPT_ROW, "state": "failed", "error_kind": "rate_limited"})
    assert refused.value.transient is False
    message = str(refused.value)
    assert f"attempt {ATTEMPT_ROW['id']}" in message and "'rate_limited'" in message
    assert "cassette_miss" in message  # it lists what this version knows


def test_a_known_row_reads_as_its_member() -> None:
    row = {**ATTEMPT_ROW, "state": "unknown", "error_kind": "unrecorded"}
    assert attempt_from_row(row).error_kind is EndReason.UNRECORDED


async def started(tmp_path: Path) -> tuple[SqlStore, str, str]:
    """A store with one job and its `started` attempt: the store, the job's id, the attempt's."""
    store = await open_store(f"sqlite:///{tmp_path / 'r.db'}")
    job = await create_job(
        store,
        owner="shop",
        idempotency_key="k1",
        task="post",
        input={},
        params={},
        deadline_s=60,
        claimed_by="w1",
        claim_s=60,
    )
    _, attempt = await store.jobs.start_attempt(
        job.id, provider="a", model=None, worker="w1", lease_s=60, exclusive=False
    )
    return store, job.id, attempt.id


@pytest.mark.parametrize("reason", list(EndReason))
async def test_every_end_reason_is_stored_and_read_back_as_itself(
    tmp_path: Path, reason: EndReason
) -> None:
    store, job_id, attempt_id = await started(tmp_path)
    try:
        await store.jobs.finish_attempt(
            attempt_id, AttemptState.FAILED, error_kind=reason, error="e", usage=AttemptUsage()
        )
        [attempt] = await store.jobs.list_attempts(job_id)
    finally:
        await store.close()
    assert attempt.error_kind is reason


async def test_an_end_reason_outside_the_vocabulary_is_never_written(tmp_path: Path) -> None:
    """Mutant: `transitions.end_attempt` writing `error_kind` as given (the row then held
    "rate_limited", and the error came only when it was read), seen failing."""
    store, job_id, attempt_id = await started(tmp_path)
    try:
        with pytest.raises(ValueError, match="rate_limited"):
            await store.jobs.finish_attempt(
                attempt_id,
                AttemptState.FAILED,
                error_kind="rate_limited",  # type: ignore[arg-type]  # a string it never writes
                error="HTTP 429",
                usage=AttemptUsage(),
            )
        [attempt] = await store.jobs.list_attempts(job_id)
    finally:
        await store.close()
    assert attempt.state is AttemptState.STARTED
