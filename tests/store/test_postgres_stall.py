"""A PostgreSQL server that stalls (issue 14): requests and readiness fail with a transient
`StoreError` (HTTP 503) once the command or pool-acquire timeout passes, instead of hanging for
as long as the stall lasts. Before, there was no timeout: this test hung until its ceiling.

The stall is real traffic held back: a TCP proxy between the store and the server stops
forwarding in both directions (as a frozen server or a black-holed route does).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from jobrouter.errors import StoreError
from jobrouter.store import open_store
from tests.store.pg import create_database, drop_databases
from tests.support.store_jobs import create_job

pytestmark = pytest.mark.postgres
CEILING_S = 60.0  # only guards against hanging: the test decides on the StoreError


class StallProxy:
    """127.0.0.1:<port> -> PostgreSQL; `stall()` holds every byte until `resume()`."""

    def __init__(self, port: int) -> None:
        self.upstream_port = port
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    def stall(self) -> None:
        self.flowing.clear()

    def resume(self) -> None:
        self.flowing.set()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        await asyncio.gather(
            self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
        )

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        writer.close()


@pytest.fixture
async def proxied_url() -> AsyncIterator[tuple[str, StallProxy]]:
    url = await create_database()
    host_port = url.split("@", 1)[1].split("/", 1)[0]
    proxy = StallProxy(int(host_port.rsplit(":", 1)[1]))
    await proxy.start()
    try:
        yield url.replace(host_port, f"127.0.0.1:{proxy.port}"), proxy
    finally:
        proxy.resume()
        await proxy.close()
        drop_databases([url])


async def test_a_stalled_server_fails_requests_and_readiness_instead_of_hanging(
    proxied_url: tuple[str, StallProxy],
) -> None:
    url, proxy = proxied_url
    store = await open_store(url, command_timeout=1.0, acquire_timeout=1.0)
    try:
        job = await create_job(
            store,
            owner="o",
            idempotency_key="k",
            task="t",
            input={},
            params={},
            deadline_s=None,
            claimed_by=None,
            claim_s=0,
        )
        await store.health.prove_write()
        proxy.stall()
        async with asyncio.timeout(CEILING_S):
            with pytest.raises(StoreError) as read:
                await store.jobs.get_job(job.id)
            with pytest.raises(StoreError) as write:
                await store.health.prove_write()
            with pytest.raises(StoreError):  # every pooled connection is stuck or busy now
                await store.health.pending_migrations()
        assert read.value.transient and write.value.transient
        proxy.resume()
    finally:
        proxy.resume()
        async with asyncio.timeout(CEILING_S):
            await store.close()
