"""Unit tests of the retry decisions, the rate limiter and the bulkhead (no network)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from jobrouter.providers import resilience
from jobrouter.providers.classify import from_status
from jobrouter.providers.config import RetryPolicy
from jobrouter.providers.errors import NotSent, OutcomeUnknown, ProviderError
from jobrouter.providers.resilience import Bulkhead, RateLimiter, retrying
from tests.support.clock import ManualClock

T = TypeVar("T")


class Script:
    """A call that raises the scripted errors in turn, then returns "done"."""

    def __init__(self, *errors: ProviderError) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


async def recorded_waits(monkeypatch: pytest.MonkeyPatch, call: Awaitable[T]) -> list[float]:
    """Run `call` with every asyncio.sleep recorded (and not slept): the waits the retry layer
    asked for, read as numbers instead of guessed from a clock on a busy machine."""
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def record(delay: float, result: Any = None) -> Any:
        waits.append(delay)
        return await real_sleep(0, result)

    monkeypatch.setattr(asyncio, "sleep", record)
    try:
        await call
    finally:
        monkeypatch.setattr(asyncio, "sleep", real_sleep)
    return waits


def far() -> float:
    return asyncio.get_running_loop().time() + 60


NOT_SENT = NotSent("refused", provider="p")
UNKNOWN = OutcomeUnknown("read timeout", provider="p")
# As providers.classify makes them: the retry layer reads `retryable`, not the status.
R429 = from_status(429, "slow down", "p")
R500 = from_status(500, "boom", "p")
R400 = from_status(400, "bad request", "p")  # not sent, and not worth sending again


@pytest.mark.parametrize(
    ("errors", "calls", "result"),
    [
        ((NOT_SENT, NOT_SENT), 3, "done"),
        ((R429,), 2, "done"),
        ((UNKNOWN,), 1, UNKNOWN),
        ((R500,), 1, R500),
        ((NOT_SENT, UNKNOWN), 2, UNKNOWN),
        ((NOT_SENT, NOT_SENT, NOT_SENT), 3, NOT_SENT),
        ((R400,), 1, R400),
    ],
)
async def test_retry_decisions(
    errors: tuple[ProviderError, ...], calls: int, result: object
) -> None:
    script = Script(*errors)
    if isinstance(result, ProviderError):
        with pytest.raises(type(result)) as caught:
            await retrying(script, RetryPolicy(attempts=3), deadline=far())
        assert caught.value is result  # the last error, unchanged (not a tenacity RetryError)
    else:
        assert await retrying(script, RetryPolicy(attempts=3), deadline=far()) == result
    assert script.calls == calls


async def test_backoff_waits_when_not_testing(monkeypatch: pytest.MonkeyPatch) -> None:
    resilience.set_testing(no_backoff=False)
    script = Script(NOT_SENT, NOT_SENT)
    waits = await recorded_waits(
        monkeypatch,
        retrying(script, RetryPolicy(attempts=3, initial=0.05, max=0.05), deadline=far()),
    )
    assert script.calls == 3
    assert len(waits) == 2 and all(0.0 <= w <= 0.05 for w in waits), waits  # full jitter


async def test_no_wait_that_would_pass_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    resilience.set_testing(no_backoff=False)
    script = Script(from_status(429, "slow", "p", retry_after=600.0))
    deadline = asyncio.get_running_loop().time() + 60
    with pytest.raises(ProviderError):
        await recorded_waits(
            monkeypatch, retrying(script, RetryPolicy(attempts=3), deadline=deadline)
        )
    assert script.calls == 1  # gave up at once: no wait (it would have been 600 s)


async def test_retry_after_is_the_wait() -> None:
    resilience.set_testing(no_backoff=False)
    script = Script(from_status(429, "slow", "p", retry_after=0.3))
    started = time.monotonic()
    policy = RetryPolicy(attempts=2, initial=0, max=0)
    assert await retrying(script, policy, deadline=far()) == "done"
    assert time.monotonic() - started >= 0.3


def test_rate_limiter_requests_per_minute() -> None:
    clock = ManualClock(1000.0)
    limiter = RateLimiter("p", requests_per_minute=2, clock=clock)
    assert limiter.acquire() == 0.0
    assert limiter.acquire() == 0.0
    assert limiter.acquire() == pytest.approx(30.0)  # one request refills every 30 s
    clock.now += 30
    assert limiter.acquire() == 0.0


def test_rate_limiter_tokens_per_minute_and_budget() -> None:
    clock = ManualClock(1000.0)
    limiter = RateLimiter("p", tokens_per_minute=600, clock=clock)
    assert limiter.acquire(500) == 0.0
    assert limiter.acquire(200) == pytest.approx(10.0)  # 100 missing at 10 tokens/s
    with pytest.raises(NotSent, match="rate limited locally"):
        limiter.acquire(200, budget=5.0)
    with pytest.raises(NotSent, match="exceed the per-minute limit"):
        limiter.acquire(601)
    limiter.settle(estimated=500, actual=100)  # 400 given back
    assert limiter.acquire(200) == 0.0


async def test_rate_limiter_admit_sleeps_then_admits() -> None:
    resilience.set_testing(no_backoff=False)
    limiter = RateLimiter("p", requests_per_minute=600)  # one every 0.1 s after the burst
    for _ in range(600):
        limiter.acquire()
    started = time.monotonic()
    await limiter.admit(budget=1.0)
    assert 0.05 <= time.monotonic() - started < 30.0  # a wait, not a minute-long refill


async def test_bulkhead_counts_and_limits() -> None:
    bulkhead = Bulkhead(2)
    peak = 0

    async def work() -> None:
        nonlocal peak
        async with bulkhead.hold():
            peak = max(peak, bulkhead.in_flight)
            await asyncio.sleep(0.01)

    await asyncio.gather(*(work() for _ in range(8)))
    assert peak == 2
    assert bulkhead.in_flight == 0
    with pytest.raises(ValueError):
        Bulkhead(0)
