"""The first attempt's move from queued to running, when it rides in the transaction that
creates the job, is the transition table's (`jobrouter.states.JOB_TRANSITIONS`), as the move of
a later start is: a table that forbade it would refuse both, and nothing would be written."""

from __future__ import annotations

import pytest

from jobrouter.errors import InvalidTransition
from jobrouter.models import NewEvent
from jobrouter.states import JOB_TRANSITIONS, EventKind, JobState
from jobrouter.store import SqlStore
from jobrouter.store.starts import AttemptStart


def first_start() -> AttemptStart:
    """A new first attempt (each start is one attempt: its own id)."""
    return AttemptStart(
        provider="a",
        model="m",
        worker="w1",
        lease_s=30.0,
        notes=(NewEvent(kind=EventKind.PROVIDER_SKIPPED, data={"provider": "c"}),),
    )


async def test_a_table_without_queued_to_running_refuses_the_first_attempt(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        JOB_TRANSITIONS, JobState.QUEUED, JOB_TRANSITIONS[JobState.QUEUED] - {JobState.RUNNING}
    )
    with pytest.raises(InvalidTransition):
        await store.jobs.create_and_start(
            owner="shop-1",
            idempotency_key="k1",
            task="caption",
            input={"product": "tea"},
            params={},
            deadline_s=60.0,
            claimed_by="w1",
            claim_s=60.0,
            first=first_start(),
        )
    assert await store.jobs.find_job("shop-1", "k1") is None  # rolled back: nothing written
    monkeypatch.undo()
    job, attempt = await store.jobs.create_and_start(
        owner="shop-1",
        idempotency_key="k1",
        task="caption",
        input={"product": "tea"},
        params={},
        deadline_s=60.0,
        claimed_by="w1",
        claim_s=60.0,
        first=first_start(),
    )
    assert job.state is JobState.RUNNING and attempt is not None
