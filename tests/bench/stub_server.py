"""A zero-latency OpenAI-compatible chat-completions stub, for benchmarks only.

Plain asyncio (no framework) so that the stub costs as little CPU as possible and the numbers
measure the client side. Keep-alive HTTP/1.1; every POST gets the same small completion.
Run: python -m tests.bench.stub_server --port N
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

ANSWER = {"text": "Warm saffron tea for cold evenings."}


def _body() -> bytes:
    return json.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
        "model": "stub", "system_fingerprint": None,
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": json.dumps(ANSWER)}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 12, "total_tokens": 32},
    }).encode()


BODY = _body()
RESPONSE = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:].strip())
            if length:
                await reader.readexactly(length)
            writer.write(RESPONSE)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", port, backlog=1024)
    print(f"stub listening on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(main(parser.parse_args().port))
