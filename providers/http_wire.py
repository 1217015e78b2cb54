"""One provider's HTTP wire: an aiohttp session, one POST, an error answer read first (capped).

Used by the native transport (`jobrouter.providers.openai_http`) for chat completions and by every
transport's `inspect_prompt` for llama.cpp's ``/extras`` tokenizer (`jobrouter.providers.adapter`).

`Wire` holds ONE `aiohttp.ClientSession` per provider, made on first use inside the running
event loop and closed by `close()`:

- `TCPConnector(limit=...)`: the provider's `max_concurrency` connections plus
  `EXTRAS_HEADROOM` (the bulkhead bounds the chat calls in flight; the ``/extras`` calls of an
  inspection are outside it and must not take a chat call's connection), kept alive between
  calls for at most `KEEPALIVE_SECONDS` (4 s) idle. aiohttp's default is 15 s, but uvicorn
  (llama-cpp-python's server, vLLM's) closes an idle connection after 5 s: a POST written on a
  connection the server is closing gets no answer (`ServerDisconnectedError`, an outcome
  unknown for a request the server dropped unread). aiohttp never reuses a connection idle for
  longer than the keep-alive, so 4 s stays clear of the 5 s (httpx's default was 5 s).
- A `TraceConfig` whose `on_request_headers_sent` sets the `Sent` mark a caller passes to
  `post`: until it is set, nothing of the request reached the provider (waiting for a pooled
  connection, DNS, connect), so a deadline expiring then is `NotSent`
  (`jobrouter.providers.adapter`).
- `ClientTimeout(sock_connect=timeout.connect, sock_read=timeout.read, connect=timeout.read)`:
  the connect timeout of one socket, the inactivity timeout of a read, and a bound on waiting
  for a pooled connection plus connecting (as httpx's pool timeout was). No `total`: the
  adapter's deadline bounds the whole call, retries included.
- No redirects followed (a POST is not re-sent elsewhere): a 3xx is an `HttpStatusError` like
  any other answer outside 2xx (`classify`: `Redirected`).
- `auto_decompress=False` and ``Accept-Encoding: gzip, deflate``: every body is read through
  `jobrouter.providers.bounded_body` chunk by chunk and decoded within its cap (a success
  answer's `limit`, an error answer's `ERROR_BODY_LIMIT`), so no peer can make a call hold more
  than that in memory; the rest of a longer body is never read (the connection is dropped).
- Proxies from the environment (``http_proxy`` / ``https_proxy`` / ``no_proxy``, as httpx
  honoured them), looked up once per origin and passed per request; credentials in the proxy
  URL (``http://user:pass@proxy:3128``) are taken out of it (the URL may reach error text) and
  sent as the ``Proxy-Authorization`` header (on the CONNECT for https, on the request itself
  for http), the password registered for redaction. Not aiohttp's
  ``trust_env=True``: that looks them up, and reads ~/.netrc, on every request, which measured
  0.3 ms of CPU per call against the benchmark stub (`python -m tests.bench.http_clients`: 0.54
  against 0.17 ms at c=1). ~/.netrc is not read (every request carries its Authorization).

`post` reads a success answer's body up to `limit` (decoded; `AnswerTooLarge` past it) and an
error answer's body before it raises (aiohttp's `raise_for_status` would drop
the body, and with it the server's `error.message` the operator needs), at most
`ERROR_BODY_LIMIT` (64 KiB) of it, and raises `jobrouter.providers.classify.HttpStatusError` for any
status outside 2xx, with the status, reason, headers (Retry-After) and body text, even when
reading the body failed (a cut body, a read timeout: the status proves what it proves);
`classify` maps it by `STATUS_TABLE`. Everything else aiohttp raises is left to `classify` too:
`ClientConnectorError` / `ConnectionTimeoutError` (nothing sent) are `NotSent`;
`ServerDisconnectedError`, `ClientOSError`, a socket read timeout, a broken payload while
reading a success answer's body are `OutcomeUnknown`.

vcrpy (9.x) patches `ClientSession._request`, so `jobrouter.providers.cassettes` records and replays
this wire; a request missing from a replayed cassette raises vcrpy's
`CannotOverwriteExistingCassetteException`, which `classify` turns into `CassetteMiss`. aiohttp is
imported on first use only, to keep `providers` cheap.
"""

from __future__ import annotations

import asyncio
import urllib.parse
import urllib.request
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from jobrouter.providers.bounded_body import (
    ACCEPT_ENCODING,
    DEFAULT_BASE,
    Inflater,
    UnreadableEncoding,
    read_capped,
    too_large,
    unreadable,
)
from jobrouter.providers.classify import HttpAnswer, HttpStatusError
from jobrouter.providers.errors import NotSent
from jobrouter.providers.redact import register_secret

if TYPE_CHECKING:
    import aiohttp


# idle seconds a kept-alive connection may be reused: below uvicorn's 5 s (see the docstring)
KEEPALIVE_SECONDS = 4.0
# bytes of an error answer's body read (its `error.message` is near the start)
ERROR_BODY_LIMIT = 64 * 1024
# connections beyond `max_concurrency`, for the /extras calls that the bulkhead does not bound
EXTRAS_HEADROOM = 4


class Sent:
    """Set once the request's headers went out on a connection (by the session's trace)."""

    def __init__(self) -> None:
        self.is_set = False

    def set(self) -> None:
        self.is_set = True


async def _on_headers_sent(_session: Any, context: SimpleNamespace, _params: Any) -> None:
    mark = context.trace_request_ctx
    if isinstance(mark, Sent):
        mark.set()


@dataclass(frozen=True)
class Proxy:
    """A proxy's URL without credentials (it may reach error text) and the headers that carry
    them (``Proxy-Authorization``; aiohttp 3.14 deprecates `BasicAuth` for `proxy_auth`)."""

    url: str
    headers: dict[str, str] | None


def _proxy(url: str) -> Proxy:
    """`url` split into a credential-free URL and its Basic credentials; the password is
    registered with `jobrouter.providers.redact` (an error page may still quote it)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return Proxy(url, None)
    import aiohttp

    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    register_secret(password)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return Proxy(
        urllib.parse.urlunsplit(parts._replace(netloc=netloc)),
        {"Proxy-Authorization": aiohttp.encode_basic_auth(user, password)},
    )


@dataclass(frozen=True)
class WireTimeouts:
    connect: float  # one socket's connect
    read: float  # inactivity while reading; also the bound on waiting for a pooled connection


class Wire:
    """One provider's aiohttp session (lazy, in the running loop) and its POST."""

    def __init__(self, timeouts: WireTimeouts, connections: int, provider: str = "") -> None:
        self._provider = provider
        self._timeouts = timeouts
        self._connections = max(1, connections) + EXTRAS_HEADROOM
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proxies: dict[tuple[str, str], Proxy | None] = {}

    @property
    def session(self) -> aiohttp.ClientSession | None:
        """The session when made (None before the first use and after `close`)."""
        return self._session

    def open(self) -> aiohttp.ClientSession:
        """The session, made now if it is not yet (call it inside the running event loop).

        `NotSent` (not retried, not the provider's fault) in another event loop than the one the
        session was made in: aiohttp's session and its connections belong to that loop (once it
        is closed, using them raises "Event loop is closed"), and they cannot be closed from
        here. Use a provider in one loop (one `asyncio.run`), or `close` it and build another."""
        loop = asyncio.get_running_loop()
        if self._session is not None and loop is not self._loop:
            raise NotSent(
                "this provider's HTTP session was made in another event loop (a second "
                "asyncio.run?): build the provider inside the loop that uses it",
                provider=self._provider,
                retryable=False,
                counts_against_health=False,
            )
        if self._session is None:
            self._loop = loop
            import aiohttp  # imported here to keep `providers` cheap

            trace = aiohttp.TraceConfig()
            trace.on_request_headers_sent.append(_on_headers_sent)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self._connections, keepalive_timeout=KEEPALIVE_SECONDS
                ),
                trace_configs=[trace],
                # bodies are decoded by `bounded_body` within their cap, never whole by aiohttp
                auto_decompress=False,
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=self._timeouts.read,
                    sock_connect=self._timeouts.connect,
                    sock_read=self._timeouts.read,
                ),
            )
        return self._session

    def proxy_for(self, url: str) -> Proxy | None:
        """The environment's proxy for `url`'s origin (None: direct), read once per origin."""
        parts = urllib.parse.urlsplit(url)
        origin = (parts.scheme, parts.netloc)
        if origin not in self._proxies:
            proxy = urllib.request.getproxies().get(parts.scheme)
            bypass = proxy is None or urllib.request.proxy_bypass(parts.hostname or "")
            self._proxies[origin] = None if bypass or proxy is None else _proxy(proxy)
        return self._proxies[origin]

    async def post(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        sent: Sent | None = None,
        *,
        limit: int = DEFAULT_BASE,
    ) -> tuple[int, bytes]:
        """POST `body` once: (status, body) of a 2xx answer of at most `limit` bytes (decoded),
        else `HttpStatusError`; `AnswerTooLarge` past `limit`. `sent` is set when the request's
        headers went out (a cassette replay never sets it)."""
        headers = {**headers, "Accept-Encoding": ACCEPT_ENCODING}
        proxy = self.proxy_for(url)
        proxy_headers = proxy.headers if proxy else None
        if proxy_headers and not url.startswith("https:"):
            # aiohttp applies proxy_headers to a CONNECT (https) only: a plain request through
            # the proxy carries Proxy-Authorization itself
            headers, proxy_headers = {**headers, **proxy_headers}, None
        async with self.open().post(
            url,
            data=body,
            headers=headers,
            allow_redirects=False,
            proxy=proxy.url if proxy else None,
            proxy_headers=proxy_headers,
            trace_request_ctx=sent,
        ) as response:
            status = response.status
            if 200 <= status < 300:
                return status, await self._success_body(response, limit)
            raise HttpStatusError(
                HttpAnswer(
                    status_code=status,
                    reason_phrase=response.reason or "",
                    headers=dict(response.headers),
                    text=await _error_text(response),
                )
            )

    async def _success_body(self, response: aiohttp.ClientResponse, limit: int) -> bytes:
        encoding = response.headers.get("Content-Encoding", "")
        try:
            content, over = await read_capped(response.content.iter_any(), encoding, limit)
        except UnreadableEncoding as exc:
            response.close()
            raise unreadable(self._provider, response.status, exc) from exc
        if over:
            response.close()  # the rest is never read: the connection is dropped, not pooled
            raise too_large(self._provider, limit, response.status)
        return content

    async def close(self) -> None:
        """Close the session (and its connections); a second call does nothing."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()


async def _error_text(response: aiohttp.ClientResponse) -> str:
    """An error answer's body, its first `ERROR_BODY_LIMIT` bytes; what arrived when reading it
    failed (a cut body, a read timeout): the status proves what it proves either way."""
    import aiohttp

    content = bytearray()
    try:
        inflater = Inflater(response.headers.get("Content-Encoding", ""), ERROR_BODY_LIMIT)
        async for chunk in response.content.iter_any():
            content += inflater.feed(chunk)
            if inflater.over:
                response.close()  # the rest is not read (it may be a bomb or gigabytes)
                break
    except (aiohttp.ClientError, TimeoutError):
        content += b" [body cut short]"
    except UnreadableEncoding as exc:
        content += f" [body not decodable: {exc}]".encode()
    return content[:ERROR_BODY_LIMIT].decode("utf-8", errors="replace")
