"""Writing an outcome through a store that fails for a moment: the ONE place that retries
store writes (tenacity: full-jitter exponential backoff, bounded by count and time).

Only idempotent writes go through here: each of `finish_attempt_cas`, `finish_attempt` and
`create_and_start` reads its rows under the job's lock first, so a retry whose first try did
commit (its acknowledgement lost) sees its own work and reports it, never writes it twice.
`set_testing()` makes every wait zero, as in `jobrouter.providers.resilience`.
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
from tenacity.wait import wait_random_exponential

from jobrouter.store.transient import is_transient

T = TypeVar("T")
log = logging.getLogger("jobrouter.store")

ATTEMPTS = 8
BUDGET_S = 30.0  # a worker keeps its claim (and the attempt its lease) far longer than this
_backoff = wait_random_exponential(multiplier=0.05, max=2.0)
_no_backoff = False


def set_testing(*, no_backoff: bool = True) -> None:
    """Switch every wait between store retries to zero (tests only)."""
    global _no_backoff
    _no_backoff = no_backoff


def _wait(state: RetryCallState) -> float:
    return 0.0 if _no_backoff else float(_backoff(state))


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
