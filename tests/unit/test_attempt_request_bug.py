"""An attempt whose per-attempt request cannot be made (a bug between the job's request and the
call: its timeout and labels are added per attempt, router/tasks.py `for_attempt`) was never
sent: it ends `failed`, `not_sent`, and the job may go on to the next provider, exclusive task
or not (nothing can have acted). The bug is injected: no real input reaches this branch, which
is why it needs its own test (issue 33, the `except` branches that decide a state)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobrouter.models import Job
from jobrouter.providers import CompletionRequest
from jobrouter.states import AttemptState, JobState
from jobrouter.tasks import TaskRuntime
from tests.support.fakes import FakeProvider, Step
from tests.unit.test_engine import SETTLE, config, exclusive, open_router, submit

BUILD = TaskRuntime.for_attempt


async def test_an_attempt_whose_request_cannot_be_made_is_failed_not_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first attempt's request fails to be made; the second is made as usual.
    Mutant: attempt_call `_call`'s first `except` re-raising (the bug escaped the call: the
    attempt stayed `started`, its lease ran out, and the exclusive job ended `unknown` with b
    never called), seen failing."""
    made: list[int] = []

    def first_fails(request: CompletionRequest, job: Job, timeout: float | None) -> Any:
        made.append(1)
        if len(made) == 1:
            raise RuntimeError("labels could not be merged")
        return BUILD(request, job, timeout)

    monkeypatch.setattr(TaskRuntime, "for_attempt", staticmethod(first_fails))
    a = FakeProvider("a", default=Step(output={"text": "from a"}))
    b = FakeProvider("b", default=Step(output={"text": "from b"}))
    async with open_router(tmp_path, config(post=exclusive()), {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        done = await router.wait(job.id, timeout=SETTLE)
        attempts = await router.attempts(job.id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == {"text": "from b"}
    assert [(x.provider, x.state, x.error_kind) for x in attempts] == [
        ("a", AttemptState.FAILED, "not_sent"),
        ("b", AttemptState.SUCCEEDED, None),
    ]
    assert attempts[0].error == "the request could not be built, nothing was sent"
    assert a.calls == [] and len(b.calls) == 1
