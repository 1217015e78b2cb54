"""Outbox delivery: each job's completion event POSTed to its owner's webhook, at least once.

The event row is written in the transaction that made the job terminal (I8). `OutboxDeliverer`
runs beside the engine when `[webhooks.<owner>]` sections exist: it claims due events of those
owners (a claim with an expiry, so no two processes send one event at the same moment), POSTs
each through the `WebhookSender` (router/webhook.py: `Idempotency-Key: <event id>`, an HMAC
signature), and records in the row what `decide_delivery` (router/delivery.py) made of the
try: delivered, due again after a backoff with full jitter, or, after `[outbox] max_tries`, a
dead letter. A crash between the send and the mark re-sends the same event (same id) once the
claim expires: receivers de-duplicate on the event id. Events of owners without a webhook are
parked: never claimed, shown by `jobrouter outbox`. See docs/operations.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping

import httpx

from jobrouter.aio import stop_if_cancelled, wait_event
from jobrouter.delivery import DeliverySettings, Verdict, decide_delivery, log_dead, log_retry
from jobrouter.engine import make_worker_id
from jobrouter.metrics import record_delivery
from jobrouter.providers.backoff import Jitter, full_jitter
from jobrouter.store.outbox import OutboxEvent, OutboxStore
from jobrouter.webhook import Outcome, Webhook, WebhookSender

log = logging.getLogger("jobrouter.outbox")

# After a wake-up, rows committed within this time are claimed together (one transaction).
WAKE_GATHER_S = 0.02


class OutboxDeliverer:
    def __init__(
        self,
        store: OutboxStore,
        webhooks: Mapping[str, Webhook],
        settings: DeliverySettings,
        *,
        jitter: Jitter = full_jitter,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.store = store
        self.sender = WebhookSender(
            webhooks,
            timeout_s=settings.timeout_s,
            max_response_bytes=settings.max_response_bytes,
            transport=transport,
        )
        self.webhooks = self.sender.webhooks
        self.settings = settings
        self.worker_id = make_worker_id()
        self._jitter = jitter
        self._loop: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._recording: set[asyncio.Task[None]] = set()

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Run the delivery loop as a background task of the running event loop."""
        if self._loop is not None:
            raise RuntimeError("the outbox deliverer is already running")
        self.store.on_outbox(self._written)
        self._loop = asyncio.create_task(self._run(), name="jobrouter-outbox")

    async def stop(self) -> None:
        """Stop sending. Events claimed here are handed back at once (a send cut short may
        have arrived: it is sent again, at least once); an answer already received is still
        recorded and counted before this returns."""
        self.store.forget_outbox(self._written)
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None
            if self._recording:  # answers already in hand are recorded and counted first
                await asyncio.wait(set(self._recording))
            try:
                await self.store.release_outbox_claims(self.worker_id)
            except Exception:  # the claims expire by themselves
                log.exception("handing back claimed outbox events failed")
        await self.sender.stop()

    def wake(self) -> None:
        self._wake.set()

    def _written(self, owner: str) -> None:
        """An outbox row committed in this process: send it now if its owner has a webhook
        (the poll every `poll_s` stays, for other processes' rows and retries due)."""
        if owner in self.webhooks:
            self.wake()

    # ---- delivery ------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            stop_if_cancelled()
            claimed = 0
            try:
                claimed = await self.deliver_due()
            except Exception:
                log.exception("delivering outbox events failed")
            if claimed < self.settings.batch:  # a full batch: more may be due, go on at once
                await wait_event(self._wake, self.settings.poll_s)
                if self._wake.is_set():  # woken by a commit: the rows committed meanwhile
                    await asyncio.sleep(WAKE_GATHER_S)  # go into the same claim
                self._wake.clear()

    async def deliver_due(self) -> int:
        """One round: claim due events of owners with a webhook and send them concurrently.
        Returns how many were claimed."""
        events = await self.store.claim_outbox(
            self.webhooks,
            self.worker_id,
            claim_s=self.settings.claim_s,
            limit=self.settings.batch,
        )
        await asyncio.gather(*(self._deliver(event) for event in events))
        return len(events)

    async def _deliver(self, event: OutboxEvent) -> None:
        began = time.monotonic()
        try:
            outcome = await self.sender.send(event)
        except Exception:  # the claim expires and the event is sent again
            log.exception("delivering outbox event %s failed", event.id)
            return
        # Once the answer is in hand, its row write and its count go together: stop() cancels
        # this round, and a cancel landing between the write and the counter would leave a
        # delivered event uncounted. The recording runs as its own task that stop() waits for.
        recording = asyncio.create_task(self._record_and_count(event, outcome, began))
        self._recording.add(recording)
        recording.add_done_callback(self._recording.discard)
        await asyncio.shield(recording)

    async def _record_and_count(self, event: OutboxEvent, outcome: Outcome, began: float) -> None:
        try:
            recorded = await self._record(event, outcome)
        except Exception:  # the claim expires and the event is sent again
            log.exception("recording the outcome of outbox event %s failed", event.id)
            return
        record_delivery(event.owner, recorded, time.monotonic() - began)

    async def _record(self, event: OutboxEvent, outcome: Outcome) -> Verdict:
        """Write the try's outcome into the row: delivered, retry or dead."""
        decision = decide_delivery(
            outcome, event.tries + 1, self.settings, now=time.time(), jitter=self._jitter
        )
        if decision.verdict is Verdict.DELIVERED:
            await self.store.outbox_delivered(event.id)
        elif decision.verdict is Verdict.DEAD:
            await self.store.outbox_bury(event.id, self.worker_id, error=outcome.error)
            log_dead(log, event, decision.tries, outcome.error)
        elif await self.store.outbox_retry(
            event.id, self.worker_id, error=outcome.error, next_attempt_at=decision.due_at
        ):
            log_retry(log, event, decision, self.settings.max_tries, outcome.error)
        # else: our claim had expired, the process that took the event over decides
        return decision.verdict
