"""A real router process (`tests/support/nats_router.py`), SIGKILLed between the publish of
its events to JetStream and the mark in the database: PostgreSQL holds its mark (a trigger on
`published_at` waits for an advisory lock the test holds), the test sees the events in the
stream and the mark waiting, kills the process, and lets another router take over. It
publishes the events again under the same message ids: JetStream drops each copy (the stream
stores each event once), and the receiver gets each event once. While the first process lived
the receiver answered 500 (so its consumer could not finish any event), which puts every
event through the take-over."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import nats
import pytest

from jobrouter.bus_nats import BusSettings, NatsDelivery
from jobrouter.config import RouterConfig
from jobrouter.delivery import DeliverySettings
from jobrouter.store import SqlStore, open_store
from jobrouter.webhook import Webhook
from tests.store.pg import fresh_database
from tests.support.nats_bus import delivering, own_stream, stream_state
from tests.support.outbox_jobs import succeeded_events
from tests.support.waiting import until
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = [pytest.mark.nats, pytest.mark.postgres]
ROOT = Path(__file__).resolve().parents[2]
HOLD = 0x484F4C44  # the advisory lock the trigger waits for
EVENTS = 5
HOLD_MARK = f"""
CREATE FUNCTION hold_publish() RETURNS trigger AS $$
BEGIN PERFORM pg_advisory_xact_lock({HOLD}); RETURN NEW; END $$ LANGUAGE plpgsql;
CREATE TRIGGER hold_publish BEFORE UPDATE OF published_at ON outbox
FOR EACH ROW EXECUTE FUNCTION hold_publish();
"""


@pytest.fixture
async def db() -> AsyncIterator[tuple[str, SqlStore]]:
    async with fresh_database() as url:
        store = await open_store(url)
        try:
            yield url, store
        finally:
            await store.close()


@pytest.fixture
async def bus() -> AsyncIterator[BusSettings]:
    async with own_stream("jrkill", ack_wait_s=2.0) as settings:
        yield settings


async def test_a_router_killed_between_publish_and_mark(
    db: tuple[str, SqlStore],
    bus: BusSettings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, store = db
    ids = {event.id for event in await succeeded_events(store, EVENTS)}
    admin = await asyncpg.connect(url)
    try:
        await admin.execute(HOLD_MARK)
        await admin.execute("SELECT pg_advisory_lock($1)", HOLD)
        async with WebhookReceiver(always_fail=True).running() as receiver:
            process = start_router(tmp_path, url, bus, receiver.url)
            try:
                await until(lambda: stream_holds(bus, EVENTS), "events in the stream")
                await until(lambda: mark_waiting(admin), "mark waiting on the trigger")
            finally:
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=30)
                assert process.stdout is not None
                process.stdout.close()
            await admin.execute("DROP TRIGGER hold_publish ON outbox")
            await admin.execute("SELECT pg_advisory_unlock($1)", HOLD)
            assert await unpublished(admin) == EVENTS  # nothing was marked: the kill won
            failed_before = len(receiver.requests)
            receiver.always_fail = False

            caplog.set_level(logging.INFO, logger="jobrouter.bus")
            settings = DeliverySettings(
                max_tries=50,
                backoff_initial_s=0.05,
                backoff_max_s=0.2,
                timeout_s=2.0,
                claim_s=2.0,
                poll_s=0.05,
            )
            hooks = {"shop": Webhook("shop", receiver.url, b"s")}
            async with delivering(NatsDelivery(store.outbox, hooks, settings, bus)):
                await until(lambda: all_delivered(admin), "delivery of every event")
            delivered = receiver.requests[failed_before:]
            stored = (await stream_state(bus)).last_seq
    finally:
        await admin.close()
    assert {request.event_id for request in delivered} == ids  # 0 lost
    assert len(delivered) == EVENTS  # 0 duplicates
    # The stream stored each event once: every publish after the kill was dropped as a copy.
    # How many copies the relay sent depends on the race between it and the consumer (an event
    # delivered before the relay came back to it is not published again): 0 to EVENTS. That the
    # copy is dropped and logged is decided deterministically by test_nats_delivery.py's
    # relay-only test; asserting at least one here was a verdict on the clock (seen failing).
    assert stored == EVENTS
    copies = [r for r in caplog.records if "already on the stream" in r.message]
    assert len(copies) <= EVENTS


def start_router(folder: Path, url: str, bus: BusSettings, hook: str) -> subprocess.Popen[str]:
    config = RouterConfig.model_validate(
        {
            "webhooks": {"shop": {"url": hook, "secret_env": "SHOP_SECRET"}},
            "outbox": {
                "claim": 2.0,
                "timeout": 1.0,
                "poll_interval": 0.05,
                "backoff_initial": 0.05,
                "backoff_max": 0.2,
                "max_tries": 50,
            },
            "delivery": {
                "nats_url": bus.url,
                "stream": bus.stream,
                "subject": bus.subject,
                "consumer": bus.consumer,
                "ack_wait": bus.ack_wait_s,
            },
        }
    )
    path = folder / "config.json"
    path.write_text(config.model_dump_json())
    with (folder / "router.log").open("w") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.nats_router", "--db", url, "--config", str(path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "SHOP_SECRET": "s"},
        )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("ready "), (folder / "router.log").read_text()
    return process


async def stream_holds(bus: BusSettings, count: int) -> bool:
    try:
        return int((await stream_state(bus)).messages) >= count
    except nats.js.errors.NotFoundError:
        return False


async def mark_waiting(admin: asyncpg.Connection) -> bool:  # type: ignore[type-arg]
    waiting = await admin.fetchval(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND wait_event = 'advisory' AND query LIKE '%published_at%'"
    )
    return bool(waiting)


async def unpublished(admin: asyncpg.Connection) -> int:  # type: ignore[type-arg]
    return int(await admin.fetchval("SELECT COUNT(*) FROM outbox WHERE published_at IS NULL"))


async def all_delivered(admin: asyncpg.Connection) -> bool:  # type: ignore[type-arg]
    return not await admin.fetchval("SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL")
