"""No answer thrown away: store faults injected while outcomes are written, on both backends
(tests/support/faulty_connector.py wraps the real SQLite or PostgreSQL connector).

Each of these fails on the old code (f4844b9): a failed outcome write escaped the driver, the
attempt stayed `started` until its lease ran out and the sweeper called it `unknown` (its
answer gone); a retried CAS that had already won reported a loss; a lost COMMIT
acknowledgement on creation reached the caller as an error and left a committed attempt that
no one called.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from rich.console import Console

import jobrouter.api
from jobrouter import Router
from jobrouter import persist as persist_module
from jobrouter.errors import StoreError
from jobrouter.models import AttemptUsage
from jobrouter.printing import print_job
from jobrouter.states import AttemptState, JobState
from jobrouter.store import SqlStore, open_store
from jobrouter.store.starts import AttemptStart
from tests.support.fakes import FakeProvider, Step
from tests.support.faulty_connector import FaultyConnector
from tests.support.waiting import until
from tests.unit.test_engine import SETTLE, config, exclusive

OUT = {"text": "posted"}


@pytest.fixture(autouse=True)
def _no_backoff() -> Iterator[None]:
    persist_module.set_testing(no_backoff=True)
    yield
    persist_module.set_testing(no_backoff=False)


@pytest.fixture
async def faulty(db_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FaultyConnector]:
    """The connector every `Router.open` of this test gets, wrapped to inject faults."""
    wrapped: list[FaultyConnector] = []

    async def open_faulty(url: str, **options: Any) -> SqlStore:
        real = await open_store(url, **options)
        connector = FaultyConnector(real.connector)
        if wrapped:  # one plan, one count for every connector of the test
            connector.plan, connector.injected = wrapped[0].plan, wrapped[0].injected
        wrapped.append(connector)
        return SqlStore(connector)

    monkeypatch.setattr(jobrouter.api, "open_store", open_faulty)
    store = await open_faulty(db_url)  # migrated; the routers of the test share the plan
    yield wrapped[0]
    await store.close()


def providers() -> dict[str, FakeProvider]:
    return {"a": FakeProvider("a", default=Step(output=OUT)), "b": FakeProvider("b")}


async def run(url: str, **kwargs: Any) -> Router:
    return await Router.open(url, config(post=exclusive(attempt_timeout=5.0)), **kwargs)


async def test_a_retried_cas_that_already_won_reports_the_win(faulty: FaultyConnector) -> None:
    store = SqlStore(faulty)
    job, attempt = await store.jobs.create_and_start(
        owner="o",
        idempotency_key="k",
        task="post",
        input={},
        params={},
        deadline_s=60,
        claimed_by="w",
        claim_s=60,
        first=AttemptStart("a", None, "w", 60.0),
    )
    assert attempt is not None
    faulty.fail("finish_job_cas", "after")
    with pytest.raises(StoreError, match="acknowledgement lost"):
        await store.jobs.finish_attempt_cas(attempt.id, OUT, AttemptUsage())
    again = await store.jobs.finish_attempt_cas(attempt.id, OUT, AttemptUsage())
    assert again.won and again.job.state is JobState.SUCCEEDED
    assert again.job.winner_attempt_id == attempt.id and again.job.result == OUT
    events = [e.kind for e in await store.jobs.list_events(job.id)]
    assert events.count("job.succeeded") == 1 and "attempt.lost" not in events


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_transient_failure_of_the_winning_write_is_retried(
    db_url: str, faulty: FaultyConnector, when: str
) -> None:
    calls = providers()
    faulty.fail("finish_job_cas", when, times=3 if when == "before" else 1)  # type: ignore[arg-type]
    async with await run(db_url, providers=calls) as r:
        job = await r.submit("shop", "k1", "post", {"product": "tea"})
        job = await r.wait(job.id, SETTLE)
        attempts = await r.attempts(job.id)
    assert job.state is JobState.SUCCEEDED and job.result == OUT
    assert [(a.provider, a.state) for a in attempts] == [("a", AttemptState.SUCCEEDED)]
    assert len(calls["a"].calls) == 1 and calls["b"].calls == []
    assert faulty.injected["finish_job_cas"] == (3 if when == "before" else 1)


async def test_an_answer_that_cannot_be_recorded_is_kept_for_the_operator(
    db_url: str, faulty: FaultyConnector, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CAS never goes through: the answer is kept on the attempt, marked
    "answered; result could not be recorded", the exclusive job waits for an operator, who
    resolves it with that very output."""
    calls = providers()
    faulty.fail("finish_job_cas", "before", times=None)
    async with await run(db_url, providers=calls) as r:
        job = await r.submit("shop", "k1", "post", {"product": "tea"})
        job = await r.wait(job.id, SETTLE)
        [attempt] = await r.attempts(job.id)
        assert job.state is JobState.UNKNOWN
        assert (attempt.state, attempt.error_kind) == (AttemptState.UNKNOWN, "unrecorded")
        assert attempt.output == OUT
        assert "answered; the result could not be recorded" in (attempt.error or "")
        assert calls["b"].calls == []  # I4: one attempt that acted, nothing more
        print_job(Console(width=300), job, [attempt])  # what `jobrouter show` prints
        shown = capsys.readouterr().out
        assert f'attempt {attempt.id} kept its answer: {{"text": "posted"}}' in shown
        faulty.plan.clear()
        job = await r.resolve(attempt.id, "succeeded", attempt.output, "from the attempt")
    assert job.state is JobState.SUCCEEDED and job.result == OUT


async def test_a_lost_commit_acknowledgement_on_creation_drives_the_job(
    db_url: str, faulty: FaultyConnector
) -> None:
    calls = providers()
    faulty.fail("insert_job", "after")
    async with await run(db_url, providers=calls) as r:
        job = await r.submit("shop", "k1", "post", {"product": "tea"})  # no error: read back
        job = await r.wait(job.id, SETTLE)
        attempts = await r.attempts(job.id)
    assert faulty.injected["insert_job"] == 1
    assert job.state is JobState.SUCCEEDED
    assert [(a.provider, a.state) for a in attempts] == [("a", AttemptState.SUCCEEDED)]
    assert len(calls["a"].calls) == 1


async def test_a_lost_commit_acknowledgement_on_attempt_start_calls_that_attempt(
    db_url: str, faulty: FaultyConnector, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver that lost the acknowledgement reads the attempt back and calls it itself.
    Mutant: driver `_start`'s transient `except` re-raising (the driver failed, the job waited
    for its claim to expire and another drive adopted the attempt: the same end, later, with an
    error logged), seen failing on the log assertion."""
    calls = providers()
    async with await run(db_url, providers=calls, run_workers=False) as r:
        job = await r.submit("shop", "k1", "post", {"product": "tea"})  # queued, no attempt
    faulty.fail("insert_attempt", "after")
    async with await run(db_url, providers=calls) as r:
        job = await r.wait(job.id, SETTLE)
        attempts = await r.attempts(job.id)
    assert faulty.injected["insert_attempt"] == 1
    assert job.state is JobState.SUCCEEDED
    assert [(a.provider, a.state) for a in attempts] == [("a", AttemptState.SUCCEEDED)]
    assert len(calls["a"].calls) == 1
    assert not [r for r in caplog.records if "driving job" in r.getMessage()]


async def test_a_failure_record_is_retried_too(db_url: str, faulty: FaultyConnector) -> None:
    """A definite failure (not_sent) whose write fails twice is still recorded as such: the
    job fails over to b instead of waiting for a lease to expire into a false `unknown`."""
    from jobrouter.providers import NotSent

    calls = providers()
    calls["a"].steps = [Step(error=NotSent("refused", provider="a"))]
    faulty.fail("finish_attempt", "before", times=2)
    async with await run(db_url, providers=calls) as r:
        job = await r.submit("shop", "k1", "post", {"product": "tea"})
        job = await r.wait(job.id, SETTLE)
        attempts = await r.attempts(job.id)
    assert faulty.injected["finish_attempt"] == 2
    assert [(a.provider, a.state) for a in attempts] == [
        ("a", AttemptState.FAILED),
        ("b", AttemptState.SUCCEEDED),
    ]
    assert job.state is JobState.SUCCEEDED


async def test_an_answer_nothing_could_record_goes_to_the_log_whole(
    db_url: str, faulty: FaultyConnector, caplog: pytest.LogCaptureFixture
) -> None:
    """Neither the CAS nor the "answered; not recorded" end can be written: the answer is
    not lost with them, it is logged whole at CRITICAL for an operator to resolve with.
    Mutant: attempt_call `_unrecorded`'s `except` re-raising (the call failed with the
    store's error, the answer in no record and no log), seen failing."""
    faulty.fail("finish_job_cas", "before", times=None)
    faulty.fail("finish_attempt", "before", times=None)
    async with await run(db_url, providers=providers()) as r:
        await r.submit("shop", "k1", "post", {"product": "tea"})

        def logged() -> list[logging.LogRecord]:
            return [x for x in caplog.records if x.levelno == logging.CRITICAL]

        await until(logged, "the answer at CRITICAL", SETTLE, every=0.01)
        faulty.plan.clear()
    [record] = logged()
    assert "answered but nothing could be recorded" in record.getMessage()
    assert '{"text":"posted"}' in record.getMessage()
