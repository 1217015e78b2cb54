"""Server-sent event streams at scale (issue 14): one watcher per job however many streams
follow it, and a bound on the streams one token holds open. A real uvicorn server in the test's
event loop, real HTTP streams, a real SQLite file.

Before: every stream ran its own watcher (a database read per change and every 0.25 s: 1,000
streams of one owner made `/health/live` take 0.9 to 2.7 s), and any number could be opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from jobrouter import Router
from jobrouter.config import HttpConfig
from jobrouter.http.app import create_app
from tests.support.echo_router import echo_router
from tests.support.store_jobs import create_job

OWNER = "shop-1"
STREAMS = 20
WITHIN = 30.0  # a ceiling against hanging only
KEEP_ALIVE = ": keep-alive"


@contextlib.asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(
            app, lifespan="off", log_config=None, access_log=False, timeout_graceful_shutdown=1
        )
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(WITHIN):
            while True:  # uvicorn offers no event for it
                if server.started:
                    break
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        sock.close()


@pytest.fixture
async def router(tmp_path: Path) -> AsyncIterator[Router]:
    async with echo_router(f"sqlite:///{tmp_path / 'jobs.db'}") as opened:
        yield opened


async def _queued_job(router: Router, key: str) -> str:
    job = await create_job(
        router.store,
        owner=OWNER,
        idempotency_key=key,
        task="echo",
        input={"text": key},
        params={},
        deadline_s=None,
        claimed_by=None,
        claim_s=0,
    )
    return job.id


async def _follow(
    client: httpx.AsyncClient, url: str, token: str, started: asyncio.Event, lines: list[str]
) -> int:
    """Open a stream, note its first event, read it to its end; the answer's status."""
    headers = {"Authorization": f"Bearer {token}"}
    async with client.stream("GET", url, headers=headers) as answer:
        if answer.status_code != 200:
            return answer.status_code
        async for line in answer.aiter_lines():
            lines.append(line)
            if line.startswith("id:"):
                started.set()
    return answer.status_code


async def test_many_streams_of_one_job_share_one_watcher(router: Router) -> None:
    active = peak = 0
    original = router.watch

    async def counted(job_id: str, after: int = 0, poll: float = 0.25) -> AsyncIterator[Any]:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            async for event in original(job_id, after, poll):
                yield event
        finally:
            active -= 1

    router.watch = counted  # type: ignore[method-assign]
    job_id = await _queued_job(router, "k-many")
    token, _ = await router.store.tokens.create_token(OWNER)
    app = create_app(router)
    async with serving(app) as base, httpx.AsyncClient(timeout=WITHIN) as client:
        url = f"{base}/v1/jobs/{job_id}/events"
        starts = [asyncio.Event() for _ in range(STREAMS)]
        lines: list[list[str]] = [[] for _ in range(STREAMS)]
        streams = [
            asyncio.create_task(_follow(client, url, token, starts[n], lines[n]))
            for n in range(STREAMS)
        ]
        async with asyncio.timeout(WITHIN):
            await asyncio.gather(*(start.wait() for start in starts))
        assert peak == 1 and app.state.feeds.watchers() == 1  # one watcher, 20 streams
        await router.cancel(job_id, "enough")  # every stream ends with the job
        async with asyncio.timeout(WITHIN):
            assert await asyncio.gather(*streams) == [200] * STREAMS
    for got in lines:
        assert "event: job.queued" in got and "event: job.cancelled" in got
    assert app.state.feeds.watchers() == 0


async def test_a_token_holds_a_bounded_number_of_streams(router: Router) -> None:
    job_id = await _queued_job(router, "k-cap")
    token, record = await router.store.tokens.create_token(OWNER)
    other, _ = await router.store.tokens.create_token(OWNER)
    app = create_app(router, HttpConfig(max_streams_per_token=3))
    async with serving(app) as base, httpx.AsyncClient(timeout=WITHIN) as client:
        url = f"{base}/v1/jobs/{job_id}/events"
        starts = [asyncio.Event() for _ in range(3)]
        streams = [
            asyncio.create_task(_follow(client, url, token, starts[n], [])) for n in range(3)
        ]
        async with asyncio.timeout(WITHIN):
            await asyncio.gather(*(start.wait() for start in starts))
        refused = await client.get(url, headers={"Authorization": f"Bearer {token}"})
        assert refused.status_code == 429 and refused.headers["Retry-After"]
        assert refused.json()["type"].endswith("too-many-streams")
        fine = asyncio.Event()
        another = asyncio.create_task(_follow(client, url, other, fine, []))  # its own count
        async with asyncio.timeout(WITHIN):
            await fine.wait()
        streams[0].cancel()  # the client leaves: its count is given back
        async with asyncio.timeout(WITHIN):
            while True:  # the server notices the client left, then releases
                if app.state.feeds.streams[record.id] <= 2:
                    break
                await asyncio.sleep(0.01)
        await router.cancel(job_id, "enough")
        async with asyncio.timeout(WITHIN):
            await asyncio.gather(*streams[1:], another)


async def _ended(stream: asyncio.Task[int], lines: list[str]) -> dict[str, Any]:
    """The stream's status, and the data of its last event, which must say why it ended."""
    async with asyncio.timeout(WITHIN):
        assert await stream == 200
    events = [n for n, line in enumerate(lines) if line.startswith("event:")]
    assert lines[events[-1]] == "event: stream-ended", lines
    data: dict[str, Any] = json.loads(lines[events[-1] + 1].removeprefix("data: "))
    return data


async def test_revocation_and_expiry_end_open_streams_with_a_last_event(router: Router) -> None:
    """Three streams of one job (it stays queued: nothing else would end them), each of its own
    token. The first token is revoked, the second expires (its expiry moved into the past):
    their streams end within a heartbeat with a last event saying why; the third token's
    stream, checked since (a keep-alive follows each check that passed), goes on until the job
    ends. (mutant: the token check in event_stream removed, seen failing.)"""
    job_id = await _queued_job(router, "k-revoke")
    tokens = [await router.store.tokens.create_token(OWNER) for _ in range(3)]
    app = create_app(router, HttpConfig(heartbeat=0.1))
    async with serving(app) as base, httpx.AsyncClient(timeout=WITHIN) as client:
        url = f"{base}/v1/jobs/{job_id}/events"
        starts = [asyncio.Event() for _ in tokens]
        lines: list[list[str]] = [[] for _ in tokens]
        streams = [
            asyncio.create_task(_follow(client, url, token, starts[n], lines[n]))
            for n, (token, _) in enumerate(tokens)
        ]
        async with asyncio.timeout(WITHIN):
            await asyncio.gather(*(start.wait() for start in starts))
        assert await router.store.tokens.revoke_token(tokens[0][1].id)
        async with router.store.connector.write() as tx:
            await tx.execute(
                "UPDATE api_tokens SET expires_at = 1 WHERE id = :id", {"id": tokens[1][1].id}
            )
        revoked = await _ended(streams[0], lines[0])
        assert revoked["reason"] == "token-revoked" and "revoked" in revoked["detail"]
        assert (await _ended(streams[1], lines[1]))["reason"] == "token-expired"
        again = await client.get(url, headers={"Authorization": f"Bearer {tokens[0][0]}"})
        assert again.status_code == 401

        checks = lines[2].count(KEEP_ALIVE)
        async with asyncio.timeout(WITHIN):
            while lines[2].count(KEEP_ALIVE) == checks:  # noqa: ASYNC110 (lines of a stream)
                await asyncio.sleep(0.01)
        assert not streams[2].done()
        await router.cancel(job_id, "enough")
        async with asyncio.timeout(WITHIN):
            assert await streams[2] == 200
    assert "event: job.cancelled" in lines[2] and "event: stream-ended" not in lines[2]
