"""Writing an outcome through a store that fails for a moment: the ONE place that retries
store writes (tenacity: full-jitter exponential backoff, bounded by count and time).

Only idempotent writes go through here: each of `finish_attempt_cas`, `finish_attempt` and
`create_and_start` reads its rows under the job's lock first, so a retry whose first try did
commit (its acknowledgement lost) sees its own work and reports it, never writes it twice.
The wait is the product's one backoff (`jobrouter.providers.backoff`); its `set_testing()`,
re-exported here for the tests that switch this module's waits off, makes every wait zero.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
)

from jobrouter.providers.backoff import Backoff, set_testing, tenacity_wait
from jobrouter.store.transient import is_transient

T = TypeVar("T")
log = logging.getLogger("jobrouter.store")

ATTEMPTS = 8
BUDGET_S = 30.0  # a worker keeps its claim (and the attempt its lease) far longer than this
# A store error carries no Retry-After; the first wait is at most 50 ms, the longest 2 s.
_wait = tenacity_wait(Backoff(initial=0.05, cap=2.0, retry_after_cap=None))


def _warn(state: RetryCallState) -> None:
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    # tenacity counts from its own first try, which is this write's second (persist's first
    # try runs before tenacity is set up).
    try_number = state.attempt_number + 1
    log.warning("store write failed (try %d), trying again: %s", try_number, error)


async def persist(
    write: Callable[[], Awaitable[T]], *, attempts: int = ATTEMPTS, budget_s: float = BUDGET_S
) -> T:
    """`await write()`, tried again on transient store errors; the last error if none works.

    The first try runs before tenacity is set up: almost every write succeeds at once, and
    this is the hot path of every job."""
    try:
        return await write()
    except Exception as exc:
        if attempts <= 1 or not is_transient(exc):
            raise
        log.warning("store write failed (try 1), trying again: %s", exc)
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(attempts - 1) | stop_after_delay(budget_s),
        wait=_wait,
        before_sleep=_warn,
        reraise=True,
    ):
        with attempt:
            return await write()
    raise AssertionError("unreachable: tenacity either returns or reraises")  # pragma: no cover


__all__ = ["ATTEMPTS", "BUDGET_S", "persist", "set_testing"]
