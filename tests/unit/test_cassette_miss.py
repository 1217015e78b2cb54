"""A cassette miss inside the router (a replayed test asked for a request nobody recorded) is a
setup error, never a provider outcome: the attempt is recorded `unknown` with `cassette_miss`,
and the miss is raised out of the job's driver, which stops driving the job. It must not be
swallowed: the router would fail over to the next provider and a test would pass on an
incomplete recording."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from jobrouter.config import EngineConfig
from jobrouter.providers import CompletionRequest
from jobrouter.providers.errors import CassetteMiss
from jobrouter.states import AttemptState, JobState
from tests.support.fakes import FakeProvider
from tests.support.waiting import until
from tests.unit.test_engine import config, open_router, shared, submit

GUARD_S = 60.0  # a ceiling against a hang only


async def not_recorded(request: CompletionRequest) -> None:
    """What the litellm adapter raises when vcrpy has no recording of the request."""
    raise CassetteMiss("no recording for this request", provider="a")


async def test_a_cassette_miss_is_recorded_and_raised_not_failed_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kills the mutant "cassette miss recorded but not re-raised" (the `raise` after recording
    it in JobDriver removed: the driver then goes on to provider b, and this test fails)."""
    a, b = FakeProvider("a", on_call=not_recorded), FakeProvider("b")
    # A long claim: the job is not picked up again while the test looks.
    cfg = config(caption=shared()).model_copy(
        update={
            "engine": EngineConfig(poll_interval=0.05, sweep_interval=0.1, claim=600.0, lease=600.0)
        }
    )
    caplog.set_level(logging.ERROR, logger="jobrouter")

    def driver_failed() -> bool:
        return any(r.exc_info and isinstance(r.exc_info[1], CassetteMiss) for r in caplog.records)

    async with open_router(tmp_path, cfg, {"a": a, "b": b}) as router:
        job = await submit(router, "caption")
        # Whichever comes first: the miss raised out of the driver, or a call to b.
        await until(lambda: driver_failed() or b.calls, "the miss or a call", GUARD_S, 0.01)
        assert b.calls == [], "the miss was swallowed and the job failed over"
        assert driver_failed()
        [attempt] = await router.attempts(job.id)
        assert (attempt.provider, attempt.state) == ("a", AttemptState.UNKNOWN)
        assert attempt.error_kind == "cassette_miss"
        assert (await router.get(job.id)).state is JobState.RUNNING
