"""An OpenAI-compatible fault server for provider and router tests (loopback only).

Run it as a subprocess: ``python -m tests.providers.fault_server --port 0`` prints
``FAULT_SERVER_PORT=<port>`` once it listens on 127.0.0.1. From tests use
``start_fault_server()`` (a context manager returning a `FaultServer` handle).

Endpoints
    POST /v1/chat/completions   behaves as the current scenario says
    GET  /stats                 counters, in-flight high-water mark, the last request bodies
    POST /control               {"reset": true, "default": SCENARIO, "sequence": [SCENARIO, ...],
                                 "content": "...", "upstream": URL, "drop_share": 0.3, "seed": 1,
                                 "tokenizer_specials": ["<start_of_turn>", ...],
                                 "tokenizer_ordinary": ["<s>", ...]}
    POST /extras/tokenize       a FAKE tokenizer shaped like llama-cpp-python's endpoint: BOS (id 2)
                                first, each configured special marker one token, every other
                                UTF-8 byte one token; each configured ordinary marker is one token
                                too, but an ordinary one (as ``<s>`` is on Gemma). It tests our
                                plumbing, not a real vocabulary.
    POST /extras/detokenize     the fake tokenizer backwards: special ids give "" (llama.cpp skips
                                control tokens), ordinary ones their text, bytes their characters

A SCENARIO is a kind name or a dict {"kind": ..., params}. The next request takes the head of
`sequence`; when it is empty, `default` applies. A request header ``x-fault-scenario`` (kind name
or JSON) overrides both for that one request.

    answer        200 with a chat completion whose content is `content`; `"usage": false` leaves
                  the `usage` field out (a server that does not report it); `"system_read":
                  false` counts the prompt without its system messages (a server whose chat
                  template drops them)
    delay         sleep `seconds`, then answer
    hang          never answer (until the client goes away)
    status        answer HTTP `status` with an OpenAI error body; `retry_after` sets Retry-After;
                  `echo: true` echoes the request's credentials the way careless upstreams do:
                  the Authorization header and the bare key in the error message and body,
                  and the header again in the answer's headers; `say` adds its text to the
                  error's message and to an `X-Echo-Say` header
                  `location` sets a Location header (a redirect status)
    close_before  read the request, close the connection without computing anything
    drop_after    read the request, compute the answer (counted as completed), close unanswered
    reset         read the request, then abort the connection with a TCP RST
    garbled       200 with `body` as the whole HTTP body (default an HTML page): not a chat
                  completion at all
    trickle       send the answer's body in `chunks` pieces spread over `seconds`
    proxy         forward to `upstream`; drop `drop_share` of the answers (seeded RNG)
    bomb, huge    hostile bodies, generated lazily (`tests.providers.fault_hostile`)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.providers.fault_hostile import HOSTILE_KINDS, serve_hostile

DEFAULT_CONTENT = '{"text": "ok"}'
DEFAULT_SPECIALS = ("<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>", "<bos>")
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _scenario(spec: Any) -> dict[str, Any]:
    if isinstance(spec, str):
        spec = json.loads(spec) if spec.startswith("{") else {"kind": spec}
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ValueError(f"bad scenario: {spec!r}")
    return dict(spec)


def _scenario_name(spec: dict[str, Any]) -> str:
    if "name" in spec:
        return str(spec["name"])
    if spec["kind"] == "status":
        return f"status_{spec.get('status', 500)}"
    return str(spec["kind"])


@dataclass
class State:
    default: dict[str, Any] = field(default_factory=lambda: {"kind": "answer"})
    sequence: list[dict[str, Any]] = field(default_factory=list)
    content: str = DEFAULT_CONTENT
    upstream: str | None = None
    drop_share: float = 0.0
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    specials: tuple[str, ...] = DEFAULT_SPECIALS
    ordinary: tuple[str, ...] = ()
    total: int = 0
    by_scenario: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0
    completed: int = 0
    dropped: int = 0
    tokenize_calls: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)

    def stats(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "by_scenario": self.by_scenario,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "completed": self.completed,
            "dropped": self.dropped,
            "tokenize_calls": self.tokenize_calls,
            "last_request": self.requests[-1] if self.requests else None,
            "requests": self.requests,
        }


STATE = State()


def _control(body: dict[str, Any]) -> None:
    global STATE
    if body.get("reset"):
        STATE = State()
    if "default" in body:
        STATE.default = _scenario(body["default"])
    if "sequence" in body:
        STATE.sequence = [_scenario(s) for s in body["sequence"]]
    if "content" in body:
        STATE.content = str(body["content"])
    if "upstream" in body:
        STATE.upstream = body["upstream"]
        STATE.default = {"kind": "proxy"}
    if "drop_share" in body:
        STATE.drop_share = float(body["drop_share"])
    if "seed" in body:
        STATE.rng = random.Random(int(body["seed"]))
    if "tokenizer_specials" in body:
        STATE.specials = tuple(body["tokenizer_specials"])
    if "tokenizer_ordinary" in body:
        STATE.ordinary = tuple(body["tokenizer_ordinary"])


def _completion_body(
    request: dict[str, Any], content: str, *, usage: bool = True, system_read: bool = True
) -> bytes:
    read = [m for m in request.get("messages", []) if system_read or m.get("role") != "system"]
    prompt_chars = sum(len(str(m.get("content", ""))) for m in read)
    body: dict[str, Any] = {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fault-model"),
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
    }
    if usage:
        body["usage"] = {
            "prompt_tokens": max(1, prompt_chars // 4),
            "completion_tokens": 7,
            "total_tokens": max(1, prompt_chars // 4) + 7,
        }
    return json.dumps(body).encode()


def _error_body(status: int, echo: dict[str, str] | None = None, say: str = "") -> bytes:
    message = f"fault server says {status}" + (f" ({say})" if say else "")
    error: dict[str, Any] = {"message": message, "type": "fault", "code": status}
    if echo is not None:
        auth = echo.get("authorization", "")
        key = auth.split(" ", 1)[-1]
        error["message"] = (
            f"{message}: Incorrect API key provided: {key}. You sent Authorization: {auth}"
        )
        error["request_headers"] = echo
        error["api_key"] = key
    return json.dumps({"error": error}).encode()


def _head(status: int, length: int, extra: dict[str, str] | None = None) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}",
        "Content-Type: application/json",
        f"Content-Length: {length}",
        "Connection: keep-alive",
    ]
    lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    headers = {}
    for line in header_lines:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
            body += await reader.readexactly(size + 2)
            body = body[:-2]
        await reader.readuntil(b"\r\n")
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return method, path, headers, body


async def _sleep_or_eof(reader: asyncio.StreamReader, seconds: float | None) -> bool:
    """Wait `seconds` (None: forever); True when the client went away first."""
    try:
        data = await asyncio.wait_for(reader.read(1), seconds)
    except TimeoutError:
        return False
    return data == b""


async def _send(
    writer: asyncio.StreamWriter, status: int, body: bytes, extra: dict[str, str] | None = None
) -> None:
    writer.write(_head(status, len(body), extra) + body)
    await writer.drain()


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


_UPSTREAM_CLIENT: Any = None  # httpx.AsyncClient, made on the first proxied request


async def _proxy(path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
    # One client for the process, its connections kept alive: a client per request costs tens
    # of milliseconds of CPU (its TLS context), which capped the proxy at a few requests a second.
    global _UPSTREAM_CLIENT
    import httpx  # only the proxy mode needs a client

    assert STATE.upstream is not None
    if _UPSTREAM_CLIENT is None:
        _UPSTREAM_CLIENT = httpx.AsyncClient(
            timeout=None, limits=httpx.Limits(max_connections=None, max_keepalive_connections=64)
        )
    forward = {k: v for k, v in headers.items() if k in ("authorization", "content-type")}
    response = await _UPSTREAM_CLIENT.post(
        STATE.upstream.rstrip("/") + path, content=body, headers=forward
    )
    return response.status_code, response.content


async def _chat(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    path: str,
    headers: dict[str, str],
    body: bytes,
) -> bool:
    """Serve one chat request by its scenario; False when the connection must close."""
    override = headers.get("x-fault-scenario")
    if override:
        spec = _scenario(override)
    elif STATE.sequence:
        spec = STATE.sequence.pop(0)
    else:
        spec = STATE.default
    name = _scenario_name(spec)
    STATE.total += 1
    STATE.by_scenario[name] = STATE.by_scenario.get(name, 0) + 1
    parsed = json.loads(body or b"{}")
    STATE.requests = [
        *STATE.requests[-19:],
        {"path": path, "headers": headers, "body": parsed, "scenario": name},
    ]
    kind = spec["kind"]
    if kind == "close_before":
        return False
    if kind == "reset":
        _abort_with_rst(writer)
        return False
    if kind == "hang":
        await _sleep_or_eof(reader, None)
        return False
    if kind == "delay" and await _sleep_or_eof(reader, float(spec.get("seconds", 1.0))):
        return False
    if kind == "status" or kind in HOSTILE_KINDS:
        return await _answer_at_once(writer, spec, headers)
    if kind == "proxy":
        return await _serve_proxy(writer, path, headers, body)
    if kind == "garbled":
        await _send(writer, 200, str(spec.get("body", "<html>bad gateway</html>")).encode())
        return True
    answer = _completion_body(
        parsed,
        str(spec.get("content", STATE.content)),
        usage=bool(spec.get("usage", True)),
        system_read=bool(spec.get("system_read", True)),
    )
    STATE.completed += 1
    if kind == "drop_after":
        STATE.dropped += 1
        return False
    if kind == "trickle":
        await _trickle(writer, answer, float(spec.get("seconds", 3.0)), int(spec.get("chunks", 6)))
        return True
    await _send(writer, 200, answer)
    return True


async def _answer_at_once(
    writer: asyncio.StreamWriter, spec: dict[str, Any], headers: dict[str, str]
) -> bool:
    """An answer that needs no completion: an error status, or a hostile body."""
    if spec["kind"] in HOSTILE_KINDS:
        return await serve_hostile(writer, spec)
    await _send_status(writer, spec, headers)
    return True


async def _send_status(
    writer: asyncio.StreamWriter, spec: dict[str, Any], headers: dict[str, str]
) -> None:
    """The `status` scenario: an error answer, echoing what it was asked to."""
    status = int(spec.get("status", 500))
    extra = {"Retry-After": str(spec["retry_after"])} if "retry_after" in spec else {}
    if "location" in spec:
        extra["Location"] = str(spec["location"])
    echo = headers if spec.get("echo") else None
    if echo is not None:
        extra["X-Echo-Authorization"] = headers.get("authorization", "")
    say = str(spec.get("say", ""))
    if say:
        extra["X-Echo-Say"] = say
    await _send(writer, status, _error_body(status, echo, say), extra)


async def _serve_proxy(
    writer: asyncio.StreamWriter, path: str, headers: dict[str, str], body: bytes
) -> bool:
    status, answer = await _proxy(path, headers, body)
    STATE.completed += 1
    if STATE.rng.random() < STATE.drop_share:
        STATE.dropped += 1
        return False
    await _send(writer, status, answer)
    return True


async def _trickle(writer: asyncio.StreamWriter, body: bytes, seconds: float, chunks: int) -> None:
    writer.write(_head(200, len(body)))
    step = max(1, len(body) // chunks + 1)
    for start in range(0, len(body), step):
        writer.write(body[start : start + step])
        await writer.drain()
        if start + step < len(body):
            await asyncio.sleep(seconds / chunks)


def _tokenize(text: str) -> list[int]:
    tokens, i = [2], 0
    while i < len(text):
        special = next((s for s in STATE.specials if text.startswith(s, i)), None)
        ordinary = next((s for s in STATE.ordinary if text.startswith(s, i)), None)
        if special is not None:
            tokens.append(100 + STATE.specials.index(special))
            i += len(special)
        elif ordinary is not None:
            tokens.append(500 + STATE.ordinary.index(ordinary))
            i += len(ordinary)
        else:
            tokens.extend(1000 + b for b in text[i].encode())
            i += 1
    return tokens


def _detokenize(tokens: list[int]) -> str:
    out = bytearray()
    for token in tokens:
        if 500 <= token < 500 + len(STATE.ordinary):
            out += STATE.ordinary[token - 500].encode()
        elif token >= 1000:
            out.append(token - 1000)
    return out.decode(errors="replace")


async def _route(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
) -> bool:
    if method == "POST" and path.endswith("/chat/completions"):
        STATE.in_flight += 1
        STATE.max_in_flight = max(STATE.max_in_flight, STATE.in_flight)
        try:
            return await _chat(reader, writer, path, headers, body)
        finally:
            STATE.in_flight -= 1
    if method == "GET" and path == "/stats":
        await _send(writer, 200, json.dumps(STATE.stats()).encode())
    elif method == "POST" and path == "/control":
        _control(json.loads(body or b"{}"))
        await _send(writer, 200, json.dumps(STATE.stats()).encode())
    elif method == "POST" and path in ("/extras/tokenize", "/extras/tokenize/count"):
        STATE.tokenize_calls += 1
        tokens = _tokenize(json.loads(body)["input"])
        result = {"count": len(tokens)} if path.endswith("count") else {"tokens": tokens}
        await _send(writer, 200, json.dumps(result).encode())
    elif method == "POST" and path == "/extras/detokenize":
        STATE.tokenize_calls += 1
        text = _detokenize(json.loads(body)["tokens"])
        await _send(writer, 200, json.dumps({"text": text}).encode())
    else:
        await _send(writer, 404, _error_body(404))
    return True


async def _connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                method, path, headers, body = await _read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            if not await _route(reader, writer, method, path, headers, body):
                return
    except (ConnectionError, OSError):
        return
    finally:
        if not writer.transport.is_closing():
            writer.close()


async def serve(port: int) -> None:
    server = await asyncio.start_server(_connection, "127.0.0.1", port, backlog=512)
    bound = server.sockets[0].getsockname()[1]
    print(f"FAULT_SERVER_PORT={bound}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream", default=None, help="proxy mode: forward to this base URL")
    parser.add_argument("--drop-share", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.upstream:
        _control({"upstream": args.upstream, "drop_share": args.drop_share, "seed": args.seed})
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port))


# ---- test-side handle ---------------------------------------------------------------------


@dataclass
class FaultServer:
    """A running fault server: its address and its control endpoints (sync, stdlib only)."""

    port: int
    process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return f"{self.url}/v1"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def control(self, **settings: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/control", settings)
        return result

    def reset(self, **settings: Any) -> dict[str, Any]:
        return self.control(reset=True, **settings)

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/stats")
        return result


@contextlib.contextmanager
def start_fault_server(*extra_args: str, startup_timeout: float = 120.0) -> Iterator[FaultServer]:
    """Start the fault server as a subprocess on a free loopback port; kill it on exit."""
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.providers.fault_server", "--port", "0", *extra_args],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        port = _await_port(process, startup_timeout)
        server = FaultServer(port=port, process=process)
        server.stats()  # answers: it is ready
        yield server
    finally:
        process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _await_port(process: subprocess.Popen[str], timeout: float) -> int:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith("FAULT_SERVER_PORT="):
            return int(line.split("=", 1)[1])
        if not line and process.poll() is not None:
            break
    raise RuntimeError(f"fault server did not start (exit code {process.poll()})")


if __name__ == "__main__":
    main()
