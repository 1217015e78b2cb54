"""The NATS JetStream server on 127.0.0.1:4222 for delivery tests and the delivery benchmark:
a stream, subject and consumer of a test's own (removed after it), what the stream holds, and a
delivery running for the length of a block."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import nats
from nats.js.api import StreamState

from jobrouter.bus_nats import BusSettings
from jobrouter.fleet import Delivery

NATS_URL = "nats://127.0.0.1:4222"
D = TypeVar("D", bound=Delivery)


def own_bus(prefix: str, **settings: Any) -> BusSettings:
    """Settings naming a stream, subject and consumer no other test uses: `<PREFIX>_<tag>`,
    `<prefix>.<tag>`, `<prefix><tag>`; `settings` are BusSettings fields (ack_wait_s...)."""
    tag = uuid.uuid4().hex[:12]
    low = prefix.lower()
    named = BusSettings(
        url=NATS_URL,
        stream=f"{prefix.upper()}_{tag}",
        subject=f"{low}.{tag}",
        consumer=f"{low}{tag}",
    )
    return dataclasses.replace(named, **settings)


async def delete_stream(bus: BusSettings) -> None:
    """The stream gone (a stream never made is no error)."""
    nc = await nats.connect(NATS_URL)
    try:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await nc.jetstream().delete_stream(bus.stream)
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def own_stream(prefix: str, **settings: Any) -> AsyncIterator[BusSettings]:
    """`own_bus(prefix, **settings)`, its stream deleted when the block ends."""
    bus = own_bus(prefix, **settings)
    try:
        yield bus
    finally:
        await delete_stream(bus)


async def stream_state(bus: BusSettings) -> StreamState:
    """What the stream holds now (messages, last sequence); NotFoundError before it is made."""
    nc = await nats.connect(NATS_URL)
    try:
        info = await nc.jetstream().stream_info(bus.stream)
    finally:
        await nc.close()
    return info.state


@contextlib.asynccontextmanager
async def delivering(delivery: D) -> AsyncIterator[D]:
    """`delivery` started, and stopped cleanly when the block ends (however it ends)."""
    delivery.start()
    try:
        yield delivery
    finally:
        await delivery.stop()
