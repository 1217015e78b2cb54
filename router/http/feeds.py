"""One watcher per job, shared by every server-sent-event stream of that job.

Before, each stream ran its own `Router.watch`, which reads the job and its events on every
change and at least every 0.25 s: 1,000 streams of one owner meant 4,000 reads a second and
`/health/live` answering in 0.9 to 2.7 s. Now the first stream of a job starts ONE watcher
(`Router.watch` from the start of the log); it appends what it sees to the job's `JobFeed`,
and every stream of the job reads from there, from its own `Last-Event-ID`. The watcher stops
when the last stream of the job leaves. A stream that arrives after the feed ended (the job
settled, or paused for a person) gets a fresh feed, so an `unknown` job resolved since is
followed to its new end.

`JobFeeds` also counts open streams per token: `[http] max_streams_per_token`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from jobrouter.api import Router
from jobrouter.models import JobEvent


class JobFeed:
    """The events of one job as its watcher saw them, from seq 1, and whether it ended."""

    def __init__(self) -> None:
        self.events: list[JobEvent] = []
        self.done = False
        self.error: BaseException | None = None
        self.changed = asyncio.Condition()
        self.streams = 0
        self.task: asyncio.Task[None] | None = None

    async def after(self, seq: int) -> AsyncIterator[JobEvent]:
        """Every event with a seq above `seq`, as the watcher sees them; ends with the feed."""
        seen = 0
        while True:
            async with self.changed:
                while len(self.events) <= seen and not self.done:
                    await self.changed.wait()
            while seen < len(self.events):
                event = self.events[seen]
                seen += 1
                if event.seq > seq:
                    yield event
            if self.done and seen >= len(self.events):
                if self.error is not None:
                    raise self.error
                return


class JobFeeds:
    def __init__(self, router: Router, max_streams_per_token: int) -> None:
        self._router = router
        self._feeds: dict[str, JobFeed] = {}
        self.max_streams_per_token = max_streams_per_token
        self.streams: Counter[str] = Counter()  # open streams by token id

    def watchers(self) -> int:
        """Watchers running now (one per job with open streams)."""
        return sum(1 for feed in self._feeds.values() if feed.task and not feed.task.done())

    def admit(self, token_id: str) -> Callable[[], None] | None:
        """Count a new stream of `token_id`; None when it has its maximum open already. The
        callable given back releases it (exactly once)."""
        if self.streams[token_id] >= self.max_streams_per_token:
            return None
        self.streams[token_id] += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.streams[token_id] -= 1
                if self.streams[token_id] <= 0:
                    del self.streams[token_id]

        return release

    @asynccontextmanager
    async def subscribe(self, job_id: str) -> AsyncIterator[JobFeed]:
        feed = self._feeds.get(job_id)
        if feed is None or feed.done:
            feed = self._feeds[job_id] = JobFeed()
            feed.task = asyncio.create_task(self._watch(job_id, feed))
        feed.streams += 1
        try:
            yield feed
        finally:
            feed.streams -= 1
            if feed.streams == 0:
                if self._feeds.get(job_id) is feed:
                    del self._feeds[job_id]
                if feed.task is not None and not feed.task.done():
                    feed.task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait({feed.task})

    async def _watch(self, job_id: str, feed: JobFeed) -> None:
        try:
            async for event in self._router.watch(job_id, 0):
                async with feed.changed:
                    feed.events.append(event)
                    feed.changed.notify_all()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the streams end with it (the store failed)
            feed.error = exc
        finally:
            feed.done = True
            async with feed.changed:
                feed.changed.notify_all()


class CountedStream(StreamingResponse):
    """A StreamingResponse that releases its stream count however it ends (even when the
    client left before its body started, when the body generator never runs)."""

    def __init__(self, *args: object, release: Callable[[], None], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()
