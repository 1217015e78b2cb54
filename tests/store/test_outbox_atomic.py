"""I8: the completion event is written in the transaction of the terminal change, on every path
that ends a job. A fault injector makes the outbox INSERT fail inside the database (it names a
table that does not exist); the terminal change must then roll back with it: job, attempts,
event log untouched, no outbox row. Once the fault is gone the same call goes through, with
exactly one outbox row. On both backends.

Kills the mutants "outbox row written in a second transaction after the CAS win" and "... after
settle_job" (router/store/attempts.py, jobs.py; checked by applying each): with the row written
apart, the job is terminal in the database although its event was never written."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from jobrouter.models import Attempt, AttemptUsage, Job
from jobrouter.states import AttemptState, JobState
from jobrouter.store import SqlStore
from tests.support.store_jobs import create_job

NO_USAGE = AttemptUsage()
FAULT_TABLE = "outbox_fault_injected"


def break_outbox_insert(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The outbox INSERT fails in the database, like a full disk or a lost constraint would."""
    queries = store.connector.queries  # the one loaded copy every part of the store reads
    broken = queries["insert_outbox"].replace("INSERT INTO outbox ", f"INSERT INTO {FAULT_TABLE} ")
    assert broken != queries["insert_outbox"]
    monkeypatch.setitem(queries, "insert_outbox", broken)


async def running_job(store: SqlStore, key: str) -> tuple[Job, Attempt]:
    job = await create_job(
        store,
        owner="shop",
        idempotency_key=key,
        task="caption",
        input={"product": "tea"},
        params={},
        deadline_s=None,
        claimed_by=None,
        claim_s=60.0,
    )
    job, attempt = await store.jobs.start_attempt(
        job.id, provider="a", model=None, worker="w1", lease_s=30.0, exclusive=False
    )
    return job, attempt


async def snapshot(store: SqlStore, job_id: str) -> tuple[Any, ...]:
    job = await store.jobs.get_job(job_id)
    attempts = await store.jobs.list_attempts(job_id)
    events = await store.connector.fetchall(
        "SELECT seq, kind FROM job_events WHERE job_id = :id ORDER BY seq", {"id": job_id}
    )
    outbox = await store.connector.fetchall(
        "SELECT kind FROM outbox WHERE job_id = :id", {"id": job_id}
    )
    return job, attempts, events, outbox


async def succeed(store: SqlStore, job: Job, attempt: Attempt) -> Any:
    return await store.jobs.finish_attempt_cas(attempt.id, {"text": "ok"}, NO_USAGE)


async def fail(store: SqlStore, job: Job, attempt: Attempt) -> Any:
    return await store.jobs.settle_job(job.id, JobState.FAILED, error="every provider failed")


async def nothing_first(store: SqlStore, job: Job, attempt: Attempt) -> None:
    return None


async def attempt_failed(store: SqlStore, job: Job, attempt: Attempt) -> None:
    """The attempt's outcome is its own transaction; the job's settlement comes after."""
    await store.jobs.finish_attempt(
        attempt.id, AttemptState.FAILED, error_kind="rejected", error="HTTP 500", usage=NO_USAGE
    )


async def needs_attention(store: SqlStore, job: Job, attempt: Attempt) -> None:
    await store.jobs.finish_attempt(
        attempt.id, AttemptState.UNKNOWN, error_kind="unknown", error="read timeout", usage=NO_USAGE
    )
    await store.jobs.settle_job(job.id, JobState.UNKNOWN, error="needs attention")


async def resolve_unknown_succeeded(store: SqlStore, job: Job, attempt: Attempt) -> Any:
    return await store.jobs.resolve_attempt(
        attempt.id, AttemptState.SUCCEEDED, {"text": "ok"}, "seen"
    )


async def cancel_unknown(store: SqlStore, job: Job, attempt: Attempt) -> Any:
    return await store.jobs.cancel_job(job.id, "operator")


Step = Callable[[SqlStore, Job, Attempt], Awaitable[Any]]
# (what happens first, the call that ends the job, the terminal state)
PATHS = [
    pytest.param(nothing_first, succeed, JobState.SUCCEEDED, id="success-cas"),
    pytest.param(attempt_failed, fail, JobState.FAILED, id="failure-settle"),
    pytest.param(
        needs_attention, resolve_unknown_succeeded, JobState.SUCCEEDED, id="unknown-resolved"
    ),
    pytest.param(needs_attention, cancel_unknown, JobState.CANCELLED, id="unknown-cancelled"),
]


@pytest.mark.parametrize(("first", "end", "terminal"), PATHS)
async def test_a_failed_outbox_insert_rolls_the_terminal_change_back(
    store: SqlStore,
    monkeypatch: pytest.MonkeyPatch,
    first: Step,
    end: Step,
    terminal: JobState,
) -> None:
    job, attempt = await running_job(store, "k1")
    await first(store, job, attempt)
    before = await snapshot(store, job.id)
    assert not before[0].state.terminal and before[3] == []

    break_outbox_insert(store, monkeypatch)
    with pytest.raises(Exception, match=FAULT_TABLE):
        await end(store, job, attempt)
    assert await snapshot(store, job.id) == before, "the terminal change outlived its event"

    monkeypatch.undo()
    await end(store, job, attempt)
    after_job, _, _, outbox = await snapshot(store, job.id)
    assert after_job is not None and after_job.state is terminal
    assert outbox == [{"kind": f"job.{terminal}"}]
