"""The HTTP client litellm is handed for each call: no redirect followed, every body bounded.

litellm's own clients follow redirects (``follow_redirects=True``: a 307/308 re-sends the POST
and its body to the Location's host, a 301/302/303 turns it into a GET there, and the other
origin's answer comes back as the certified provider's) and read a body whole, httpx inflating
it whole (a 1 MB gzip answer that expands to 1 GB took 2.3 GB of RSS). So every call carries a
client of ours (`LiteLLMClients.for_call`, litellm's documented ``client=`` argument):

    openai/...        an `openai.AsyncOpenAI` (what litellm's OpenAI handler takes) around
                      an httpx client with ``follow_redirects=False``
    hosted_vllm/...   litellm's `AsyncHTTPHandler` (what its generic HTTP handler takes) with
                      ``follow_redirects=False`` around the same transport
    anything else     litellm's own client (not bounded: docs/failures.md says so)

Both wrap litellm's own transport (aiohttp, as before: the cause chains `classify` reads are
unchanged, and vcrpy still records and replays) in `BoundedTransport`, which reads each body
through `jobrouter.providers.bounded_body`: it undoes gzip and deflate itself (so httpx never
inflates anything), a success answer within the call's cap (`ANSWER_CAP`, set by the provider
around each call: the cap depends on the request's max_tokens) and an error answer to
`ERROR_BODY_LIMIT`. A success answer past its cap raises `AnswerTooLarge` from the body stream,
which the SDK and litellm wrap; `classify` finds it in the cause chain. A 3xx comes back as an
answer (the SDK raises `httpx.HTTPStatusError` for it): `classify` makes it `Redirected`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

import httpx

from jobrouter.providers.bounded_body import (
    DEFAULT_BASE,
    Inflater,
    UnreadableEncoding,
    too_large,
    unreadable,
)
from jobrouter.providers.errors import ProviderError
from jobrouter.providers.http_wire import ERROR_BODY_LIMIT

ANSWER_CAP: ContextVar[int] = ContextVar("jobrouter_answer_cap", default=DEFAULT_BASE)
_DROPPED = (b"content-encoding", b"content-length")  # the body we pass on is decoded


class _BoundedStream(httpx.AsyncByteStream):
    def __init__(
        self, inner: httpx.AsyncByteStream, inflater: Inflater, limit: int, fail: Exception | None
    ) -> None:
        self._inner = inner
        self._inflater = inflater
        self._limit = limit
        self._fail = fail  # raised past the limit (a success answer); None: cut (an error's)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        passed = 0
        async for chunk in self._inner:
            out = self._inflater.feed(chunk)
            if self._inflater.over:
                if self._fail is not None:
                    raise self._fail
                yield out[: self._limit - passed]
                return
            passed += len(out)
            yield out

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx.AsyncBaseTransport):
    """`inner`'s answers with their bodies decoded and bounded (see the module docstring)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, provider: str) -> None:
        self._inner = inner
        self._provider = provider

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        status = response.status_code
        success = 200 <= status < 300
        limit = ANSWER_CAP.get() if success else ERROR_BODY_LIMIT
        try:
            inflater = Inflater(response.headers.get("content-encoding", ""), limit)
        except UnreadableEncoding as exc:
            await response.aclose()
            if success:
                raise unreadable(self._provider, status, exc) from exc
            inflater, response.stream = Inflater("", 0), httpx.ByteStream(b"")
        assert isinstance(response.stream, httpx.AsyncByteStream)
        fail = too_large(self._provider, limit, status) if success else None
        return httpx.Response(
            status,
            headers=[(k, v) for k, v in response.headers.raw if k.lower() not in _DROPPED],
            stream=_BoundedStream(response.stream, inflater, limit, fail),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Client(httpx.AsyncClient):
    """httpx's client, an `AnswerTooLarge` leaving it without httpx's frames: litellm formats and
    redacts the traceback of every failure several times over, in the event loop, and those
    frames (source lines parsed for 3.11's carets) cost it tens of milliseconds of loop time."""

    async def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        try:
            return await super().send(request, **kwargs)
        except ProviderError as exc:
            raise exc.with_traceback(None) from None


class LiteLLMClients:
    """One provider's client for litellm calls, made in the running loop on first use."""

    def __init__(self, provider: str, model: str, api_base: str | None) -> None:
        self._provider = provider
        self._model = model
        self._api_base = api_base
        self._client: Any = None
        self._made_for: tuple[asyncio.AbstractEventLoop, str] | None = None

    def for_call(self, litellm: Any, api_key: str, timeout: httpx.Timeout) -> Any:
        """The ``client=`` of a litellm call (None: a route litellm reaches with its own)."""
        if not self._model.startswith(("openai/", "hosted_vllm/")):
            return None
        key = (asyncio.get_running_loop(), api_key)
        if self._client is None or self._made_for != key:
            # a new key, or another event loop: the old client's connections belong to its loop
            self._client = self._make(litellm, api_key, timeout)
            self._made_for = key
        return self._client

    def _make(self, litellm: Any, api_key: str, timeout: httpx.Timeout) -> Any:
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

        inner = AsyncHTTPHandler.create_async_transport()
        assert inner is not None  # None only when neither aiohttp nor httpx transport exists
        bounded = BoundedTransport(inner, self._provider)
        if self._model.startswith("hosted_vllm/"):
            return AsyncHTTPHandler(timeout=timeout, transport=bounded, follow_redirects=False)
        import openai

        # typed Any: the SDK's annotation names its own httpx alias; an httpx.AsyncClient is it
        http: Any = _Client(transport=bounded, follow_redirects=False, timeout=timeout)
        return openai.AsyncOpenAI(
            api_key=api_key, base_url=self._api_base, http_client=http, max_retries=0
        )

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        await client.close()  # AsyncOpenAI and AsyncHTTPHandler both close their httpx client
