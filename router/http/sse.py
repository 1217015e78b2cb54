"""Server-sent events from the durable event log of a job.

Each event is sent as `id: <seq>`, `event: <kind>`, `data: <the JobEvent as JSON>`; a client
that reconnects with `Last-Event-ID: <seq>` gets every event after it, so nothing is lost or
repeated. Comment lines keep idle connections alive. The stream ends where `Router.watch`
ends (`jobrouter.states.watch_ends`): after the event that makes the job terminal, or once the log
is read to its end while the job needs attention; subscribing after the job finished replays
the log and ends.

A stream is only as good as its token: every heartbeat it asks the store whether the token is
still live, and once it is revoked or expired (or gone) it sends a last event saying so and
ends, without an `id` (a resumed stream starts after the last job event seen):

    event: stream-ended
    data: {"reason":"token-revoked","detail":"..."}

A reconnect with that token then gets the 401 of any request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable

from jobrouter.http.feeds import JobFeeds
from jobrouter.http.schemas import plain
from jobrouter.models import JobEvent

RECONNECT_MS = 1000
ENDED = "stream-ended"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def format_event(event: JobEvent) -> bytes:
    # Compact json.dumps writes one line: `data:` needs no splitting. The stdlib encoder, not
    # pydantic's, so deeply nested data reads back (see `schemas.FREE_JSON`).
    data = json.dumps(plain(event), ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event.kind}\ndata: {data}\n\n".encode()


def format_end(status: str) -> bytes:
    """The last event of a stream whose token stopped holding (`status`: revoked, expired,
    unknown)."""
    detail = f"the bearer token is {status}; this stream ends, and so would a reconnect with it"
    data = json.dumps({"reason": f"token-{status}", "detail": detail}, separators=(",", ":"))
    return f"event: {ENDED}\ndata: {data}\n\n".encode()


async def event_stream(
    feeds: JobFeeds,
    job_id: str,
    after: int,
    heartbeat: float,
    token_status: Callable[[str], Awaitable[str]],
    token_id: str,
) -> AsyncIterator[bytes]:
    """The SSE body: stored events after `after`, then new ones, with heartbeats between. The
    events come from the job's shared feed (one watcher per job, see `feeds`). At every
    heartbeat, events or not, the token `token_id` is checked (`token_status`, the
    router's): revoked or expired, the stream
    ends with `format_end`."""
    yield f"retry: {RECONNECT_MS}\n\n".encode()
    loop = asyncio.get_running_loop()
    async with feeds.subscribe(job_id) as feed:
        events = feed.after(after)
        pending: asyncio.Future[JobEvent] | None = None
        check_at = loop.time() + heartbeat
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(anext(events))
                done, _ = await asyncio.wait({pending}, timeout=max(0.0, check_at - loop.time()))
                if loop.time() >= check_at:
                    check_at = loop.time() + heartbeat
                    status = await token_status(token_id)
                    if status != "live":
                        yield format_end(status)
                        return
                if not done:
                    yield b": keep-alive\n\n"
                    continue
                try:
                    event = pending.result()
                except StopAsyncIteration:
                    return
                pending = None
                yield format_event(event)
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await pending
            if isinstance(events, AsyncGenerator):
                await events.aclose()
