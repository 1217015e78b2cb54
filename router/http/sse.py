"""Server-sent events from the durable event log of a job.

Each event is sent as `id: <seq>`, `event: <kind>`, `data: <the JobEvent as JSON>`; a client
that reconnects with `Last-Event-ID: <seq>` gets every event after it, so nothing is lost or
repeated. Comment lines keep idle connections alive. The stream ends where `Router.watch`
ends (`jobrouter.states.watch_ends`): after the event that makes the job terminal, or once the log
is read to its end while the job needs attention; subscribing after the job finished replays
the log and ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator

from jobrouter.http.feeds import JobFeeds
from jobrouter.http.schemas import plain
from jobrouter.models import JobEvent

RECONNECT_MS = 1000
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def format_event(event: JobEvent) -> bytes:
    # Compact json.dumps writes one line: `data:` needs no splitting. The stdlib encoder, not
    # pydantic's, so deeply nested data reads back (see `schemas.FREE_JSON`).
    data = json.dumps(plain(event), ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event.kind}\ndata: {data}\n\n".encode()


async def event_stream(
    feeds: JobFeeds, job_id: str, after: int, heartbeat: float
) -> AsyncIterator[bytes]:
    """The SSE body: stored events after `after`, then new ones, with heartbeats between. The
    events come from the job's shared feed (one watcher per job, see `feeds`)."""
    yield f"retry: {RECONNECT_MS}\n\n".encode()
    async with feeds.subscribe(job_id) as feed:
        events = feed.after(after)
        pending: asyncio.Future[JobEvent] | None = None
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(anext(events))
                done, _ = await asyncio.wait({pending}, timeout=heartbeat)
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
