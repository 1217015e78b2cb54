"""A real webhook receiver for outbox tests: a tiny ASGI app served by uvicorn on 127.0.0.1
(an ephemeral port) inside the test's event loop. It records every request, and can answer 500
to the first K, hang on the first K (until `release()` or the test's end), always fail, redirect,
or answer a 500 whose body trickles in slowly."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import uvicorn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

TRICKLE_GAP_S = 0.05


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]  # lower-case names
    body: bytes
    at: float  # time.monotonic() on arrival
    method: str

    @property
    def event_id(self) -> str:
        return self.headers["idempotency-key"]

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class WebhookReceiver:
    fail_first: int = 0  # answer 500 to this many requests first
    hang_first: int = 0  # hold this many requests first, unanswered, until release() or the end
    always_fail: bool = False
    delay: float = 0.0  # seconds before each answer
    endless: bool = False  # answer 500 with a body that never ends (until the sender leaves)
    endless_sent: int = 0  # bytes of endless bodies written so far
    redirect_to: str = ""  # answer 307 Temporary Redirect to this URL
    trickle: int = 0  # answer 500 with this many body bytes, one per TRICKLE_GAP_S
    requests: list[Received] = field(default_factory=list)
    url: str = ""
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    _release: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self) -> None:
        """Let the held requests (`hang_first`) be answered now."""
        self._release.set()

    @property
    def delivered_ids(self) -> set[str]:
        """What a de-duplicating receiver keeps: one per event id."""
        return {request.event_id for request in self.requests}

    async def wait_for(self, count: int, within: float = 60.0) -> list[Received]:
        async with asyncio.timeout(within), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)
        return list(self.requests)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":  # the sender died mid-request: no event
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        number = len(self.requests)
        async with self._arrived:
            self.requests.append(Received(headers, body, time.monotonic(), scope["method"]))
            self._arrived.notify_all()
        if number < self.hang_first:
            await self._release.wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.endless:
            await self._send_endless(receive, send)
            return
        if self.trickle:
            await self._send_trickle(receive, send)
            return
        if self.redirect_to:
            location = self.redirect_to.encode("latin-1")
            await send(
                {"type": "http.response.start", "status": 307, "headers": [(b"location", location)]}
            )
            await send({"type": "http.response.body", "body": b""})
            return
        failing = self.always_fail or number < self.fail_first
        status = 500 if failing else 200
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"text/plain")],
            }
        )
        await send({"type": "http.response.body", "body": b"no" if failing else b"ok"})

    async def _send_endless(self, receive: Receive, send: Send) -> None:
        """500, then 64 KiB chunks until the sender disconnects (uvicorn then drops what is
        sent without waiting, so the disconnect is watched for) or 1 GiB went out."""
        left = asyncio.ensure_future(receive())  # completes with http.disconnect
        await send(
            {
                "type": "http.response.start",
                "status": 500,
                "headers": [(b"content-type", b"text/plain")],
            }
        )
        chunk = b"x" * 65536
        try:
            while not left.done() and self.endless_sent < 2**30:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                self.endless_sent += len(chunk)
                await asyncio.sleep(0)
        finally:
            left.cancel()

    async def _send_trickle(self, receive: Receive, send: Send) -> None:
        """500 at once, then `trickle` body bytes one every TRICKLE_GAP_S (far below any
        per-read timeout), until the sender disconnects."""
        left = asyncio.ensure_future(receive())  # completes with http.disconnect
        await send({"type": "http.response.start", "status": 500, "headers": []})
        try:
            for _ in range(self.trickle):
                if left.done():
                    return
                await send({"type": "http.response.body", "body": b"x", "more_body": True})
                await asyncio.sleep(TRICKLE_GAP_S)
            await send({"type": "http.response.body", "body": b""})
        finally:
            left.cancel()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[WebhookReceiver]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/hook"
        config = uvicorn.Config(
            self, lifespan="off", log_config=None, access_log=False, timeout_graceful_shutdown=1
        )
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            async with asyncio.timeout(60):  # a guard only
                while True:
                    if server.started:
                        break
                    await asyncio.sleep(0.01)
            yield self
        finally:
            self._release.set()
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 5)
            sock.close()
