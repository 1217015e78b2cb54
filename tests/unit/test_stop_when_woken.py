"""A worker stops when told to, even in the loop turns right after its poller was woken.

The hang of a `jobrouter worker` that ignored SIGTERM: the poller waited for its wake-up with
`asyncio.wait_for(event.wait(), poll_s)`, which on Python 3.11 returns the event's result when
the task is cancelled between the event being set and the task resuming, and the cancellation
is lost. The poller went on polling, `Engine.stop` waited for it forever, and nothing after it
(leader, listener, pool) was ever closed. Whatever wakes the poller (`Engine.wake`: a job
reopened, leases expired) lets a SIGTERM land there."""

from __future__ import annotations

import asyncio
from pathlib import Path

from jobrouter import Router
from jobrouter.aio import wait_event
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from tests.support.fakes import FakeProvider

GUARD_S = 60.0  # a guard against a hang only: every wait below ends on an event


class Watched(asyncio.Event):
    """The poller's wake-up event, saying each time the poller begins to wait on it (and
    whether it was set then: if not, the poller is about to sleep on it)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting: asyncio.Queue[bool] = asyncio.Queue()

    async def wait(self) -> bool:  # type: ignore[override]  # Event.wait is Literal[True]
        self.waiting.put_nowait(self.is_set())
        return await super().wait()


async def test_a_close_right_after_the_poller_is_woken_stops_the_poller(
    tmp_path: Path,
) -> None:
    cfg = RouterConfig(
        tasks={"t": TaskConfig(providers=["a"], side_effects="none", certification="none")},
        engine=EngineConfig(poll_interval=30.0),  # the poller waits on its event, not a timer
    )
    router = await Router.open(
        f"sqlite:///{tmp_path / 'r.db'}", cfg, providers={"a": FakeProvider("a")}, run_workers=True
    )
    engine = router.engine
    assert engine is not None
    [poll] = [loop for loop in engine._loops if loop.get_name() == "jobrouter-poll"]
    old, wake = engine._wake, Watched()
    engine._wake = wake
    old.set()  # a poller waiting on the old event claims, then waits on this one
    async with asyncio.timeout(GUARD_S):
        while await wake.waiting.get():  # set: the poller goes through without sleeping
            pass
    engine.wake()  # the sleeping poller is woken, and stopped in the same loop turn
    closing = asyncio.create_task(router.close())
    went_on = asyncio.create_task(wake.waiting.get())  # the poller waits again: not stopped
    done, _ = await asyncio.wait(
        {poll, went_on}, timeout=GUARD_S, return_when=asyncio.FIRST_COMPLETED
    )
    try:
        assert poll in done, "the poller went on after the stop cancelled it"
        assert poll.cancelled()
        async with asyncio.timeout(GUARD_S):
            await closing
    finally:
        went_on.cancel()
        poll.cancel()  # on the code before the fix: a second cancel stops it, close ends
        await asyncio.gather(closing, went_on, return_exceptions=True)


async def test_wait_event_passes_on_a_cancel_that_comes_with_the_event() -> None:
    asked = []
    for turns in range(4):  # a cancel 0-3 loop turns after the event was set
        event = asyncio.Event()
        waiter = asyncio.create_task(wait_event(event, 30.0))
        await asyncio.sleep(0)  # the waiter waits
        event.set()
        for _ in range(turns):
            await asyncio.sleep(0)
        asked.append(waiter.cancel())  # False: the waiter had already returned
        await asyncio.gather(waiter, return_exceptions=True)
        assert waiter.cancelled() == asked[-1], f"a cancel {turns} turns after the event lost"
    assert asked[0]  # in the turn of the event, the waiter has not returned yet


async def test_wait_event_says_whether_the_event_came() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.0) is False
    event.set()
    assert await wait_event(event, 30.0) is True
