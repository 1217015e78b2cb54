"""Process-local resilience for one provider: bulkhead, rate limiter, and the ONE retry layer.

- `Bulkhead`: at most `limit` calls in flight; `in_flight` counts them.
- `RateLimiter`: token buckets for requests and tokens per minute. `acquire` never sleeps: it
  admits (returns 0.0) or says how long to wait, and refuses with `NotSent` when that wait is
  beyond the caller's budget. `admit` is the sleeping loop around it.
- `retrying`: tenacity with the product's one backoff (`jobrouter.providers.backoff`: full
  jitter, capped exponential), bounded attempts, never past the deadline. It retries exactly the
  errors whose `retryable` flag `jobrouter.providers.classify` set (the provider provably did not
  act and may accept the request later: a refused connection, a 429), waiting at least the
  Retry-After when given, however long: the deadline, not a cap, stops it. It never re-derives
  that from status codes.

`set_testing(no_backoff=True)` is `jobrouter.providers.backoff.set_testing`, re-exported: every
retry wait and rate-limit sleep becomes zero. The circuit breaker is not here: its state lives
in the router's store so that every worker sees it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base

from jobrouter.providers.backoff import Backoff, effective_wait, set_testing, tenacity_wait
from jobrouter.providers.config import RetryPolicy
from jobrouter.providers.errors import NotSent, ProviderError

T = TypeVar("T")


class Bulkhead:
    """At most `limit` concurrent calls; the slot is held only while a request is in flight."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("bulkhead limit must be >= 1")
        self.limit = limit
        self.in_flight = 0
        self._semaphore = asyncio.Semaphore(limit)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        async with self._semaphore:
            self.in_flight += 1
            try:
                yield
            finally:
                self.in_flight -= 1


class _Bucket:
    def __init__(self, per_minute: int, clock: Callable[[], float]) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self._clock = clock
        self._stamp = clock()

    def refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now

    def wait_for(self, amount: float) -> float:
        return 0.0 if self.level >= amount else (amount - self.level) / self.rate


class RateLimiter:
    """Requests-per-minute and tokens-per-minute token buckets (either may be None: unlimited)."""

    def __init__(
        self,
        provider: str,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.provider = provider
        self._requests = _Bucket(requests_per_minute, clock) if requests_per_minute else None
        self._tokens = _Bucket(tokens_per_minute, clock) if tokens_per_minute else None

    def acquire(self, tokens: int = 0, *, budget: float | None = None) -> float:
        """0.0 when admitted (capacity taken), else the seconds to wait before trying again.

        Raises `NotSent` when the wait exceeds `budget` seconds, or when `tokens` is more than
        a whole minute's allowance (it could never be admitted).
        """
        buckets = [
            (b, a)
            for b, a in ((self._requests, 1.0), (self._tokens, float(tokens)))
            if b is not None
        ]
        for bucket, amount in buckets:
            if amount > bucket.capacity:
                raise NotSent(
                    f"rate limited locally: {tokens} tokens exceed the per-minute "
                    f"limit {int(bucket.capacity)}",
                    provider=self.provider,
                    retryable=False,
                    counts_against_health=False,
                )
            bucket.refill()
        wait = max((bucket.wait_for(amount) for bucket, amount in buckets), default=0.0)
        if wait > 0.0:
            if budget is not None and wait > budget:
                raise NotSent(
                    f"rate limited locally: next slot in {wait:.2f}s, budget "
                    f"{max(budget, 0.0):.2f}s",
                    provider=self.provider,
                    counts_against_health=False,
                )
            return wait
        for bucket, amount in buckets:
            bucket.level -= amount
        return 0.0

    def settle(self, estimated: int, actual: int) -> None:
        """Charge (or give back) the difference between estimated and actual tokens."""
        if self._tokens is not None:
            self._tokens.refill()
            self._tokens.level = min(
                self._tokens.capacity, self._tokens.level - (actual - estimated)
            )

    async def admit(self, tokens: int = 0, *, budget: float) -> None:
        """Wait until admitted; `NotSent` if that would take longer than `budget` seconds."""
        started = time.monotonic()
        while True:
            remaining = budget - (time.monotonic() - started)
            wait = self.acquire(tokens, budget=remaining)
            if wait == 0.0:
                return
            await asyncio.sleep(effective_wait(wait))


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retryable


def _retry_after(exc: BaseException) -> float | None:
    return exc.retry_after if isinstance(exc, ProviderError) and exc.retryable else None


class _StopBeforeDeadline(stop_base):
    """Stop when the upcoming wait would end at or after the deadline (a `loop.time()`)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        now = asyncio.get_running_loop().time()
        return now + retry_state.upcoming_sleep >= self.deadline


async def retrying(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    deadline: float,
) -> T:
    """Run `call` with our one retry layer. `deadline` is an absolute `loop.time()`.

    Raises the last error unchanged when attempts run out, when the next wait would pass the
    deadline, or at once for errors that must not be retried.

    The first try runs before tenacity is set up (about 40 us a call, and almost every call
    succeeds first time); after a retryable failure tenacity takes over, and its first attempt
    replays that failure instead of calling again, so waits and stops are exactly tenacity's.
    """
    try:
        return await call()
    except Exception as exc:
        if policy.attempts <= 1 or not _retryable(exc):
            raise
        first_failure: Exception | None = exc

    async def replay_then_call() -> T:
        nonlocal first_failure
        if first_failure is not None:
            failure, first_failure = first_failure, None
            raise failure
        return await call()

    backoff = Backoff(initial=policy.initial, cap=policy.max, retry_after_cap=None)
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(_retryable),
        stop=stop_after_attempt(policy.attempts) | _StopBeforeDeadline(deadline),
        wait=tenacity_wait(backoff, _retry_after),
        reraise=True,
    ):
        with attempt:
            return await replay_then_call()
    raise AssertionError("unreachable: tenacity either returns or reraises")  # pragma: no cover


__all__ = ["Bulkhead", "RateLimiter", "retrying", "set_testing"]
