"""`WebhookSender`: one signed POST of one outbox event to its owner's webhook, and what came of it.

Both deliverers send through it (`router/outbox.py`, polling the database, and
`router/bus_nats.py`, consuming the NATS stream), so a receiver gets the same request from
either: the same body on every try, `Idempotency-Key: <event id>` and an HMAC signature it can
check with `verify_signature`. What a failed try leads to (retry or dead letter) is not decided
here: see `jobrouter.delivery`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from jobrouter.config import RouterConfig, unset_secrets
from jobrouter.models import canonical_json
from jobrouter.providers.backoff import parse_retry_after
from jobrouter.store.outbox import OutboxEvent

SIGNATURE_HEADER = "X-Jobrouter-Signature"
EVENT_HEADER = "X-Jobrouter-Event"
SIGNATURE_TOLERANCE_S = 300.0  # what `verify_signature` accepts as clock skew plus transit
USER_AGENT = "jobrouter-outbox/1"


@dataclass(frozen=True)
class Webhook:
    owner: str
    url: str
    secret: bytes


@dataclass(frozen=True)
class Outcome:
    """What one try came to: delivered (a 2xx), or a failed try with its error."""

    delivered: bool
    error: str = ""
    retry_after_s: float | None = None  # the receiver's Retry-After, in seconds


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


class WebhookSender:
    """POSTs events to their owners' webhooks over one kept-alive HTTP client, made on first
    use and closed by `stop()`."""

    def __init__(
        self,
        webhooks: Mapping[str, Webhook],
        *,
        timeout_s: float,
        max_response_bytes: int,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.webhooks = dict(webhooks)
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    async def stop(self) -> None:
        """Close the kept-alive HTTP client (a later `send` makes a new one)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def send(self, event: OutboxEvent) -> Outcome:
        """POST one event to its owner's webhook; any answer but 2xx is a failed try."""
        hook = self.webhooks[event.owner]
        body = event_body(event)
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": event.id,
            EVENT_HEADER: event.kind,
            SIGNATURE_HEADER: sign(hook.secret, body, int(time.time())),
        }
        client = self._http()
        try:
            async with asyncio.timeout(self.timeout_s):  # the whole request, too
                # Streamed: a receiver's answer is read up to max_response_bytes, never whole
                # (an 800 MB answer once took the router from 220 MB to 3.3 GB).
                async with client.stream(
                    "POST", hook.url, content=body, headers=headers
                ) as response:
                    if response.is_success:
                        return Outcome(True)
                    excerpt = await _read_capped(response, self.max_response_bytes)
        except TimeoutError:
            return Outcome(False, f"no answer within {self.timeout_s}s")
        except httpx.HTTPError as exc:
            return Outcome(False, f"{type(exc).__name__}: {exc}"[:500])
        return Outcome(
            False,
            f"HTTP {response.status_code}: {excerpt[:200]}",
            parse_retry_after(response.headers.get("Retry-After")),
        )

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s),
                transport=self._transport,
                follow_redirects=False,
                headers={"User-Agent": USER_AGENT},
            )
        return self._client


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
