"""Request limits, as pure ASGI middleware: the body size (an oversized body is refused before any
of it is parsed or kept in memory, whether it declares a Content-Length or arrives chunked), and
no NUL character in the path or the query (`NoNul`)."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobrouter.http.problems import PROBLEM_JSON, TYPE_PREFIX

# An oversized body is still read (and dropped) up to this many times the limit before the
# 413 goes out: clients send the whole body before reading, and a server that closes with
# unread data makes the kernel reset the connection, losing the 413 they should see.
DRAIN_FACTOR = 16


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        too_large = declared is not None and declared > self.max_bytes
        body = bytearray()
        seen = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left before sending it all
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            more = message.get("more_body", False)
            too_large = too_large or seen > self.max_bytes
            if not too_large:
                body += chunk
            elif seen > self.max_bytes * DRAIN_FACTOR:
                break  # enough read and dropped: answer, and the connection closes
        if too_large:
            await self._refuse(scope, send)
            return
        await self.app(scope, _replay(bytes(body), receive), send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        problem = {
            "type": TYPE_PREFIX + "body-too-large",
            "title": "Content Too Large",
            "status": 413,
            "detail": f"the request body is larger than {self.max_bytes} bytes; send a smaller "
            "input (the limit is [http] max_body_bytes)",
            "instance": scope.get("path", ""),
        }
        payload = json.dumps(problem).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", PROBLEM_JSON.encode()),
                    (b"content-length", str(len(payload)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands over the buffered body once, then waits on the real one (for the
    client's disconnect, which streaming responses listen for)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class NoNul:
    """A NUL character (`%00`) in the path or the query is refused with a 422 problem before any
    route sees it: PostgreSQL refuses NUL in text (an error the route would turn into a 500),
    SQLite accepts it, and a request must get the same answer from either backend."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (
            b"%00" in scope.get("raw_path", b"")
            or "\x00" in scope.get("path", "")
            or b"%00" in scope.get("query_string", b"")
        ):
            problem = {
                "type": TYPE_PREFIX + "request-invalid",
                "title": "Unprocessable Entity",
                "status": 422,
                "detail": "the path or the query holds a NUL character (%00); "
                "no id, name or key contains one",
                "instance": scope.get("path", ""),
            }
            payload = json.dumps(problem).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 422,
                    "headers": [
                        (b"content-type", PROBLEM_JSON.encode()),
                        (b"content-length", str(len(payload)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": payload})
            return
        await self.app(scope, receive, send)
