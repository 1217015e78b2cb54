"""Completion delivery through a NATS JetStream stream (`[delivery] nats_url`, `pip install
'jobrouter[nats]'`). Without the setting nothing here is imported, and nats-py is not needed.

    job terminal ──(same transaction, I8)──> outbox row
    relay:    claim unpublished rows ─> publish each (Nats-Msg-Id = event id) ─> PubAcks
              ─> published_at on the acknowledged ones, in one transaction
    consumer: durable pull consumer, explicit acks ─> POST webhook (router/webhook.py's
              WebhookSender, as router/outbox.py's) ─> router/delivery.py's decision:
              delivered: delivered_at, then ack │ retry: a try noted, nak with backoff
              │ dead (the `[outbox] max_tries`-th failure): dead letter (outbox_dead), term

Why it is exactly once as the receiver sees it (each event id arrives, and the receiver keeps
one copy per id, the same `Idempotency-Key` and signature as the database outbox):
- A relay that dies between the publish and the mark leaves its claim to expire; the event is
  published again under the same message id and JetStream drops the copy (its PubAck says
  `duplicate`), as long as that happens within the stream's duplicate window: `[outbox] claim`
  must be shorter than `[delivery] dedupe_window` (checked when the router starts).
- A consumer that dies before its ack gets the message redelivered after `ack_wait` (a live
  one working on a message tells the server so every third of `ack_wait`). Before
  POSTing, a consumer reads the row: a message whose event is already delivered (the consumer
  died between recording and acking) is acked without a second POST. Only a consumer that dies
  between the receiver's 2xx and the row's update makes the receiver see an event twice.
- The bound of tries is ours, counted by the stream's delivery count (`num_delivered`): the
  consumer's `max_deliver` is unlimited because a message the server stops redelivering on its
  own would never reach the dead letters, and would be lost.
- A dead letter replayed (`jobrouter outbox replay`) is a new outbox row, published under
  `<event id>:replay:<time of the replay>` so the duplicate window cannot swallow it; the
  webhook still gets the event id as `Idempotency-Key`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobrouter.aio import stop_if_cancelled
from jobrouter.delivery import DeliverySettings, Verdict, decide_delivery, log_dead, log_retry
from jobrouter.engine import make_worker_id
from jobrouter.metrics import record_delivery
from jobrouter.providers.backoff import Backoff, Jitter, full_jitter
from jobrouter.store.outbox import OutboxEvent, OutboxStore
from jobrouter.webhook import Webhook, WebhookSender

if TYPE_CHECKING:
    import httpx
    from nats.aio.client import Client
    from nats.aio.msg import Msg
    from nats.js import JetStreamContext

log = logging.getLogger("jobrouter.bus")
MSG_ID_HEADER = "Nats-Msg-Id"
OWNER_HEADER = "Jobrouter-Owner"
RECONNECT_WAIT_S = 0.5
MAX_RETRY_WAIT_S = 30.0
# Connecting to NATS and setting the delivery up again wait the product's one backoff: full
# jitter over a bound that doubles from half a second up to 30 s.
RECONNECT_BACKOFF = Backoff(initial=RECONNECT_WAIT_S, cap=MAX_RETRY_WAIT_S, retry_after_cap=None)


@dataclass(frozen=True)
class BusSettings:
    url: str
    stream: str = "JOBROUTER_EVENTS"
    subject: str = "jobrouter.events"
    consumer: str = "jobrouter-webhooks"
    dedupe_window_s: float = 120.0
    ack_wait_s: float = 40.0
    publish_timeout_s: float = 5.0


def message_id(event: OutboxEvent) -> str:
    """The event id; a replayed dead letter (due at its replay, not at its creation) gets the
    replay time appended, or JetStream would drop it as a copy of its first publish."""
    if event.next_attempt_at is None or event.next_attempt_at == event.created_at:
        return event.id
    return f"{event.id}:replay:{event.next_attempt_at!r}"


def encode(event: OutboxEvent) -> bytes:
    fields = {
        "id": event.id,
        "job_id": event.job_id,
        "owner": event.owner,
        "kind": event.kind,
        "payload": event.payload,
        "created_at": event.created_at,
    }
    return json.dumps(fields, separators=(",", ":")).encode("utf-8")


def decode(data: bytes, tries: int) -> OutboxEvent:
    fields = json.loads(data)
    return OutboxEvent(
        id=fields["id"],
        job_id=fields["job_id"],
        owner=fields["owner"],
        kind=fields["kind"],
        payload=fields["payload"],
        created_at=float(fields["created_at"]),
        tries=tries,
    )


class NatsDelivery:
    """The relay and the webhook consumer of one process (every process that runs workers)."""

    def __init__(
        self,
        store: OutboxStore,
        webhooks: Mapping[str, Webhook],
        settings: DeliverySettings,
        bus: BusSettings,
        *,
        jitter: Jitter = full_jitter,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.bus = bus
        # the very request of the database outbox: same body, headers, signature, timeouts
        self.sender = WebhookSender(
            webhooks,
            timeout_s=settings.timeout_s,
            max_response_bytes=settings.max_response_bytes,
            transport=transport,
        )
        self.webhooks = self.sender.webhooks
        self.worker_id = make_worker_id()
        self._jitter = jitter
        self._nc: Client | None = None
        self._main: asyncio.Task[None] | None = None
        self._closing = False  # a close of ours is no disconnection to warn about
        self._wake = asyncio.Event()
        self.ready = asyncio.Event()  # set once the stream and the consumer are in place

    def start(self) -> None:
        if self._main is not None:
            raise RuntimeError("the NATS delivery is already running")
        self._main = asyncio.create_task(self._run(), name="jobrouter-nats")

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        """Stop both loops, hand the relay's claims back, close the connection. A message in
        the middle of its POST is not acked: the stream redelivers it (at least once)."""
        if self._main is not None:
            self._main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._main
            self._main = None
            try:
                await self.store.release_outbox_claims(self.worker_id)
            except Exception:  # the claims expire by themselves
                log.exception("handing back claimed outbox events failed")
        await self._close()
        await self.sender.stop()

    async def _close(self) -> None:
        if self._nc is not None:
            nc, self._nc = self._nc, None
            self._closing = True
            try:
                with contextlib.suppress(Exception):
                    await nc.close()
            finally:
                self._closing = False

    # ---- connection ----------------------------------------------------------------------------

    async def _run(self) -> None:
        """Serve until stopped; a failure to set up (no JetStream, a stream made elsewhere with
        other subjects) or an unexpected error is logged and retried with backoff, never left
        to end delivery silently."""
        failures = 0
        while True:
            stop_if_cancelled()
            began = time.monotonic()
            try:
                await self._serve()
            except Exception:
                log.exception("delivery through NATS %s failed", self.bus.url)
            # a set-up that had been working for a while starts its backoff afresh
            failures = 1 if time.monotonic() - began > MAX_RETRY_WAIT_S else failures + 1
            delay = RECONNECT_BACKOFF.wait_s(failures)
            log.info("delivery through NATS %s: set up again in %.1fs", self.bus.url, delay)
            await self._close()
            await asyncio.sleep(delay)

    async def _serve(self) -> None:
        js = await self._connect()
        sub = await self._subscribe(js)
        stop_if_cancelled()  # the task group's tasks would not see a cancel lost before them
        self.ready.set()
        log.info(
            "delivery through NATS %s: stream %s, consumer %s",
            self.bus.url,
            self.bus.stream,
            self.bus.consumer,
        )
        async with asyncio.TaskGroup() as group:
            group.create_task(self._relay(js), name="jobrouter-nats-relay")
            group.create_task(self._consume(sub), name="jobrouter-nats-consume")

    async def _connect(self) -> JetStreamContext:
        import nats

        async def disconnected() -> None:
            if not self._closing:
                log.warning("NATS %s: disconnected; reconnecting", self.bus.url)

        async def error(exc: Exception) -> None:
            log.warning("NATS %s: %s: %s", self.bus.url, type(exc).__name__, exc)

        failures = 0
        while True:  # the first connect too: a router without NATS still accepts jobs
            try:
                self._nc = await nats.connect(
                    servers=[self.bus.url],
                    max_reconnect_attempts=-1,
                    connect_timeout=2,
                    reconnect_time_wait=RECONNECT_WAIT_S,
                    disconnected_cb=disconnected,
                    error_cb=error,
                    name=f"jobrouter {self.worker_id}",
                )
                break
            except Exception as exc:
                failures += 1
                delay = RECONNECT_BACKOFF.wait_s(failures)
                log.warning("NATS %s unreachable (%s); again in %.1fs", self.bus.url, exc, delay)
                await asyncio.sleep(delay)
        js = self._nc.jetstream(timeout=self.bus.publish_timeout_s)
        await ensure_stream(js, self.bus)
        return js

    async def _subscribe(self, js: JetStreamContext) -> JetStreamContext.PullSubscription:
        from nats.js.api import AckPolicy, ConsumerConfig

        config = ConsumerConfig(
            durable_name=self.bus.consumer,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.bus.ack_wait_s,
            max_deliver=-1,
            filter_subject=self.bus.subject,
        )
        return await js.pull_subscribe(
            self.bus.subject, durable=self.bus.consumer, stream=self.bus.stream, config=config
        )

    # ---- relay: outbox rows onto the stream ----------------------------------------------------

    async def _relay(self, js: JetStreamContext) -> None:
        while True:
            stop_if_cancelled()
            claimed = 0
            try:
                events = await self.store.bus.claim_unpublished(
                    self.webhooks,
                    self.worker_id,
                    claim_s=self.settings.claim_s,
                    limit=self.settings.batch,
                )
                claimed = len(events)
                acked = await asyncio.gather(*(self._publish(js, event) for event in events))
                # A crash before this mark is what JetStream's de-duplication is for: the
                # claims expire, the events are published again and the copies dropped.
                if any(acked):
                    await self.store.bus.outbox_published(
                        event.id for event, ok in zip(events, acked, strict=True) if ok
                    )
            except Exception:
                log.exception("relaying outbox events to NATS failed")
            if claimed < self.settings.batch:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.settings.poll_s):
                        await self._wake.wait()
                self._wake.clear()

    async def _publish(self, js: JetStreamContext, event: OutboxEvent) -> bool:
        """Publish one event; True once the stream acknowledged it."""
        headers = {MSG_ID_HEADER: message_id(event), OWNER_HEADER: event.owner}
        try:
            ack = await js.publish(
                self.bus.subject, encode(event), headers=headers, timeout=self.bus.publish_timeout_s
            )
        except Exception as exc:  # no ack: maybe stored, maybe not; publishing again is safe
            log.warning(
                "publishing outbox event %s failed (%s: %s); it is published again",
                event.id,
                type(exc).__name__,
                exc,
            )
            with contextlib.suppress(Exception):
                await self.store.bus.outbox_unclaim(event.id, self.worker_id)
            return False
        if ack.duplicate:
            log.info(
                "outbox event %s was already on the stream (a relay died before marking it)",
                event.id,
            )
        return True

    # ---- consumer: stream to webhooks ----------------------------------------------------------

    async def _consume(self, sub: JetStreamContext.PullSubscription) -> None:
        import nats.errors

        while True:
            stop_if_cancelled()
            try:
                messages = await sub.fetch(self.settings.batch, timeout=self.settings.poll_s)
            except (nats.errors.TimeoutError, TimeoutError):  # nothing came within poll_s
                continue
            except Exception as exc:  # a lost connection: the client reconnects by itself
                log.warning("fetching from NATS failed (%s: %s)", type(exc).__name__, exc)
                await asyncio.sleep(RECONNECT_WAIT_S)
                continue
            stop_if_cancelled()  # not acked: the stream redelivers them to whoever goes on
            await asyncio.gather(*(self._handle(message) for message in latest(messages)))

    async def _handle(self, msg: Msg) -> None:
        began = time.monotonic()
        alive = asyncio.create_task(self._in_progress(msg))
        try:
            event = decode(msg.data, msg.metadata.num_delivered)
            outcome = await self._deliver(msg, event)
        except Exception:  # not acked: the stream redelivers it after ack_wait
            log.exception("delivering a NATS message failed; it will be redelivered")
            return
        finally:
            alive.cancel()
        if outcome is not None:
            record_delivery(event.owner, outcome, time.monotonic() - began)

    async def _in_progress(self, msg: Msg) -> None:
        """While this process works on a message, tell the server so every third of ack_wait:
        only a consumer that died (or lost its connection) has its message redelivered, never
        one whose webhook or database is merely slow (that would send the event twice)."""
        while True:
            await asyncio.sleep(self.bus.ack_wait_s / 3)
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def _deliver(self, msg: Msg, event: OutboxEvent) -> Verdict | None:
        row = await self.store.outbox_event(event.id)
        if row is None or row.delivered_at is not None:
            # delivered (its consumer died before acking), a dead letter, or purged: not again
            await msg.ack_sync()
            return None
        if event.owner not in self.webhooks:  # its webhook was removed from the config
            await msg.nak(delay=self.settings.backoff_max_s)
            return None
        tries = event.tries  # this delivery included
        if tries > self.settings.max_tries:  # tries taken by consumers that died mid-send
            return await self._bury(msg, event, tries - 1, "consumers died during its last tries")
        outcome = await self.sender.send(event)
        decision = decide_delivery(
            outcome, tries, self.settings, now=time.time(), jitter=self._jitter
        )
        if decision.verdict is Verdict.DELIVERED:
            await self.store.outbox_delivered(event.id)
            await msg.ack_sync()
        elif decision.verdict is Verdict.DEAD:
            return await self._bury(msg, event, tries, outcome.error)
        else:
            await self.store.bus.outbox_bus_try(event.id, tries=tries, error=outcome.error)
            await msg.nak(delay=decision.delay_s)
            log_retry(log, event, decision, self.settings.max_tries, outcome.error)
        return decision.verdict

    async def _bury(self, msg: Msg, event: OutboxEvent, tries: int, error: str) -> Verdict:
        await self.store.bus.outbox_bury_published(event.id, tries=tries, error=error)
        await msg.term()
        log_dead(log, event, tries, error)
        return Verdict.DEAD


def latest(messages: list[Msg]) -> list[Msg]:
    """One delivery per stream message: a batch may hold a stale delivery (pulled for a fetch
    that had timed out, then redelivered after ack_wait) beside the fresh one, and handling
    both at once would send the event twice."""
    newest: dict[int, Msg] = {}
    for message in messages:
        seq = message.metadata.sequence.stream
        known = newest.get(seq)
        if known is None or message.metadata.num_delivered > known.metadata.num_delivered:
            newest[seq] = message
    return list(newest.values())


async def ensure_stream(js: JetStreamContext, bus: BusSettings) -> None:
    """The stream, made if missing: work-queue retention (a message acked by the consumer is
    removed), file storage, and the duplicate window of the message ids."""
    from nats.js.api import RetentionPolicy, StorageType, StreamConfig
    from nats.js.errors import NotFoundError

    try:
        await js.stream_info(bus.stream)
    except NotFoundError:
        await js.add_stream(
            StreamConfig(
                name=bus.stream,
                subjects=[bus.subject],
                retention=RetentionPolicy.WORK_QUEUE,
                storage=StorageType.FILE,
                duplicate_window=bus.dedupe_window_s,
            )
        )
