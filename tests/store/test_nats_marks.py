"""What the NATS delivery (router/bus_nats.py) writes on the outbox rows, against the real NATS
JetStream server on 127.0.0.1:4222, each backend: an event whose publish failed is not marked
published (it is published again at the next round), and an event whose delivery is recorded
is never POSTed again when its message comes back because the ack was never sent. The faults
are at nats-py's edge (`JetStreamContext.publish`, `Msg.ack_sync`); the crashes of the chaos
suite (tests/chaos/test_nats_delivery.py) cut whole batches or come before the record."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import nats.errors
import pytest
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from jobrouter.bus_nats import MSG_ID_HEADER, BusSettings, NatsDelivery
from jobrouter.delivery import DeliverySettings
from jobrouter.store import SqlStore
from jobrouter.webhook import Webhook
from tests.support.nats_bus import delivering, own_stream, stream_state
from tests.support.outbox_jobs import succeeded_events
from tests.support.waiting import until
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.nats
WAIT_S = 90.0  # a guard only
SETTINGS = DeliverySettings(
    max_tries=5,
    backoff_initial_s=0.05,
    backoff_max_s=0.2,
    timeout_s=5.0,
    claim_s=1.0,
    poll_s=0.05,
    batch=16,
)


@pytest.fixture
async def bus() -> AsyncIterator[BusSettings]:
    async with own_stream("jrmarks", ack_wait_s=1.0, publish_timeout_s=2.0) as settings:
        yield settings


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    async with WebhookReceiver().running() as running:
        yield running


def delivery(store: SqlStore, receiver: WebhookReceiver, bus: BusSettings) -> NatsDelivery:
    hooks = {"shop": Webhook("shop", receiver.url, b"s3cret")}
    return NatsDelivery(store.outbox, hooks, SETTINGS, bus, jitter=lambda bound: bound)


async def published_at(store: SqlStore, event_id: str) -> float | None:
    row = await store.connector.fetchone(
        "SELECT published_at FROM outbox WHERE id = :id", {"id": event_id}
    )
    assert row is not None
    return None if row["published_at"] is None else float(row["published_at"])


async def delivered(store: SqlStore, ids: Iterable[str]) -> bool:
    rows = [await store.outbox.outbox_event(event_id) for event_id in ids]
    return all(row is not None and row.delivered_at is not None for row in rows)


async def test_an_event_whose_publish_failed_is_not_marked_and_is_relayed_later(
    store: SqlStore,
    receiver: WebhookReceiver,
    bus: BusSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One batch of five; the publish of one fails (no PubAck). The mark of that batch names
    the other four only; the fifth is published at a later round and delivered, once.
    mutants: the mark naming every event of the batch (`ok` ignored), and `_publish` answering
    True after a failure, each seen failing on both backends."""
    ids = [event.id for event in await succeeded_events(store, 5)]
    failing = ids[2]
    real_publish: Callable[..., Awaitable[Any]] = JetStreamContext.publish
    failed = asyncio.Event()

    async def publish(self: JetStreamContext, *args: Any, **kwargs: Any) -> Any:
        if kwargs["headers"][MSG_ID_HEADER] == failing and not failed.is_set():
            failed.set()
            raise nats.errors.TimeoutError
        return await real_publish(self, *args, **kwargs)

    monkeypatch.setattr(JetStreamContext, "publish", publish)
    marks: list[list[str]] = []
    real_mark = store.outbox.bus.outbox_published

    async def mark(event_ids: Iterable[str]) -> int:
        named = list(event_ids)
        marks.append(named)
        return await real_mark(named)

    monkeypatch.setattr(store.outbox.bus, "outbox_published", mark)
    async with delivering(delivery(store, receiver, bus)):
        await until(lambda: marks, "the first batch marked")
        assert failed.is_set()
        assert sorted(marks[0]) == sorted(set(ids) - {failing})
        await until(lambda: delivered(store, ids), "delivery of every event")
    assert [failing] in marks[1:]  # published again, at a round of its own
    assert await published_at(store, failing) is not None
    assert receiver.delivered_ids == set(ids)
    assert len(receiver.requests) == len(ids)


async def kill(running: NatsDelivery) -> None:
    """Die without a clean stop: the tasks end where they are, nothing more is acked."""
    main = running._main
    assert main is not None
    main.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await main
    running._main = None
    if running._nc is not None:
        await running._nc.close()
        running._nc = None
    await running.sender.stop()


async def test_a_consumer_killed_between_the_record_and_the_ack_does_not_post_again(
    store: SqlStore,
    receiver: WebhookReceiver,
    bus: BusSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Consumer A gets the 2xx, records the delivery, and dies in its ack (which never reaches
    the server). After ack_wait the stream redelivers the message to B, which reads the row
    (delivered) and acks it without a request: the receiver saw one POST. The positive signal
    that B handled the redelivery is the stream emptied (work queue: an acked message goes).
    mutant: the `row.delivered_at is not None` check removed from `_deliver`, seen failing on
    both backends (a second POST)."""
    (event,) = await succeeded_events(store, 1)
    real_ack: Callable[..., Awaitable[Any]] = Msg.ack_sync
    in_ack = asyncio.Event()

    async def ack_sync(self: Msg, *args: Any, **kwargs: Any) -> Any:
        if not in_ack.is_set():
            in_ack.set()
            await asyncio.Event().wait()  # A dies here
        return await real_ack(self, *args, **kwargs)

    monkeypatch.setattr(Msg, "ack_sync", ack_sync)
    first = delivery(store, receiver, bus)
    first.start()
    async with asyncio.timeout(WAIT_S):
        await in_ack.wait()
    await kill(first)
    assert await delivered(store, [event.id])

    async def stream_empty() -> bool:
        return (await stream_state(bus)).messages == 0

    async with delivering(delivery(store, receiver, bus)):
        await until(stream_empty, "the redelivered message acked")
    assert [request.event_id for request in receiver.requests] == [event.id]
