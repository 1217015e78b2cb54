"""Issue 27's core promises under a suspension (real SQLite file, the router's own engine and
leader; the providers are in-process fakes whose calls are counted): the gate decides new
attempts only. An exclusive job (`side_effects: external`) whose attempt on `a` ended
`unknown` while `a` was suspended gets no attempt on `b`: it waits for an operator, as
docs/failures.md says for unknown. A job in flight on `a` when `a` is suspended finishes on
`a`, under the rules it started with."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from jobrouter import Router
from jobrouter.config import (
    CertificationConfig,
    DatabaseConfig,
    EngineConfig,
    RouterConfig,
    TaskConfig,
    WatchConfig,
)
from jobrouter.providers import CompletionRequest
from jobrouter.providers.errors import OutcomeUnknown
from jobrouter.states import AttemptState, JobState
from jobrouter.store.live_watch import Suspension, WatchRow
from tests.store.test_gate_forget import certify
from tests.support.fakes import FakeProvider, Step

SETTLE_S = 30.0
INPUT = {"product": {"name": "t"}, "tone": "warm"}
GOOD = {"text": "Warm saffron tea"}
SUSPENSION = Suspension(
    at=0.0,
    rule="failure rate",
    reason="live failure rate 40% over 10 answers against a certified baseline of 2%",
    answered=10,
    failed=4,
    sample_attempts=("att-1",),
)


def config(tmp_path: Path, side_effects: str | None) -> RouterConfig:
    task = TaskConfig(contract="caption", providers=["a", "b"], side_effects=side_effects)
    return RouterConfig(
        database=DatabaseConfig(url=f"sqlite:///{tmp_path / 'jobs.db'}"),
        tasks={"caption": task},
        engine=EngineConfig(poll_interval=0.05, sweep_interval=0.2),
        certification=CertificationConfig(watch=WatchConfig(interval=0.05)),
    )


class Held:
    """`a`'s next call, held until the test lets it answer (or fail): `called` is set when the
    router has sent it."""

    def __init__(self, provider: FakeProvider, step: Step) -> None:
        self.called = asyncio.Event()
        self.release = asyncio.Event()
        provider.steps.append(Step(output=step.output, error=step.error, release=self.release))

        async def seen(_: CompletionRequest) -> None:
            self.called.set()

        provider.on_call = seen


async def suspend_a_while_in_flight(router: Router, held: Held) -> None:
    """Wait for `a`'s call, then suspend `a` as the leader's fold does (the row, then this
    process's gate told at once) and check the gate refuses `a` for new attempts."""
    async with asyncio.timeout(SETTLE_S):  # a guard only: the call is the event
        await held.called.wait()
    await router.store.live_watch.save(WatchRow("a", "caption", answered=10, suspension=SUSPENSION))
    router.gate.forget()
    refused = (await router.gate.eligibility(router.tasks["caption"]))["a"]
    assert not refused.ok and "suspended for contract 'caption'" in refused.reason


async def opened(tmp_path: Path, side_effects: str | None) -> tuple[Router, FakeProvider]:
    a = FakeProvider(name="a", default=Step(output=GOOD))
    b = FakeProvider(name="b", default=Step(output=GOOD))
    router = await Router.open(config=config(tmp_path, side_effects), providers={"a": a, "b": b})
    fingerprint = router.tasks["caption"].contract_fingerprint
    assert fingerprint is not None
    for provider in (a, b):
        await certify(router.store, provider, fingerprint)
    router.gate.forget()
    return router, b


async def test_an_exclusive_attempt_that_may_have_acted_gets_no_second_one(
    tmp_path: Path,
) -> None:
    """mutant: policy.decide's exclusive `if unknown: return Finish(UNKNOWN)` removed: the job
    is left running (the store's refuse_if_open still refuses `b`'s attempt); with
    start_attempt_in's refuse_if_open removed too, `b` gets a second attempt and the job
    succeeds."""
    router, b = await opened(tmp_path, side_effects="external")
    async with router:
        a = router.providers["a"]
        assert isinstance(a, FakeProvider)
        held = Held(a, Step(error=OutcomeUnknown("read timeout", provider="a")))
        job = await router.submit("shop", "acted", "caption", INPUT)
        await suspend_a_while_in_flight(router, held)
        held.release.set()
        job = await router.wait(job.id, timeout=SETTLE_S)
        attempts = await router.attempts(job.id)
    assert job.state is JobState.UNKNOWN, job.error  # for an operator to resolve
    assert [(x.provider, x.state) for x in attempts] == [("a", AttemptState.UNKNOWN)]
    assert b.calls == []


@pytest.mark.parametrize("side_effects", ["external", None], ids=["exclusive", "repeatable"])
async def test_a_job_in_flight_when_its_provider_is_suspended_finishes_there(
    tmp_path: Path, side_effects: str | None
) -> None:
    """mutant: the answer is judged failed when the gate no longer admits its provider
    (AttemptCall._succeed re-asks the gate before the CAS): the exclusive job ends `unknown`,
    the repeatable one fails over to `b`."""
    router, b = await opened(tmp_path, side_effects=side_effects)
    async with router:
        a = router.providers["a"]
        assert isinstance(a, FakeProvider)
        held = Held(a, Step(output=GOOD))
        job = await router.submit("shop", "in-flight", "caption", INPUT)
        await suspend_a_while_in_flight(router, held)
        held.release.set()
        job = await router.wait(job.id, timeout=SETTLE_S)
        attempts = await router.attempts(job.id)
        after = await router.submit("shop", "after", "caption", INPUT)
        after = await router.wait(after.id, timeout=SETTLE_S)
        after_attempts = await router.attempts(after.id)
    assert job.state is JobState.SUCCEEDED, job.error
    assert [(x.provider, x.state) for x in attempts] == [("a", AttemptState.SUCCEEDED)]
    assert job.winner_attempt_id == attempts[0].id
    # a new job is a new decision: `b` only
    assert after.state is JobState.SUCCEEDED
    assert [x.provider for x in after_attempts] == ["b"]
    assert len(b.calls) == 1 and len(a.calls) == 1
