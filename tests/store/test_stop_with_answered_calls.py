"""A driver that lets go of its job (the router closing, or the job settled by another attempt)
stops the calls still in flight, but never one whose provider has answered: that answer is
being recorded, and cancelling the record would leave the attempt `started` (later a false
`unknown`, the answer lost: I7). The record is held at the store's edge (a wrapper around
`finish_attempt_cas`) while the driver stops; each backend."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from jobrouter import Router
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from jobrouter.models import Attempt
from jobrouter.states import AttemptState, JobState
from jobrouter.store import open_store
from jobrouter.store.attempts import AttemptWrites
from tests.support.fakes import FakeProvider, Step
from tests.support.waiting import until

SETTLE_S = 60.0  # a guard against a hang only
# Loop turns the held record gives the driver once it lets go: it cancels its calls within a
# few (nothing it does on the way awaits I/O); a cancel that came would hit the held record.
TURNS = 50

Finish = Callable[..., Awaitable[Any]]


def engine() -> EngineConfig:
    return EngineConfig(poll_interval=30.0, sweep_interval=30.0, claim=30.0, lease=30.0)


async def turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def driver_of() -> asyncio.Task[Any]:
    """The job's driver (router/engine.py names its task after the job)."""
    return next(t for t in asyncio.all_tasks() if t.get_name().startswith("job-"))


async def until_cancelling(driver: asyncio.Task[Any]) -> None:
    """Until the router's close has cancelled the driver."""
    await until(driver.cancelling, "the close cancelling the driver", every=0.01)


def hold_finish(
    monkeypatch: pytest.MonkeyPatch, hold: Callable[[int], Awaitable[None]]
) -> asyncio.Event:
    """Every `finish_attempt_cas` awaits `hold(n)` first (n: 0 for the first record, ...).
    The event returned is set when the first record is over, written or cancelled."""
    real: Finish = AttemptWrites.finish_attempt_cas
    calls = 0
    first_over = asyncio.Event()

    async def held(self: AttemptWrites, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        n, calls = calls, calls + 1
        try:
            await hold(n)
            return await real(self, *args, **kwargs)
        finally:
            if n == 0:
                first_over.set()

    monkeypatch.setattr(AttemptWrites, "finish_attempt_cas", held)
    return first_over


async def attempts_of(db_url: str, job_id: str) -> tuple[JobState, list[Attempt]]:
    store = await open_store(db_url)
    try:
        job = await store.jobs.get_job(job_id)
        assert job is not None
        return job.state, await store.jobs.list_attempts(job_id)
    finally:
        await store.close()


async def test_a_close_lets_an_answer_being_recorded_be_recorded(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mutant: `_stop_in_flight` cancels answered calls too (then the `book.answered` skip
    removed, now `CallPhase.stoppable` true for `answered`): the record is cancelled, the
    attempt stays `started`; seen failing on both backends."""
    entered = asyncio.Event()

    async def until_closing(n: int) -> None:
        entered.set()
        await until_cancelling(driver_of())
        await turns(TURNS)

    hold_finish(monkeypatch, until_closing)
    config = RouterConfig(
        tasks={"t": TaskConfig(providers=["a"], attempt_timeout=30.0, certification="none")},
        engine=engine(),
    )
    providers: dict[str, Any] = {"a": FakeProvider("a")}
    async with Router.open(db_url, config, providers=providers) as router:
        job = await router.submit("shop-1", "k1", "t", {"n": 1})
        async with asyncio.timeout(SETTLE_S):
            await entered.wait()
        await router.close()
    state, attempts = await attempts_of(db_url, job.id)
    assert [a.state for a in attempts] == [AttemptState.SUCCEEDED]
    assert state is JobState.SUCCEEDED


def hedged(release_a: asyncio.Event) -> tuple[RouterConfig, dict[str, Any]]:
    task = TaskConfig(
        providers=["a", "b"],
        side_effects="none",
        hedge_after=0.05,
        attempt_timeout=30.0,
        certification="none",
    )
    providers: dict[str, Any] = {
        "a": FakeProvider("a", default=Step(output={"text": "from a"}, release=release_a)),
        "b": FakeProvider("b", default=Step(output={"text": "from b"})),
    }
    return RouterConfig(tasks={"t": task}, engine=engine()), providers


def note_wins(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Set once a record wins the job (beneath `hold_finish`, which wraps it)."""
    real: Finish = AttemptWrites.finish_attempt_cas
    won = asyncio.Event()

    async def noting(self: AttemptWrites, *args: Any, **kwargs: Any) -> Any:
        outcome = await real(self, *args, **kwargs)
        if outcome.won:
            won.set()
        return outcome

    monkeypatch.setattr(AttemptWrites, "finish_attempt_cas", noting)
    return won


async def test_a_hedge_loser_that_answered_is_recorded_lost_when_the_job_ends(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hedge `b` answers first but its record is held; the primary `a` answers and wins;
    the driver, the job settled, stops the calls in flight. mutant: `_stop_in_flight` cancels
    answered calls too, `b` left `started`; seen failing on both backends."""
    release_a = asyncio.Event()
    a_won = note_wins(monkeypatch)

    async def b_after_a(n: int) -> None:
        if n == 0:  # b's record: let a answer and win first, and the driver see it
            release_a.set()
            await a_won.wait()
            await turns(TURNS)

    b_over = hold_finish(monkeypatch, b_after_a)
    config, providers = hedged(release_a)
    async with Router.open(db_url, config, providers=providers) as router:
        job = await router.submit("shop-1", "k1", "t", {"n": 1})
        async with asyncio.timeout(SETTLE_S):
            await b_over.wait()
        state, attempts = await attempts_of(db_url, job.id)
    assert state is JobState.SUCCEEDED
    assert {a.provider: a.state for a in attempts} == {
        "a": AttemptState.SUCCEEDED,
        "b": AttemptState.LOST,
    }


async def test_a_close_while_the_ended_job_waits_for_a_loser_lets_it_be_recorded(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, and the router closes while the driver waits for b's record: the close's
    cancel must not reach the answered call through that wait. mutant: that wait an
    `asyncio.gather` (the code before this test: the cancel went on to b's record, b left
    `started`), seen failing on both backends; and answered calls stopped as above."""
    release_a = asyncio.Event()
    a_won = note_wins(monkeypatch)

    async def b_until_closed(n: int) -> None:
        if n == 0:
            release_a.set()
            await a_won.wait()
            await until_cancelling(driver_of())
            await turns(TURNS)

    hold_finish(monkeypatch, b_until_closed)
    config, providers = hedged(release_a)
    async with Router.open(db_url, config, providers=providers) as router:
        job = await router.submit("shop-1", "k1", "t", {"n": 1})
        async with asyncio.timeout(SETTLE_S):
            await a_won.wait()
        await turns(TURNS)  # the driver has seen the job end and waits for b's record
        await router.close()
    state, attempts = await attempts_of(db_url, job.id)
    assert state is JobState.SUCCEEDED
    assert {a.provider: a.state for a in attempts} == {
        "a": AttemptState.SUCCEEDED,
        "b": AttemptState.LOST,
    }
