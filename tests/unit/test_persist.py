"""`jobrouter.persist`: which store write is tried again, how many times, with what wait, and what
the log says of each retry. The mutmut run of this module (docs/testing.md) left these
unexamined: the store tests that retry run with the backoff off, and none counted the tries."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from tenacity import AsyncRetrying, RetryCallState

from jobrouter import persist as persist_module
from jobrouter.errors import StoreError
from jobrouter.persist import persist


@pytest.fixture(autouse=True)
def _backoff_restored() -> Iterator[None]:
    yield
    persist_module.set_testing(no_backoff=False)


class Write:
    """A write that fails with `errors` in turn, then returns "done"; counts its tries."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.tries = 0

    async def __call__(self) -> str:
        self.tries += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


async def test_a_write_the_database_refuses_is_tried_once() -> None:
    """Not transient: it fails the same way every time, so it is raised at once.
    Mutant `persist` 1 (`attempts <= 1 and not is_transient(...)`: a second try) fails."""
    write = Write(ValueError("a constraint"))
    with pytest.raises(ValueError, match="a constraint"):
        await persist(write)
    assert write.tries == 1


async def test_a_single_attempt_is_not_tried_again() -> None:
    """`attempts=1`: a transient error is raised after the one try.
    Mutant `persist` 2 (`attempts < 1`: a second try) fails."""
    persist_module.set_testing()
    write = Write(StoreError("lost"))
    with pytest.raises(StoreError):
        await persist(write, attempts=1)
    assert write.tries == 1


async def test_each_retry_is_logged_with_its_try_and_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two transient failures, then success: the answer comes back, and the log names each
    failed try with its error (an operator reads it to see the store flapping).
    Mutants `_warn` 1-5 (the error read from nowhere, or never) fail; `set_testing` 2
    (`_no_backoff = None`) is killed by the next test."""
    persist_module.set_testing()
    caplog.set_level(logging.WARNING, logger="jobrouter.store")
    write = Write(StoreError("first loss"), StoreError("second loss"))
    assert await persist(write) == "done"
    assert write.tries == 3
    said = [r.getMessage() for r in caplog.records if r.name == "jobrouter.store"]
    assert said == [
        "store write failed (try 1), trying again: first loss",
        "store write failed (try 2), trying again: second loss",
    ]


def state_at(try_number: int) -> RetryCallState:
    state = RetryCallState(AsyncRetrying(), None, (), {})
    state.attempt_number = try_number
    return state


def test_set_testing_turns_every_wait_to_zero_and_back() -> None:
    """Mutants `set_testing` 1 and 2 (the switch's default or value lost) fail the first
    assertion; `_wait` 2 (`... or True`: never a wait) fails the last."""
    persist_module.set_testing()
    assert [persist_module._wait(state_at(n)) for n in range(1, 8)] == [0.0] * 7
    persist_module.set_testing(no_backoff=False)
    waits = [persist_module._wait(state_at(6)) for _ in range(20)]
    assert all(0.0 <= wait <= 2.0 for wait in waits)  # full jitter, capped at max=2 s
    assert any(wait > 0.0 for wait in waits)


def test_the_wait_grows_with_the_try_number() -> None:
    """Full jitter: the n-th wait is drawn from [0, min(2, 0.05 * 2**n)] s.
    Mutants `_wait` 4 and 5 (`float(None)`, `_backoff(None)`: a TypeError) fail."""
    persist_module.set_testing(no_backoff=False)
    first = [persist_module._wait(state_at(1)) for _ in range(50)]
    assert all(0.0 <= wait <= 0.1 for wait in first)
    late = [persist_module._wait(state_at(10)) for _ in range(50)]
    assert max(late) > 0.1  # drawn up to 2 s: 50 draws all under 0.1 is a 1e-65 event


async def test_two_attempts_are_a_try_and_one_retry() -> None:
    """Mutant `persist` 3 (`attempts <= 2`: no retry at two) fails."""
    persist_module.set_testing()
    write = Write(StoreError("lost"))
    assert await persist(write, attempts=2) == "done"
    assert write.tries == 2


async def test_a_refusal_after_a_transient_error_ends_the_retries() -> None:
    """A transient error, then one the database refuses: raised at its try, not tried again.
    Mutant `persist` 11 (the retry's `retry_if_exception(is_transient)` dropped: tenacity
    retries anything) fails."""
    persist_module.set_testing()
    write = Write(StoreError("lost"), ValueError("a constraint"), ValueError("again"))
    with pytest.raises(ValueError, match="a constraint"):
        await persist(write)
    assert write.tries == 2
