"""Outbox delivery: each job's completion event POSTed to its owner's webhook, at least once.

The event row is written in the transaction that made the job terminal (I8). `OutboxDeliverer`
runs beside the engine when `[webhooks.<owner>]` sections exist: it claims due events of those
owners (a claim with an expiry, so no two processes send one event at the same moment), POSTs
each with `Idempotency-Key: <event id>` and an HMAC signature, and records the outcome in the
row: delivered, due again after a backoff with full jitter, or, after `[outbox] max_tries`, a
dead letter. A crash between the send and the mark re-sends the same event (same id) once the
claim expires: receivers de-duplicate on the event id. Events of owners without a webhook are
parked: never claimed, shown by `jobrouter outbox`. See docs/operations.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from jobrouter.aio import stop_if_cancelled, wait_event
from jobrouter.config import RouterConfig, unset_secrets
from jobrouter.engine import make_worker_id
from jobrouter.metrics import record_delivery
from jobrouter.models import canonical_json
from jobrouter.store.outbox import OutboxEvent, OutboxStore

log = logging.getLogger("jobrouter.outbox")

SIGNATURE_HEADER = "X-Jobrouter-Signature"
EVENT_HEADER = "X-Jobrouter-Event"
SIGNATURE_TOLERANCE_S = 300.0  # what `verify_signature` accepts as clock skew plus transit
USER_AGENT = "jobrouter-outbox/1"
# After a wake-up, rows committed within this time are claimed together (one transaction).
WAKE_GATHER_S = 0.02

Jitter = Callable[[float], float]


def full_jitter(bound: float) -> float:
    """A uniformly random wait in [0, bound] ("full jitter"): retries of many events spread."""
    return random.uniform(0.0, bound)


def retry_delay(tries: int, *, initial: float, cap: float, jitter: Jitter = full_jitter) -> float:
    """Seconds to wait after the `tries`-th failed try: full jitter over an exponential bound,
    `min(cap, initial * 2 ** (tries - 1))` (the formula of tenacity's wait_random_exponential)."""
    bound = min(cap, initial * 2 ** max(tries - 1, 0))
    return jitter(bound)


def sign(secret: bytes, body: bytes, timestamp: int) -> str:
    """The signature header value: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`."""
    mac = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify_signature(
    secret: bytes,
    body: bytes,
    header: str,
    *,
    now: float | None = None,
    tolerance_s: float = SIGNATURE_TOLERANCE_S,
) -> bool:
    """What a receiver does: recompute the HMAC over the raw body, compare in constant time, and
    refuse a timestamp further than `tolerance_s` from now (a replayed old request)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance_s:
        return False
    expected = sign(secret, body, timestamp).split(",v1=", 1)[1]
    return hmac.compare_digest(expected, fields.get("v1", ""))


def event_body(event: OutboxEvent) -> bytes:
    """What is POSTed: the same bytes on every try, so a re-send is recognisably the same."""
    envelope = {
        "id": event.id,
        "kind": event.kind,
        "created_at": event.created_at,
        "data": json.loads(event.payload),
    }
    return canonical_json(envelope).encode("utf-8")


@dataclass(frozen=True)
class Webhook:
    owner: str
    url: str
    secret: bytes


@dataclass(frozen=True)
class DeliverySettings:
    max_tries: int = 8
    backoff_initial_s: float = 30.0
    backoff_max_s: float = 3600.0
    timeout_s: float = 10.0
    claim_s: float = 60.0
    poll_s: float = 1.0
    batch: int = 16
    max_response_bytes: int = 4096

    @classmethod
    def from_config(cls, config: RouterConfig) -> DeliverySettings:
        o = config.outbox
        return cls(
            max_tries=o.max_tries,
            backoff_initial_s=o.backoff_initial,
            backoff_max_s=o.backoff_max,
            timeout_s=o.timeout,
            claim_s=o.claim,
            poll_s=o.poll_interval,
            batch=o.batch,
            max_response_bytes=o.max_response_bytes,
        )


def next_try_in(
    tries: int, retry_after_s: float | None, settings: DeliverySettings, jitter: Jitter
) -> float:
    """Seconds until the try after the `tries`-th failed one, for both senders (the poller here
    and router/bus_nats.py's consumer): the backoff, or the receiver's Retry-After when that is
    longer, capped at `backoff_max_s` as the backoff is."""
    delay = retry_delay(
        tries, initial=settings.backoff_initial_s, cap=settings.backoff_max_s, jitter=jitter
    )
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, settings.backoff_max_s))
    return delay


def log_retry(
    log: logging.Logger, event: OutboxEvent, tries: int, max_tries: int, delay: float, error: str
) -> None:
    """The line of a failed try that will be tried again (each sender logs to its own logger)."""
    log.warning(
        "outbox event %s to owner %s failed (try %d of %d), again in %.1fs: %s",
        event.id,
        event.owner,
        tries,
        max_tries,
        delay,
        error,
    )


def log_dead(log: logging.Logger, event: OutboxEvent, tries: int, error: str) -> None:
    """The line of an event that became a dead letter."""
    log.error(
        "outbox event %s (job %s, owner %s) failed %d times and is a dead letter: %s",
        event.id,
        event.job_id,
        event.owner,
        tries,
        error,
    )


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    error: str = ""
    retry_after_s: float | None = None  # the receiver's Retry-After, in seconds


def webhooks_from_config(
    config: RouterConfig, environ: Mapping[str, str] | None = None
) -> dict[str, Webhook]:
    """The configured webhooks with their secrets; a missing or empty secret is a ConfigError
    (delivering unsigned, or parking silently, would both be worse than refusing to start)."""
    env = os.environ if environ is None else environ
    unset = unset_secrets(config.webhooks, env)
    if unset:
        raise unset[0]
    return {
        owner: Webhook(owner=owner, url=hook.url, secret=env[hook.secret_env].encode("utf-8"))
        for owner, hook in config.webhooks.items()
    }


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
        self.webhooks = dict(webhooks)
        self.settings = settings
        self.worker_id = make_worker_id()
        self._jitter = jitter
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
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
        if self._client is not None:
            await self._client.aclose()
            self._client = None

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
            outcome = await self.send(event)
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

    async def send(self, event: OutboxEvent) -> Outcome:
        """POST one event to its owner's webhook; any answer but 2xx is a failed try."""
        hook = self.webhooks[event.owner]
        if self._client is None:  # made on first use, closed by stop()
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.settings.timeout_s),
                transport=self._transport,
                follow_redirects=False,
                headers={"User-Agent": USER_AGENT},
            )
        body = event_body(event)
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": event.id,
            EVENT_HEADER: event.kind,
            SIGNATURE_HEADER: sign(hook.secret, body, int(time.time())),
        }
        try:
            async with asyncio.timeout(self.settings.timeout_s):  # the whole request, too
                # Streamed: a receiver's answer is read up to max_response_bytes, never whole
                # (an 800 MB answer once took the router from 220 MB to 3.3 GB).
                async with self._client.stream(
                    "POST", hook.url, content=body, headers=headers
                ) as response:
                    if response.is_success:
                        return Outcome(True)
                    excerpt = await _read_capped(response, self.settings.max_response_bytes)
        except TimeoutError:
            return Outcome(False, f"no answer within {self.settings.timeout_s}s")
        except httpx.HTTPError as exc:
            return Outcome(False, f"{type(exc).__name__}: {exc}"[:500])
        return Outcome(
            False,
            f"HTTP {response.status_code}: {excerpt[:200]}",
            _retry_after(response.headers.get("Retry-After")),
        )

    async def _record(self, event: OutboxEvent, outcome: Outcome) -> str:
        """Write the try's outcome into the row: delivered, retry or dead."""
        if outcome.delivered:
            await self.store.outbox_delivered(event.id)
            return "delivered"
        tries = event.tries + 1
        if tries >= self.settings.max_tries:
            await self.store.outbox_bury(event.id, self.worker_id, error=outcome.error)
            log_dead(log, event, tries, outcome.error)
            return "dead"
        delay = next_try_in(tries, outcome.retry_after_s, self.settings, self._jitter)
        if not await self.store.outbox_retry(
            event.id, self.worker_id, error=outcome.error, next_attempt_at=time.time() + delay
        ):
            return "retry"  # our claim had expired: the process that took it over decides
        log_retry(log, event, tries, self.settings.max_tries, delay, outcome.error)
        return "retry"


async def _read_capped(response: httpx.Response, limit: int) -> str:
    """At most `limit` bytes of the answer's body, as text; the rest is left unread. Raw bytes,
    not decoded: a compressed answer could expand one chunk a thousandfold."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        chunks.append(chunk[: limit - size])
        size += len(chunks[-1])
        if size >= limit:
            break
    return b"".join(chunks).decode("utf-8", errors="replace")


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the HTTP-date form is rare from webhooks and ignored)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
