"""A zero-latency OpenAI-compatible chat-completions stub, for benchmarks only.

Plain asyncio (no framework) so that the stub costs as little CPU as possible and the numbers
measure the client side. Keep-alive HTTP/1.1; every POST gets the same small completion, with
the prompt's token count a hosted OpenAI-compatible server would report (litellm's offline
`token_counter`, the count certification compares the rendering with; cached per prompt): a
fixed count would fail the rendering check of the contract-gated task.
Run: python -m tests.bench.stub_server --port N (0: any free port, printed when listening)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from functools import lru_cache

ANSWER = {"text": "Warm saffron tea for cold evenings."}
COMPLETION_TOKENS = 12


@lru_cache(maxsize=4096)
def _response(messages: str) -> bytes:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network here
    from litellm import token_counter  # imported on the first request, not at start-up

    prompt_tokens = token_counter(model="openai/stub", messages=json.loads(messages))
    body = _body(prompt_tokens)
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def _body(prompt_tokens: int) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "stub",
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "logprobs": None,
                    "message": {"role": "assistant", "content": json.dumps(ANSWER)},
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": COMPLETION_TOKENS,
                "total_tokens": prompt_tokens + COMPLETION_TOKENS,
            },
        }
    ).encode()


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:].strip())
            body = await reader.readexactly(length) if length else b"{}"
            messages = json.loads(body).get("messages", [])
            writer.write(_response(json.dumps(messages, sort_keys=True)))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", port, backlog=1024)
    port = server.sockets[0].getsockname()[1]  # the one the system chose for --port 0
    print(f"stub listening on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(main(parser.parse_args().port))
