"""The one backoff of the product: every retry's wait, the Retry-After it honours, one test switch.

Who uses it: store writes (`jobrouter.persist`), provider calls
(`jobrouter.providers.resilience`), both outbox deliverers (`jobrouter.delivery`) and the HTTP
client (`jobrouter.client`). It lives in `providers/`, the bottom layer, so that all of them can
import it (nothing imports upward).

- The formula: after the n-th failure the wait is uniform in [0, min(cap, initial * 2**(n-1))]
  ("full jitter" over a capped exponential: retries of many callers spread instead of marching
  in step). The count of tries is bounded by each caller (tenacity's stop, or a row's tries).
- Retry-After: `parse_retry_after` reads both forms of the header, delta-seconds and an HTTP
  date; `Backoff.wait_s` waits at least what the server asked.
- `set_testing()` turns every wait of every retry into zero, as `stamina.set_testing` does, so
  tests exercise the retry decisions at full speed.

tenacity runs the retries where there is a loop to run (`tenacity_wait` makes its `wait` from a
`Backoff`); the outbox has no loop (its next try is a due time in a row), so it asks `wait_s`.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC

from tenacity import RetryCallState

Jitter = Callable[[float], float]
"""Picks a wait in [0, bound]; tests pass `lambda bound: bound` to know the waits."""

RETRY_AFTER_CEILING_S = 366 * 86_400.0
"""A Retry-After longer than a year is read as a year: still past any budget period (the router
answers a spent monthly budget with the seconds until the month ends), and finite, so an
"inf" or "1e400" never reaches a sleep or a due time."""

# 2.0 ** 1000 is still a float; past it the bound is the cap for any initial above 1e-290.
_MAX_EXPONENT = 1000

_no_backoff = False


def set_testing(*, no_backoff: bool = True) -> None:
    """Switch every retry wait of the product to zero (tests only), and back with False."""
    global _no_backoff
    _no_backoff = no_backoff


def effective_wait(seconds: float) -> float:
    """`seconds`, or zero under `set_testing()`: for a wait that is not a backoff but must obey
    the switch too (the local rate limiter's sleep)."""
    return 0.0 if _no_backoff else seconds


def full_jitter(bound: float) -> float:
    """A uniformly random wait in [0, bound]."""
    return random.uniform(0.0, bound)


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter, and how far a server's Retry-After may stretch it.

    `retry_after_cap`: the longest Retry-After honoured; None honours any (up to
    `RETRY_AFTER_CEILING_S`), for a caller whose deadline stops the retries instead."""

    initial: float
    cap: float
    retry_after_cap: float | None

    def bound(self, failures: int) -> float:
        """The longest wait after the `failures`-th failure: min(cap, initial * 2**(failures-1))."""
        exponent = min(max(failures - 1, 0), _MAX_EXPONENT)
        return min(self.cap, self.initial * 2.0**exponent)

    def wait_s(
        self, failures: int, retry_after: float | None = None, jitter: Jitter = full_jitter
    ) -> float:
        """Seconds to wait after the `failures`-th failure: the jittered backoff, or the
        server's Retry-After when that is longer (up to `retry_after_cap`); zero when testing."""
        if _no_backoff:
            return 0.0
        wait = jitter(self.bound(failures))
        if retry_after is not None:
            asked = (
                retry_after
                if self.retry_after_cap is None
                else min(retry_after, self.retry_after_cap)
            )
            wait = max(wait, asked)
        return wait


def tenacity_wait(
    backoff: Backoff, retry_after_of: Callable[[BaseException], float | None] | None = None
) -> Callable[[RetryCallState], float]:
    """tenacity's `wait` from `backoff`: `attempt_number` is the failures so far, and
    `retry_after_of` reads the failed try's error for a server's Retry-After."""

    def wait(state: RetryCallState) -> float:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None and outcome.failed else None
        hint = retry_after_of(error) if retry_after_of is not None and error is not None else None
        return backoff.wait_s(state.attempt_number, hint)

    return wait


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header's value, or None when there is no usable hint.

    - delta-seconds ("120", also "1.5"): that many seconds; a negative one is due now (0.0);
    - an HTTP date ("Wed, 21 Oct 2026 07:28:00 GMT"): the seconds from `now` (default the
      wall clock) until then; a date in the past is due now (0.0); a date without a zone is UTC;
    - longer than `RETRY_AFTER_CEILING_S` (a year; infinity included): the ceiling;
    - missing, empty, NaN or anything else: None (the caller's own backoff applies)."""
    if value is None or not value.strip():
        return None
    seconds = _number(value)
    if seconds is None:
        seconds = _until_date(value, time.time() if now is None else now)
    return None if seconds is None else _bounded(seconds)


def parse_retry_after_ms(value: str | None) -> float | None:
    """Seconds from a `retry-after-ms` header (OpenAI's, milliseconds); the rules of
    `parse_retry_after` for negative, too large and garbage values. No date form."""
    milliseconds = _number(value) if value is not None else None
    return None if milliseconds is None else _bounded(milliseconds / 1000.0)


def _number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return None if math.isnan(number) else number


def _until_date(text: str, now: float) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(text)
        if when.tzinfo is None:  # "-0000": the RFC's "UTC, source unknown", not local time
            when = when.replace(tzinfo=UTC)
        return when.timestamp() - now
    except (TypeError, ValueError, IndexError, OverflowError):  # no date, or none a float holds
        return None


def _bounded(seconds: float) -> float:
    return min(max(seconds, 0.0), RETRY_AFTER_CEILING_S)
