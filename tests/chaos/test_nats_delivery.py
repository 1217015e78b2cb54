"""Delivery through the real NATS JetStream server on 127.0.0.1:4222 (`[delivery] nats_url`),
on both stores. Each test has a stream, subject and consumer of its own, removed after it.

What is counted: the receiver keeps one copy per event id (its idempotency), so "lost" is an
event id the receiver never saw, and a duplicate is a second request with an id it already had.
The crashes are made in-process: a relay or a consumer "dies" when its task is cancelled in the
middle of a store call, without its clean stop (no claim handed back, no ack sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats
import pytest

from jobrouter.bus_nats import BusSettings, NatsDelivery
from jobrouter.delivery import DeliverySettings
from jobrouter.store import SqlStore
from jobrouter.webhook import SIGNATURE_HEADER, Webhook, verify_signature
from tests.support.backends import db_url as db_url  # a fixture, used by name
from tests.support.backends import store as store  # a fixture, used by name
from tests.support.flaky_proxy import FlakyProxy
from tests.support.nats_bus import NATS_URL, delivering, own_stream, stream_state
from tests.support.outbox_jobs import succeeded_events
from tests.support.waiting import until
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.nats
SECRET = b"s3cret"
WAIT_S = 90.0  # a guard only: each wait ends when the rows say so


@pytest.fixture
async def bus() -> AsyncIterator[BusSettings]:
    async with own_stream("jrtest", ack_wait_s=1.0, publish_timeout_s=2.0) as settings:
        yield settings


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    async with WebhookReceiver().running() as running:
        yield running


SETTINGS = DeliverySettings(
    max_tries=5,
    backoff_initial_s=0.05,
    backoff_max_s=0.2,
    timeout_s=5.0,
    claim_s=1.0,
    poll_s=0.05,
    batch=16,
)


def delivery(
    store: SqlStore, receiver: WebhookReceiver, bus: BusSettings, *, batch: int = SETTINGS.batch
) -> NatsDelivery:
    hooks = {"shop": Webhook("shop", receiver.url, SECRET)}
    settings = dataclasses.replace(SETTINGS, batch=batch)
    return NatsDelivery(store.outbox, hooks, settings, bus, jitter=lambda bound: bound)


async def make_events(store: SqlStore, count: int) -> set[str]:
    return {event.id for event in await succeeded_events(store, count)}


async def all_delivered(store: SqlStore, ids: set[str]) -> None:
    """Wait until every event's row says delivered (the rows are the events waited on)."""

    async def delivered() -> bool:
        rows = [await store.outbox.outbox_event(event_id) for event_id in ids]
        return all(row is not None and row.delivered_at is not None for row in rows)

    await until(delivered, "delivery of every event")


async def all_published(store: SqlStore) -> None:
    await until(lambda: none_unpublished(store), "publish of every event")


async def none_unpublished(store: SqlStore) -> bool:
    row = await store.connector.fetchone(
        "SELECT COUNT(*) AS n FROM outbox WHERE published_at IS NULL", {}
    )
    assert row is not None
    return int(row["n"]) == 0


async def stream_messages(bus: BusSettings) -> int:
    return int((await stream_state(bus)).messages)


def relay_only(running: NatsDelivery) -> NatsDelivery:
    """This one only relays: its consumer stays idle (it would deliver before the test looks)."""

    async def idle(sub: object) -> None:
        await asyncio.Event().wait()

    running._consume = idle  # type: ignore[method-assign]
    return running


def setup_failed(caplog: pytest.LogCaptureFixture) -> bool:
    return any(
        "delivery through NATS" in r.message and "failed" in r.message for r in caplog.records
    )


def duplicates(receiver: WebhookReceiver) -> int:
    return len(receiver.requests) - len(receiver.delivered_ids)


async def kill(delivery: NatsDelivery) -> None:
    """Die without a clean stop: the tasks end where they are, claims stay, nothing is acked."""
    main = delivery._main
    assert main is not None
    main.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await main
    delivery._main = None
    if delivery._nc is not None:
        await delivery._nc.close()
        delivery._nc = None
    await delivery.sender.stop()


def hang_once(target: Any, name: str) -> asyncio.Event:
    """Make `target.name` hang forever on its first call; the event is set when it does."""
    entered = asyncio.Event()
    real: Callable[..., Awaitable[Any]] = getattr(target, name)

    async def hanging(*args: Any, **kwargs: Any) -> Any:
        if not entered.is_set():
            entered.set()
            await asyncio.Event().wait()
        return await real(*args, **kwargs)

    setattr(target, name, hanging)
    return entered


async def test_each_event_reaches_the_webhook_once_signed_with_its_id(
    store: SqlStore, receiver: WebhookReceiver, bus: BusSettings
) -> None:
    ids = await make_events(store, 20)
    async with delivering(delivery(store, receiver, bus)):
        await all_delivered(store, ids)
    assert receiver.delivered_ids == ids
    assert duplicates(receiver) == 0
    for request in receiver.requests:
        assert request.json["id"] == request.event_id
        assert verify_signature(SECRET, request.body, request.headers[SIGNATURE_HEADER.lower()])
    rows = [await store.outbox.outbox_event(event_id) for event_id in ids]
    assert all(row is not None and row.tries == 1 for row in rows)


async def test_a_relay_killed_between_publish_and_mark_loses_nothing_and_sends_nothing_twice(
    store: SqlStore,
    receiver: WebhookReceiver,
    bus: BusSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Relay A publishes the first event and dies before marking it published. Its claim
    expires, relay B publishes it again under the same message id: JetStream drops the copy
    (B logs the duplicate ack; the stream holds one message per event), and the receiver gets
    the event once. (Without the message id the stream holds 6 messages and this fails.)"""
    ids = await make_events(store, 5)
    first = relay_only(delivery(store, receiver, bus))
    published = hang_once(first.store.bus, "outbox_published")
    first.start()
    await asyncio.wait_for(published.wait(), WAIT_S)
    await kill(first)
    del first.store.bus.outbox_published  # the instance patch; B uses the store as it is

    caplog.set_level(logging.INFO, logger="jobrouter.bus")
    async with delivering(relay_only(delivery(store, receiver, bus))):
        await all_published(store)
    assert any("already on the stream" in record.message for record in caplog.records)
    assert await stream_messages(bus) == len(ids)

    async with delivering(delivery(store, receiver, bus)):
        await all_delivered(store, ids)
    assert receiver.delivered_ids == ids
    assert duplicates(receiver) == 0


async def test_a_consumer_killed_before_its_ack_loses_nothing(
    store: SqlStore, receiver: WebhookReceiver, bus: BusSettings
) -> None:
    """Consumer A (one message at a time) gets a 2xx and dies before recording it, so before
    acking: the stream redelivers it after ack_wait and B sends it again, the one duplicate the
    receiver absorbs by its id; nothing else is sent twice."""
    ids = await make_events(store, 5)
    first = delivery(store, receiver, bus, batch=1)
    recorded = hang_once(first.store, "outbox_delivered")
    first.start()
    await asyncio.wait_for(recorded.wait(), WAIT_S)
    await kill(first)
    del first.store.outbox_delivered

    async with delivering(delivery(store, receiver, bus)):
        await all_delivered(store, ids)
    assert receiver.delivered_ids == ids
    assert duplicates(receiver) == 1  # only the event whose 2xx A never recorded


async def test_a_proxy_that_cuts_the_nats_connection_loses_nothing(
    store: SqlStore, receiver: WebhookReceiver, bus: BusSettings
) -> None:
    """The relay and the consumer talk to NATS through a proxy that cuts the connection before
    some requests and instead of some answers (publishes, acks, fetches lost either way)."""
    ids = await make_events(store, 40)
    proxy = FlakyProxy(target_port=4222, cut_before=0.1, drop_after=0.1, seed=19)
    port = await proxy.start()
    flaky = dataclasses.replace(bus, url=f"nats://127.0.0.1:{port}", publish_timeout_s=1.0)
    try:
        async with delivering(delivery(store, receiver, flaky)):
            await all_delivered(store, ids)
            during = dataclasses.replace(proxy.stats)  # the cuts made while delivering
    finally:
        await proxy.close()
    assert during.cut_before + during.dropped_after > 0 and during.connections > 1, during
    assert receiver.delivered_ids == ids  # 0 lost
    # A cut that hides the ack of a recorded delivery costs nothing (the row says delivered:
    # acked without a request). A cut during a request (in-progress signals lost, the message
    # redelivered meanwhile) sends the event again: a duplicate, counted and printed (-s), that
    # the receiver absorbs by its id: the same id with the very same body.
    print(
        f"proxy {during}; requests {len(receiver.requests)}, "
        f"duplicates absorbed by the receiver {duplicates(receiver)}"
    )
    first: dict[str, bytes] = {}
    for request in receiver.requests:
        assert first.setdefault(request.event_id, request.body) == request.body


async def test_bounded_tries_end_in_the_dead_letters_and_a_replay_is_delivered(
    store: SqlStore, bus: BusSettings
) -> None:
    """A receiver that always fails: the `max_tries`-th failed delivery buries the event in
    outbox_dead (same path as the database delivery) and ends the message. Replayed within the
    duplicate window, it is published under a message id of its own and delivered once."""
    async with WebhookReceiver(always_fail=True).running() as failing:
        ids = await make_events(store, 1)
        (event_id,) = ids

        async def terminated() -> bool:
            return await stream_messages(bus) == 0

        async with delivering(delivery(store, failing, bus)):
            await until(store.outbox.dead_letters, "dead letter")
            # The dead letter is written before the message is terminated (a stop in between
            # leaves the message to a redelivery, acked then as dead): wait for the term while
            # the delivery runs. Never terminated, this fails at the ceiling.
            await until(terminated, "the buried message terminated (gone from the stream)")
        (dead,) = await store.outbox.dead_letters()
        assert dead.id == event_id and dead.tries == SETTINGS.max_tries
        assert len(failing.requests) == SETTINGS.max_tries
        assert await stream_messages(bus) == 0  # terminated: no longer redelivered

    assert await store.outbox.replay_dead(event_id)
    async with WebhookReceiver().running() as healed:
        async with delivering(delivery(store, healed, bus)):
            await all_delivered(store, ids)
        assert [request.event_id for request in healed.requests] == [event_id]


async def test_a_webhook_slower_than_ack_wait_is_not_sent_twice(
    store: SqlStore, bus: BusSettings
) -> None:
    """Two processes share the consumer, one event; the receiver answers after 2.5 x ack_wait.
    The in-progress signals of the process working on the message keep the stream from
    redelivering it to the other, idle one, which would send it a second time. (Without them
    this fails with a duplicate.)"""
    async with WebhookReceiver(delay=bus.ack_wait_s * 2.5).running() as slow:
        ids = await make_events(store, 1)
        async with delivering(delivery(store, slow, bus)), delivering(delivery(store, slow, bus)):
            await all_delivered(store, ids)
        assert slow.delivered_ids == ids
        assert duplicates(slow) == 0


async def test_a_stream_it_cannot_use_is_logged_and_retried_until_fixed(
    store: SqlStore,
    receiver: WebhookReceiver,
    bus: BusSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stream of that name made elsewhere for other subjects: setting up fails, is logged and
    retried (delivery does not end silently); once an operator fixes the stream, events flow."""
    from nats.js.api import StreamConfig

    nc = await nats.connect(NATS_URL)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=bus.stream, subjects=[f"{bus.subject}.other"]))
    ids = await make_events(store, 3)
    try:
        async with delivering(delivery(store, receiver, bus)):
            await until(lambda: setup_failed(caplog), "log line of the failed set-up")
            await js.update_stream(StreamConfig(name=bus.stream, subjects=[bus.subject]))
            await all_delivered(store, ids)
    finally:
        await nc.close()
    assert receiver.delivered_ids == ids and duplicates(receiver) == 0
