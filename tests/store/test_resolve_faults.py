"""A resolution and the job's reopening are one transaction: a crash anywhere in it strands no
job, on both backends (tests/support/faulty_connector.py wraps the real SQLite or PostgreSQL
connector and fails the transaction that runs a chosen query).

On the old code (main at 0e4c214) `Router.resolve` wrote the attempt's end in one transaction
and reopened the job in a second: a connection lost before the second's COMMIT left the job
`unknown` with its only attempt `failed`, nothing left to resolve, nothing that would ever
move it (`test_a_crash_inside_a_resolution_strands_no_job[before-clear_claim]` fails there:
the mutant "reopen in a transaction of its own" is the old code).
"""

from __future__ import annotations

import pytest

from jobrouter import Router
from jobrouter.errors import StoreError
from jobrouter.states import AttemptState, JobState
from tests.store.test_outcome_faults import OUT
from tests.store.test_outcome_faults import _no_backoff as _no_backoff  # autouse, by name
from tests.store.test_outcome_faults import faulty as faulty  # a fixture, used by name
from tests.support.fakes import FakeProvider, Step
from tests.support.faulty_connector import FaultyConnector
from tests.unit.test_engine import SETTLE, config, exclusive


@pytest.mark.parametrize("query", ["finish_attempt", "record_resolution", "clear_claim"])
@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_crash_inside_a_resolution_strands_no_job(
    db_url: str, faulty: FaultyConnector, when: str, query: str
) -> None:
    """The exclusive job's only attempt timed out: `unknown`, waiting for a person. The
    resolution `failed` dies at `query` (`before`: rolled back; `after`: committed, its
    acknowledgement lost). Either nothing happened (the attempt is still `unknown`, the job
    `unknown`, and resolving again works) or all of it did (the attempt `failed` with its
    record, the job reopened): never a job `unknown` without an `unknown` attempt. Then the
    job fails over to b, as a resolved `failed` lets it."""
    calls = {
        "a": FakeProvider("a", default=Step(hang=True)),
        "b": FakeProvider("b", default=Step(output=OUT)),
    }
    # a's silence becomes `unknown` after 0.3 s; exclusive: b waits for the resolution (I4)
    async with await Router.open(
        db_url, config(post=exclusive(attempt_timeout=0.3)), providers=calls
    ) as r:
        job = await r.submit("shop", "k1", "post", {"product": "tea"})
        assert (await r.wait(job.id, SETTLE)).state is JobState.UNKNOWN
        [attempt] = await r.attempts(job.id)
        assert attempt.state is AttemptState.UNKNOWN
        faulty.fail(query, when)  # type: ignore[arg-type]
        with pytest.raises(StoreError, match="injected"):
            await r.resolve(attempt.id, "failed", None, "nothing was posted", by="token:t-1")
        assert faulty.injected[query] == 1
        after = await r.get(job.id)
        [seen] = await r.attempts(job.id)
        if after.state is JobState.UNKNOWN:  # the invariant: something is left to resolve
            assert seen.state is AttemptState.UNKNOWN and seen.resolved_by is None
        if when == "before":
            assert (after.state, seen.state) == (JobState.UNKNOWN, AttemptState.UNKNOWN)
            await r.resolve(attempt.id, "failed", None, "nothing was posted", by="token:t-1")
        else:
            assert after.state is not JobState.UNKNOWN and seen.state is AttemptState.FAILED
        done = await r.wait(job.id, SETTLE)
        attempts = await r.attempts(job.id)
    assert done.state is JobState.SUCCEEDED and done.result == OUT and done.error is None
    assert [(a.provider, a.state) for a in attempts] == [
        ("a", AttemptState.FAILED),
        ("b", AttemptState.SUCCEEDED),
    ]
    assert (attempts[0].resolved_by, attempts[0].resolution_note) == (
        "token:t-1",
        "nothing was posted",
    )
