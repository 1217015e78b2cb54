"""The native transport's connections (`jobrouter.providers.http_wire`), against a small asyncio
stub server standing for llama.cpp behind uvicorn; it counts every request it received, so each test
decides on what the server saw.

- "sent" (`jobrouter.providers.http_wire.Sent`): a deadline that expires before the request's
  headers went out is `NotSent`, never `OutcomeUnknown` (the stub's ``/extras/tokenize`` never
  answers, holding its connection).
- keep-alive: like uvicorn, the stub gives up a connection idle for 5 s; a request that still
  arrives on it is dropped unread (the race of a POST against the server's close)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobrouter.providers.base import CompletionRequest, Message
from jobrouter.providers.classify import HttpStatusError, classify
from jobrouter.providers.config import ProviderConfig
from jobrouter.providers.errors import NotSent, Rejected
from jobrouter.providers.http_wire import ERROR_BODY_LIMIT, EXTRAS_HEADROOM, Wire, WireTimeouts
from jobrouter.providers.openai_http import OpenAIHttpProvider
from jobrouter.providers.redact import REDACTED, scrub

UVICORN_KEEPALIVE = 5.0  # uvicorn's --timeout-keep-alive default
ANSWER = json.dumps(
    {"choices": [{"message": {"role": "assistant", "content": "ok"}}], "model": "stub"}
).encode()


@dataclass
class Stub:
    port: int = 0
    paths: list[str] = field(default_factory=list)
    seen: asyncio.Condition = field(default_factory=asyncio.Condition)
    given_up: int = 0  # idle connections past uvicorn's 5 s cutoff, or closed by the client
    dropped: int = 0  # requests that arrived on one
    raw: dict[str, bytes] = field(default_factory=dict)  # path -> whole answer, then close
    heads: list[str] = field(default_factory=list)  # every request's head, as received

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        idle: asyncio.Task[None] | None = None
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if idle is not None and idle.done():
                    self.dropped += 1
                    return  # closing it: the request is dropped unread
                if idle is not None:
                    idle.cancel()
                self.heads.append(head.decode())
                lines = head.decode().split("\r\n")
                path = lines[0].split(" ")[1]
                length = next(
                    int(h.split(":", 1)[1]) for h in lines if h.lower().startswith("content-length")
                )
                await reader.readexactly(length)
                async with self.seen:
                    self.paths.append(path)
                    self.seen.notify_all()
                if path in self.raw:
                    writer.write(self.raw[path])
                    await writer.drain()
                    return
                if path.startswith("/extras/"):
                    await reader.read()  # never answer: hold the connection until the client goes
                    return
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(ANSWER)}\r\n\r\n".encode()
                    + ANSWER
                )
                await writer.drain()
                idle = asyncio.create_task(self._give_up_after_idle())
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if idle is not None and not idle.done():
                idle.cancel()  # the client closed the idle connection first
                async with self.seen:
                    self.given_up += 1
                    self.seen.notify_all()
            writer.close()

    async def _give_up_after_idle(self) -> None:
        await asyncio.sleep(UVICORN_KEEPALIVE)
        async with self.seen:
            self.given_up += 1
            self.seen.notify_all()

    async def wait_given_up(self, count: int) -> None:
        async with self.seen:
            await asyncio.wait_for(self.seen.wait_for(lambda: self.given_up >= count), 30)

    async def wait_for(self, path: str, count: int) -> None:
        async with self.seen:
            await asyncio.wait_for(self.seen.wait_for(lambda: self.paths.count(path) >= count), 30)


@pytest.fixture
async def stub() -> AsyncIterator[Stub]:
    stub = Stub()
    server = await asyncio.start_server(stub.handle, "127.0.0.1", 0)
    stub.port = server.sockets[0].getsockname()[1]
    yield stub
    server.close()


def _provider(stub: Stub) -> OpenAIHttpProvider:
    return OpenAIHttpProvider(
        "stub",
        ProviderConfig(
            model="openai/stub",
            api_base=f"http://127.0.0.1:{stub.port}/v1",
            transport="openai",
            chat_format="gemma",
            max_concurrency=1,
        ),
    )


REQUEST = CompletionRequest(messages=(Message(role="user", content="hi"),), timeout=0.5)


async def _hold_connections(provider: OpenAIHttpProvider, stub: Stub, count: int) -> list[Any]:
    held = [asyncio.create_task(provider._tokenize(f"text {i}")) for i in range(count)]
    await stub.wait_for("/extras/tokenize", count)
    return held


async def test_a_hanging_extras_call_does_not_take_the_chat_calls_connection(stub: Stub) -> None:
    provider = _provider(stub)
    held = await _hold_connections(provider, stub, 1)
    try:
        completion = await provider.complete(REQUEST)
        assert completion.text == "ok"
    finally:
        for task in held:
            task.cancel()
        await provider.close()


async def test_a_deadline_spent_waiting_for_a_connection_is_not_sent(stub: Stub) -> None:
    """Every connection held (max_concurrency + headroom hanging /extras calls): the chat call
    waits for one until its deadline. The server never saw it: NotSent, not OutcomeUnknown."""
    provider = _provider(stub)
    held = await _hold_connections(provider, stub, 1 + EXTRAS_HEADROOM)
    try:
        with pytest.raises(NotSent) as caught:
            await provider.complete(REQUEST)
        assert "before the request was sent" in str(caught.value)
        assert not caught.value.retryable
        assert "/v1/chat/completions" not in stub.paths
    finally:
        for task in held:
            task.cancel()
        await provider.close()


async def test_a_connection_idle_past_the_servers_keepalive_is_not_reused(stub: Stub) -> None:
    """After the idle connection ended (the server gave it up at 5 s, as uvicorn does, or the
    client closed it first), the next call goes out on a new one: with aiohttp's default 15 s
    keep-alive it went out on the old one, unanswered, an outcome unknown for a request the
    server never read."""
    provider = _provider(stub)
    try:
        await provider.complete(REQUEST)
        await stub.wait_given_up(1)
        completion = await provider.complete(REQUEST)
        assert completion.text == "ok"
        assert stub.dropped == 0
        assert stub.paths.count("/v1/chat/completions") == 2
    finally:
        await provider.close()


def _raw(status: str, body: bytes, length: int | None = None, headers: str = "") -> bytes:
    declared = len(body) if length is None else length
    head = f"HTTP/1.1 {status}\r\n{headers}Content-Length: {declared}\r\n\r\n"
    return head.encode() + body


async def _post(stub: Stub, path: str) -> HttpStatusError:
    wire = Wire(WireTimeouts(connect=5.0, read=30.0), connections=1)
    try:
        with pytest.raises(HttpStatusError) as caught:
            await wire.post(f"http://127.0.0.1:{stub.port}{path}", b"{}", {})
    finally:
        await wire.close()
    return caught.value


async def test_an_error_answers_body_is_read_up_to_the_cap(stub: Stub) -> None:
    stub.raw["/big"] = _raw("500 Internal Server Error", b"x" * (1024 * 1024))
    error = await _post(stub, "/big")
    assert error.response.status_code == 500
    assert len(error.response.text) == ERROR_BODY_LIMIT


async def test_an_error_answer_whose_body_is_cut_is_still_its_status(stub: Stub) -> None:
    """The status arrived: it proves what it proves (here 400, not processed), though the body
    did not all arrive (it was a ClientPayloadError, an outcome unknown)."""
    stub.raw["/cut"] = _raw("400 Bad Request", b'{"error": {"mess', length=1000)
    error = await _post(stub, "/cut")
    assert error.response.status_code == 400
    assert error.response.text.startswith('{"error": {"mess')
    assert isinstance(classify(error, "stub"), NotSent)


NOT_GZIP = "Content-Encoding: gzip\r\n"  # with a body that is no gzip stream


async def test_a_success_answer_that_cannot_be_decoded_is_rejected(stub: Stub) -> None:
    """A 200 whose body is not in the coding it claims: the server had the request (it may
    have acted), so `rejected`, never a provider bug.
    Mutant: Wire `_success_body`'s `except UnreadableEncoding` re-raising (the raw error
    escaped the wire: `unknown`), seen failing."""
    stub.raw["/bad"] = _raw("200 OK", b"this is not gzip", headers=NOT_GZIP)
    wire = Wire(WireTimeouts(connect=5.0, read=30.0), connections=1)
    try:
        with pytest.raises(Rejected, match="cannot be decoded"):
            await wire.post(f"http://127.0.0.1:{stub.port}/bad", b"{}", {})
    finally:
        await wire.close()


async def test_an_error_answer_that_cannot_be_decoded_is_still_its_status(stub: Stub) -> None:
    """A 400 whose body is not in the coding it claims is still a 400 (not processed).
    Mutant: `_error_text`'s `except UnreadableEncoding` re-raising (the raw error escaped the
    wire, the status lost: `unknown`), seen failing."""
    stub.raw["/bad"] = _raw("400 Bad Request", b"this is not gzip", headers=NOT_GZIP)
    error = await _post(stub, "/bad")
    assert error.response.status_code == 400
    assert "[body not decodable" in error.response.text
    assert isinstance(classify(error, "stub"), NotSent)


async def test_an_extras_answer_nested_too_deep_is_rejected(stub: Stub) -> None:
    stub.raw["/extras/tokenize"] = _raw("200 OK", b"[" * 100_000)
    provider = _provider(stub)
    try:
        with pytest.raises(Rejected) as caught:
            await provider._tokenize("hi")
        assert "RecursionError" in str(caught.value)
    finally:
        await provider.close()


PROXY_PASSWORD = "pr0xy-pa55word"


async def test_proxy_credentials_leave_the_url_and_go_as_proxy_auth(
    stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stub plays the proxy: it receives the absolute URL and the Proxy-Authorization."""
    for name in ("no_proxy", "NO_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", f"http://bob:{PROXY_PASSWORD}@127.0.0.1:{stub.port}")
    wire = Wire(WireTimeouts(connect=5.0, read=30.0), connections=1)
    target = "http://upstream.test/v1/chat/completions"
    try:
        proxy = wire.proxy_for(target)
        assert proxy is not None
        assert proxy.url == f"http://127.0.0.1:{stub.port}"  # no credentials to reach a message
        await wire.post(target, b"{}", {"Content-Type": "application/json"})
    finally:
        await wire.close()
    assert stub.paths == [target]
    expected = base64.b64encode(f"bob:{PROXY_PASSWORD}".encode()).decode()
    assert f"Proxy-Authorization: Basic {expected}" in stub.heads[0]
    assert scrub(f"proxy said {PROXY_PASSWORD}") == f"proxy said {REDACTED}"
