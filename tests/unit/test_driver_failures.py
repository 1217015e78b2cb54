"""Two `except` branches of the driver (router/driver.py) that decide what a job's attempts end
as, each reached here on purpose (issue 33: a test for every `except` branch that decides a
state). A driver that fails lets its calls in flight record their own answers; a job cancelled
between a decision and its attempt's row ends the drive quietly. The failures are injected:
nothing a caller sends makes the driver fail, and the cancel must land inside one await."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

import jobrouter.driver
from jobrouter import Router
from jobrouter.breaker import Breakers
from jobrouter.states import AttemptState, JobState
from tests.support.fakes import FakeProvider, Step
from tests.support.waiting import until
from tests.unit.test_engine import SETTLE, config, exclusive, shared, url

DECIDE = jobrouter.driver.next_step
ACQUIRE = Breakers.acquire


async def test_a_driver_that_fails_lets_its_call_in_flight_record_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's first decision after starting a's call raises (a bug); a answers after.
    Mutant: driver `run`'s `except` not waiting for the calls in flight (its `finally` then
    cancelled a's call: a's attempt `unknown`, "the router stopped", its answer lost), seen
    failing."""
    failed = asyncio.Event()
    answer = asyncio.Event()

    async def decide_fails_once(*args: Any) -> Any:
        if not failed.is_set():
            failed.set()
            raise RuntimeError("a bug in deciding")
        return await DECIDE(*args)

    monkeypatch.setattr(jobrouter.driver, "next_step", decide_fails_once)
    a = FakeProvider("a", default=Step(output={"text": "from a"}, release=answer))
    b = FakeProvider("b", default=Step(output={"text": "from b"}))
    cfg = config(post=shared(attempt_timeout=30.0))
    async with Router.open(url(tmp_path), cfg, providers={"a": a, "b": b}) as router:
        job = await router.submit("shop", "k1", "post", {"product": "tea"})
        await until(failed.is_set, "the driver's failure", SETTLE, every=0.01)
        answer.set()
        done = await router.wait(job.id, timeout=SETTLE)
        attempts = await router.attempts(job.id)
    assert done.state is JobState.SUCCEEDED and done.result == {"text": "from a"}
    assert [(x.provider, x.state) for x in attempts] == [("a", AttemptState.SUCCEEDED)]
    assert b.calls == []


async def test_a_job_cancelled_before_its_attempt_row_ends_the_drive_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The owner cancels the job between the driver's decision to start a and the attempt's
    row (inside the breaker's acquire, the last await before it): no attempt, no call, and the
    driver reads the job again and lets go.
    Mutant: driver `_start`'s `except InvalidTransition` re-raising (the driver failed with
    "driving job ... failed; it will be picked up again"), seen failing on the log
    assertion."""
    a = FakeProvider("a")
    cfg = config(post=exclusive())
    async with Router.open(
        url(tmp_path), cfg, providers={"a": a, "b": a}, run_workers=False
    ) as owner:
        job = await owner.submit("shop", "k1", "post", {"product": "tea"})  # queued, no attempt
        cancelled: list[str] = []

        async def acquire_after_a_cancel(self: Breakers, provider: str) -> bool:
            if not cancelled:
                cancelled.append(provider)
                await owner.cancel(job.id)
            return await ACQUIRE(self, provider)

        monkeypatch.setattr(Breakers, "acquire", acquire_after_a_cancel)
        caplog.set_level(logging.WARNING)
        async with Router.open(url(tmp_path), cfg, providers={"a": a, "b": a}) as router:
            engine = router.engine
            assert engine is not None
            await until(lambda: cancelled, "the driver's decision to start a", SETTLE, every=0.01)
            await until(
                lambda: not engine.is_driving(job.id), "the drive's end", SETTLE, every=0.01
            )
            ended = await router.get(job.id)
            attempts = await router.attempts(job.id)
    assert ended.state is JobState.CANCELLED
    assert attempts == [] and a.calls == []
    assert not [r for r in caplog.records if "driving job" in r.getMessage()]
