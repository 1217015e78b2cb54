"""What one POST costs in CPU through each HTTP client, and what the native provider adds.

    python -m tests.bench.http_clients [--calls 1000] [--concurrency 1 64]

Starts the benchmark stub (its own process) and, at each concurrency, times the same
chat-completions POST through a bare `httpx.AsyncClient`, a bare `aiohttp.ClientSession` (what
the retired prototype used, and since issue 18 the native transport's wire) and
`OpenAIHttpProvider.complete` (that aiohttp wire plus the adapter: deadline, retry layer,
bulkhead, parsing). Prints CPU ms per call (this process, all threads) and calls/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable

from tests.bench.__main__ import start_stub

BODY = json.dumps({"model": "stub", "messages": [{"role": "user", "content": "hi"}]}).encode()
HEADERS = {"Content-Type": "application/json"}


async def drive(call: Callable[[], Awaitable[None]], calls: int, concurrency: int) -> str:
    await call()  # connection and first-call setup before the clock

    async def lane(count: int) -> None:
        for _ in range(count):
            await call()

    per_lane = max(1, calls // concurrency)
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(lane(per_lane) for _ in range(concurrency)))
    done = per_lane * concurrency
    cpu_ms = (time.process_time() - cpu) * 1000 / done
    return f"{cpu_ms:6.3f} ms CPU / call  {done / (time.perf_counter() - wall):7.0f} calls/s"


async def run(port: int, calls: int, concurrency: int) -> None:
    import aiohttp
    import httpx

    from jobrouter.providers import CompletionRequest, Message, ProviderConfig
    from jobrouter.providers.openai_http import OpenAIHttpProvider

    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    async with httpx.AsyncClient(timeout=60) as client:  # the stub's first answer: seconds

        async def with_httpx() -> None:
            (await client.post(url, content=BODY, headers=HEADERS)).raise_for_status()

        print(f"c={concurrency:<3} httpx     {await drive(with_httpx, calls, concurrency)}")
    async with aiohttp.ClientSession() as session:

        async def with_aiohttp() -> None:
            async with session.post(url, data=BODY, headers=HEADERS) as response:
                await response.read()

        print(f"c={concurrency:<3} aiohttp   {await drive(with_aiohttp, calls, concurrency)}")
    config = ProviderConfig(
        model="openai/stub",
        api_base=f"http://127.0.0.1:{port}/v1",
        transport="openai",
        max_concurrency=256,
    )
    request = CompletionRequest(messages=(Message(role="user", content="hi"),))
    async with OpenAIHttpProvider("stub", config) as provider:

        async def with_provider() -> None:
            await provider.complete(request)

        print(f"c={concurrency:<3} provider  {await drive(with_provider, calls, concurrency)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    args = parser.parse_args()
    stub, port = start_stub()
    try:
        for concurrency in args.concurrency:
            asyncio.run(run(port, args.calls, concurrency))
    finally:
        stub.terminate()
        stub.wait(timeout=30)


if __name__ == "__main__":
    main()
