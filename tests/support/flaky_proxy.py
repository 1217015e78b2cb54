"""A TCP proxy on 127.0.0.1 that loses traffic the way real networks do, with a seeded RNG.

For each request (the first bytes a client sends after the previous answer began) it cuts the
connection before forwarding with probability `cut_before`: the server never sees the request.
For each answer (the first bytes the server sends after a forwarded request) it cuts the
connection instead of forwarding with probability `drop_after`: the server did the work, the
client never hears of it. Both sides are closed, like a reset in the middle of the path.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass, field

CHUNK = 65536


@dataclass
class ProxyStats:
    connections: int = 0
    requests: int = 0
    cut_before: int = 0
    dropped_after: int = 0


@dataclass
class _Link:
    """One proxied connection; `answering` flips on each direction change."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    answering: bool = True  # so that the first client bytes count as a new request
    closed: bool = False

    def cut(self) -> None:
        self.closed = True
        for writer in (self.client, self.upstream):
            transport = writer.transport
            if not transport.is_closing():
                transport.abort()  # RST, not a polite FIN: the peer sees a lost connection


@dataclass
class FlakyProxy:
    target_port: int
    cut_before: float = 0.01
    drop_after: float = 0.025
    seed: int = 20240611
    stats: ProxyStats = field(default_factory=ProxyStats)
    port: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        link = _Link(client=writer, upstream=up_writer)
        tasks = [
            asyncio.create_task(self._pump(link, reader, up_writer, request=True)),
            asyncio.create_task(self._pump(link, up_reader, writer, request=False)),
        ]
        self._tasks.update(tasks)
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            self._tasks.difference_update(tasks)
            link.cut()

    async def _pump(
        self,
        link: _Link,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        *,
        request: bool,
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while not link.closed:
                data = await source.read(CHUNK)
                if not data:
                    break
                if request and link.answering:  # the first bytes of a new request
                    link.answering = False
                    self.stats.requests += 1
                    if self._rng.random() < self.cut_before:
                        self.stats.cut_before += 1
                        link.cut()
                        return
                elif not request and not link.answering:  # the first bytes of an answer
                    link.answering = True
                    if self._rng.random() < self.drop_after:
                        self.stats.dropped_after += 1
                        link.cut()
                        return
                sink.write(data)
                await sink.drain()
        link.cut()
