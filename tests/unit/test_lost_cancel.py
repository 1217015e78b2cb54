"""A loop that goes on after errors stops when told to, even when a library lost the cancel.

The hang of CI's NATS chaos test (a relay "killed" by a cancel, the kill waiting forever):
nats-py's `fetch` waits in `next_msg` on `asyncio.wait_for`, which on Python 3.11 returns the
message when the cancel comes in the loop turn after the message arrived. The consumer never
saw a `CancelledError`, fetched again, and the task group of the delivery waited for it for
ever. `Task.cancelling()` still counts the request: `stop_if_cancelled` at a loop's head reads
it. The fakes here lose the cancel the same way (they return as if the result had come first).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jobrouter.aio import stop_if_cancelled
from jobrouter.bus_nats import BusSettings, NatsDelivery
from jobrouter.delivery import DeliverySettings
from jobrouter.outbox import OutboxDeliverer
from jobrouter.store import SqlStore, open_store

GUARD_S = 60.0  # a guard against a hang only: every wait below ends on an event


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    opened = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        yield opened
    finally:
        await opened.close()


def nats_delivery(store: SqlStore) -> NatsDelivery:
    return NatsDelivery(store.outbox, {}, DeliverySettings(), BusSettings(url="nats://unused"))


class CancelLosingCall:
    """An awaitable call whose first run loses the cancel that ends its wait, as `wait_for`
    does when the result came first; every later run says the loop went on, then waits."""

    def __init__(self, result: Any = None, error: Exception | None = None) -> None:
        self.result = result
        self.error = error
        self.waiting = asyncio.Event()  # the first run waits: cancel now
        self.went_on = asyncio.Event()  # a second run: the loop did not stop

    async def __call__(self, *args: object, **kwargs: object) -> Any:
        if self.waiting.is_set():
            self.went_on.set()
            await asyncio.Event().wait()
        self.waiting.set()
        # the cancel lost: the caller gets a result as if it had come first
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        if self.error is not None:
            raise self.error
        return self.result


async def stopped_by_one_cancel(loop: asyncio.Task[None], call: CancelLosingCall) -> None:
    async with asyncio.timeout(GUARD_S):
        await call.waiting.wait()
    loop.cancel()
    went_on = asyncio.create_task(call.went_on.wait())
    done, _ = await asyncio.wait(
        {loop, went_on}, timeout=GUARD_S, return_when=asyncio.FIRST_COMPLETED
    )
    try:
        assert loop in done, "the loop went on after the cancel"
        assert loop.cancelled()
    finally:
        went_on.cancel()
        loop.cancel()  # without the fix a second cancel (not lost this time) ends it
        await asyncio.gather(loop, went_on, return_exceptions=True)


class Subscription:
    def __init__(self, fetch: CancelLosingCall) -> None:
        self.fetch = fetch


async def test_the_nats_consumer_stops_on_a_cancel_its_fetch_lost(store: SqlStore) -> None:
    """... and leaves the messages that fetch brought unhandled (not acked: the stream gives
    them to a consumer that goes on), rather than POST them after its stop."""
    metadata = SimpleNamespace(sequence=SimpleNamespace(stream=1), num_delivered=1)
    fetch = CancelLosingCall(result=[SimpleNamespace(metadata=metadata)])
    delivery = nats_delivery(store)
    handled: list[object] = []

    async def handle(msg: object) -> None:
        handled.append(msg)

    delivery._handle = handle  # type: ignore[method-assign,assignment]
    consume = asyncio.create_task(delivery._consume(Subscription(fetch)))  # type: ignore[arg-type]
    await stopped_by_one_cancel(consume, fetch)
    assert handled == []


async def test_the_nats_consumer_stops_on_a_cancel_its_fetch_turned_into_an_error(
    store: SqlStore,
) -> None:
    """nats-py's `next_msg` raises `ConnectionClosedError` for a cancel on a closed connection,
    which the consumer takes for a lost connection (it waits, then fetches again)."""
    import nats.errors

    fetch = CancelLosingCall(error=nats.errors.ConnectionClosedError())
    delivery = nats_delivery(store)
    consume = asyncio.create_task(delivery._consume(Subscription(fetch)))  # type: ignore[arg-type]
    await stopped_by_one_cancel(consume, fetch)


async def test_the_nats_relay_stops_on_a_cancel_its_claim_lost(store: SqlStore) -> None:
    claim = CancelLosingCall(result=[])
    delivery = nats_delivery(store)
    delivery.store.bus.claim_unpublished = claim  # type: ignore[method-assign]
    delivery.wake()  # no wait for poll_s between the claims: a second claim comes at once
    relay = asyncio.create_task(delivery._relay(None))  # type: ignore[arg-type]
    await stopped_by_one_cancel(relay, claim)


async def test_stop_if_cancelled_raises_only_after_a_cancel() -> None:
    swallowed = CancelLosingCall(result="answer")

    async def loop_turn() -> str:
        stop_if_cancelled()  # not cancelled yet: nothing raised
        answer: str = await swallowed()
        stop_if_cancelled()
        return answer

    turn = asyncio.create_task(loop_turn())
    async with asyncio.timeout(GUARD_S):
        await swallowed.waiting.wait()
    turn.cancel()
    await asyncio.gather(turn, return_exceptions=True)
    assert turn.cancelled()


async def test_the_nats_delivery_stops_on_a_cancel_its_setup_turned_into_an_error(
    store: SqlStore,
) -> None:
    """A connect or subscribe that lost the cancel and failed is retried by `_run` (after its
    backoff), unless the loop reads the cancel first."""
    serve = CancelLosingCall(error=RuntimeError("connection closed"))
    delivery = nats_delivery(store)
    delivery._serve = serve  # type: ignore[method-assign]
    run = asyncio.create_task(delivery._run())
    await stopped_by_one_cancel(run, serve)


async def test_the_database_outbox_stops_on_a_cancel_its_claim_lost(store: SqlStore) -> None:
    deliver_due = CancelLosingCall(result=DeliverySettings().batch)  # a full batch: at once
    sender = OutboxDeliverer(store.outbox, {}, DeliverySettings())
    sender.deliver_due = deliver_due  # type: ignore[method-assign]
    run = asyncio.create_task(sender._run())
    try:
        await stopped_by_one_cancel(run, deliver_due)
    finally:
        await sender.stop()
