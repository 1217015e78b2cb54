"""Translate a failed call's exception into the provider error taxonomy, by exception TYPE.

litellm's own class and status_code are not evidence: it reports a refused connection and a
dropped one both as `InternalServerError` (500), and a missing cassette recording as a 500 too.
The evidence is in the cause chain. Chains measured with litellm 1.110.2 (aiohttp transport,
`openai/` path; `hosted_vllm/` has the same transport links without the openai ones):

    refused         litellm.InternalServerError <- OpenAIError <- openai.APIConnectionError
                    <- httpx.ConnectError <- aiohttp.ClientConnectorError <- ConnectionRefusedError
    connect timeout ... <- httpx.ConnectTimeout <- aiohttp.ConnectionTimeoutError
    read timeout    litellm.Timeout <- ... <- httpx.ReadTimeout <- aiohttp.SocketTimeoutError
    closed / dropped litellm.InternalServerError <- ... <- httpx.ReadError
                    <- aiohttp.ServerDisconnectedError
    reset (RST)     ... <- httpx.ReadError <- aiohttp.ClientOSError <- ConnectionResetError
    HTTP 4xx / 5xx  litellm.<Status>Error <- OpenAIError <- openai.<Status>Error
                    (hosted_vllm: MaskedHTTPStatusError) <- httpx.HTTPStatusError
    cassette miss   litellm.InternalServerError <- ...
                    <- vcr.errors.CannotOverwriteExistingCassetteException

The native transport (`jobrouter.providers.openai_http`) and the llama.cpp /extras calls of every
transport go through `jobrouter.providers.http_wire` (aiohttp called directly) and raise aiohttp's
links themselves: aiohttp.ClientConnectorError (refused; its DNS and certificate subclasses too) and
ConnectionTimeoutError (connect timeout, or no pooled connection in time), SocketTimeoutError (read
inactivity; a ServerTimeoutError), ServerDisconnectedError (closed before or after the request was
read), ClientOSError / ClientConnectionResetError (reset), ClientPayloadError (body cut). For an
HTTP error answer the wire reads the body (capped at 64 KiB) first and raises `HttpStatusError`
(below), whose message is the status line plus the body's `error.message` (`_answer_message`),
scrubbed of secrets before it is cut to length. A success status whose body is no chat completion is
`malformed_answer` (Rejected).

Rules. A cassette miss anywhere in the chain raises `CassetteMiss` (not a provider failure).
Otherwise the chain is walked from the outermost exception inward (`__cause__`, else
`__context__`) and the first link of a decisive type wins, because the outermost link is the
latest event (a re-send that got an answer after a refused connection was answered):

    HTTP response (HttpStatusError, httpx.HTTPStatusError) -> by status, `STATUS_TABLE` below
                                                              (docs/failures.md)
    connect refused / connect timeout / no pooled connection / DNS -> NotSent
    invalid or non-HTTP URL, a proxy refusing (aiohttp) -> NotSent, not retried, not
                                                          counted against the provider
    read timeout / read or write error / disconnect / reset / broken payload -> OutcomeUnknown

The status table says what each answer PROVES. Only the 4xx answers that providers document as
"the request was not processed" (400, 401, 403, 404, 413, 422, 429) are `NotSent`; of those,
only 429 is worth sending again (with its Retry-After). A timeout status (408, 504, a CDN's 524)
is `OutcomeUnknown`: whoever gave up waiting, the upstream may still run the request (I3).
Any redirect (3xx; neither transport follows one, so no other origin answers for a certified
provider) is `Redirected`, a `Rejected`: the server received the whole request and may have acted
(an exclusive task's attempt is `unknown`), not retried, counted against health (its api_base is
wrong, or it is hostile), its Location in the message and on the error.
Every other answer (5xx, a CDN's 52x, a 4xx nobody documents) is `Rejected`: a failure that may
have acted, so an exclusive task waits for an operator instead of failing over.

Anything else is OutcomeUnknown. That default is deliberate: an unrecognised exception may have
happened after the request was written, and calling it `not_sent` or `rejected` could make the
router send the work twice (the duplicate-post incident). Unknown costs a human look; a wrong
"failed" costs a duplicate side effect.

Third-party types are looked up in `sys.modules` only: a module that was never imported cannot
have raised, so this module imports none of them (litellm stays lazy).
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jobrouter.providers.backoff import parse_retry_after, parse_retry_after_ms
from jobrouter.providers.errors import (
    CassetteMiss,
    NotSent,
    OutcomeUnknown,
    ProviderError,
    Redirected,
    Rejected,
)
from jobrouter.providers.redact import scrub

_NOT_SENT_TYPES = {
    "httpx": ("ConnectError", "ConnectTimeout", "PoolTimeout", "UnsupportedProtocol"),
    "aiohttp": ("ClientConnectorError", "ConnectionTimeoutError"),
}
_UNKNOWN_TYPES = {
    "httpx": ("ReadTimeout", "ReadError", "WriteTimeout", "WriteError", "RemoteProtocolError"),
    "aiohttp": (
        "ServerDisconnectedError",
        "ClientPayloadError",
        "ServerTimeoutError",
        "ClientOSError",
    ),
}
# Refused by the client before anything reached the provider, and the same request would be
# refused again: a URL aiohttp cannot use (no http/https scheme, malformed) or a proxy that
# refused the CONNECT. Not retried; not the provider's fault (its health is untouched).
_REFUSED_LOCALLY_TYPES = {
    "aiohttp": (
        "InvalidURL",
        "InvalidUrlClientError",
        "NonHttpUrlClientError",
        "ClientHttpProxyError",
    ),
}
_BUILTIN_NOT_SENT: tuple[type[BaseException], ...] = (ConnectionRefusedError, socket.gaierror)
_BUILTIN_UNKNOWN: tuple[type[BaseException], ...] = (
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    TimeoutError,
)
# Documented "not processed" answers: status -> (retryable, counts_against_health).
NOT_PROCESSED: dict[int, tuple[bool, bool]] = {
    400: (False, False),  # malformed request: ours to fix, the same request fails again
    401: (False, False),  # authentication refused before any work
    403: (False, False),
    404: (False, False),  # no such model or route
    413: (False, False),  # request too large, refused before reading it all
    422: (False, False),  # validation refused
    429: (True, True),  # rate limited: the provider is overloaded; wait Retry-After and retry
}
# A redirect (never followed: a POST re-sent, or turned into a GET, to another origin would
# record that origin's answer as the certified provider's). The server read the whole request
# before it answered, so nothing proves it did not act: Rejected, never NotSent.
REDIRECT_STATUSES = range(300, 400)
# A timeout reported by a server or a gateway: the work may still run (408: the server timed
# out reading the request, which may have been complete; 504 / 524: an upstream timed out).
TIMEOUT_STATUSES = frozenset({408, 504, 524})
_MAX_MESSAGE = 400
# characters of a text scrubbed for a message: well past `_MAX_MESSAGE`, so a secret that
# straddles the cut is still whole where it is scrubbed
_SCRUB_HEAD = 4 * _MAX_MESSAGE


@dataclass(frozen=True)
class HttpAnswer:
    """An HTTP error answer read (up to 64 KiB) by a transport that called the server itself (the
    attribute names are httpx.Response's, so one reader serves both)."""

    status_code: int
    reason_phrase: str
    headers: Mapping[str, str]
    text: str


class HttpStatusError(Exception):
    """The server answered with a status outside 2xx (`jobrouter.providers.http_wire.Wire.post`)."""

    def __init__(self, response: HttpAnswer) -> None:
        super().__init__(f"HTTP {response.status_code} {response.reason_phrase}".strip())
        self.response = response


def _loaded(table: Mapping[str, tuple[str, ...]]) -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = []
    for module_name, names in table.items():
        module = sys.modules.get(module_name)
        for name in names:
            candidate = getattr(module, name, None) if module is not None else None
            if isinstance(candidate, type) and issubclass(candidate, BaseException):
                found.append(candidate)
    return tuple(found)


def cause_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then its `__cause__` (or, when none, its `__context__`), and so on; no cycles."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ if current.__cause__ is not None else current.__context__


def _response_of(link: BaseException) -> Any | None:
    """The real HTTP response a link carries: only our `HttpStatusError` (the wire read the
    answer) and `httpx.HTTPStatusError` are trusted.

    Not `openai.APIStatusError`: litellm's own exceptions subclass it (litellm.InternalServerError
    is an openai.InternalServerError) and carry a synthetic 500 response for a dropped connection.
    Every real answer measured has an httpx.HTTPStatusError in the chain (the openai SDK keeps it
    as `__context__`; litellm's handler wraps it as MaskedHTTPStatusError, a subclass).
    """
    if isinstance(link, HttpStatusError):
        return link.response
    status_types = _loaded({"httpx": ("HTTPStatusError",)})
    if status_types and isinstance(link, status_types):
        return getattr(link, "response", None)
    return None


def retry_after_from_headers(
    headers: Mapping[str, str] | None, now: float | None = None
) -> float | None:
    """Seconds to wait from `retry-after-ms` (OpenAI's), else `retry-after` (seconds or an HTTP
    date), read by the one parser's rules (`jobrouter.providers.backoff`)."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    in_ms = parse_retry_after_ms(lowered.get("retry-after-ms"))
    return in_ms if in_ms is not None else parse_retry_after(lowered.get("retry-after"), now=now)


def _headers_of(response: Any, top: BaseException) -> Mapping[str, str] | None:
    headers = getattr(response, "headers", None)
    if headers:
        return dict(headers)
    litellm_headers = getattr(top, "litellm_response_headers", None)
    return dict(litellm_headers) if litellm_headers else None


def _scrubbed_head(text: str) -> str:
    """`text`'s whitespace collapsed, scrubbed, then cut (half a key is still a leak): only its
    head is scrubbed, a margin past what any message keeps, because scrubbing costs about 0.6 ms
    per KiB of event-loop time and an error body may be 64 KiB."""
    head = " ".join(text.split())[:_SCRUB_HEAD]
    return " ".join(scrub(head).split())


def _message(top: BaseException, link: BaseException) -> str:
    text = str(top).strip() or str(link).strip()
    text = _scrubbed_head(text)
    detail = f"{type(link).__name__}: {text}" if text else type(link).__name__
    return detail[:_MAX_MESSAGE]


def _check_cassette(exc: BaseException, provider: str) -> None:
    miss_types = _loaded({"vcr.errors": ("CannotOverwriteExistingCassetteException",)})
    if not miss_types:
        return
    for link in cause_chain(exc):
        if isinstance(link, miss_types):
            raise CassetteMiss(
                f"no recording matches this request ({' '.join(str(link).split())[:300]})",
                provider=provider,
            ) from exc


def classify(exc: BaseException, provider: str) -> ProviderError:
    """The `ProviderError` that says what is known about the failed call's fate.

    Raises `CassetteMiss` when a vcrpy cassette lacked the request (a test-setup error).
    """
    _check_cassette(exc, provider)
    not_sent = _loaded(_NOT_SENT_TYPES) + _BUILTIN_NOT_SENT
    unknown = _loaded(_UNKNOWN_TYPES) + _BUILTIN_UNKNOWN
    refused_locally = _loaded(_REFUSED_LOCALLY_TYPES)
    for link in cause_chain(exc):
        if isinstance(link, ProviderError):
            return link
        response = _response_of(link)
        if response is not None:
            return _from_response(response, exc, link, provider)
        if isinstance(link, refused_locally):
            return NotSent(
                _message(exc, link),
                provider=provider,
                retryable=False,
                counts_against_health=False,
            )
        # not_sent first: aiohttp's ConnectionTimeoutError is also a ServerTimeoutError
        if isinstance(link, not_sent):
            return NotSent(_message(exc, link), provider=provider)
        if isinstance(link, unknown):
            return OutcomeUnknown(_message(exc, link), provider=provider)
    return OutcomeUnknown(
        f"unrecognised failure, outcome unknown: {_message(exc, exc)}", provider=provider
    )


def from_status(
    status: int,
    message: str,
    provider: str,
    retry_after: float | None = None,
    location: str | None = None,
) -> ProviderError:
    """The error an HTTP answer with `status` proves (see the module docstring's table)."""
    if status in NOT_PROCESSED:
        retryable, counts = NOT_PROCESSED[status]
        return NotSent(
            message,
            provider=provider,
            status=status,
            retry_after=retry_after,
            retryable=retryable,
            counts_against_health=counts,
        )
    if status in REDIRECT_STATUSES:
        return Redirected(message, provider=provider, status=status, location=location)
    if status in TIMEOUT_STATUSES:
        return OutcomeUnknown(message, provider=provider, status=status, retry_after=retry_after)
    return Rejected(
        message,
        provider=provider,
        status=status,
        retry_after=retry_after,
        counts_against_health=status >= 500,
    )


def _from_response(
    response: Any, top: BaseException, link: BaseException, provider: str
) -> ProviderError:
    status = int(response.status_code)
    headers = _headers_of(response, top)
    retry_after = retry_after_from_headers(headers)
    message = _answer_message(response) if top is link else _message(top, link)
    location = None
    if status in REDIRECT_STATUSES:
        location = {str(k).lower(): str(v) for k, v in (headers or {}).items()}.get("location")
        where = f"redirected to {location}" if location else "redirected (no Location)"
        where = scrub(where)
        message = f"{where} (not followed; fix api_base): {message}"[:_MAX_MESSAGE]
    return from_status(status, message, provider, retry_after, location)


def _answer_message(response: Any) -> str:
    """What an HTTP error answer says, for a direct call (no SDK wrote a message): the
    status line and the OpenAI error body's `error.message` (else the body's first bytes)."""
    reason = getattr(response, "reason_phrase", "") or ""
    head = f"HTTP {int(response.status_code)} {reason}".strip()
    try:
        text = str(response.text)
    except Exception:  # a streamed body never read: the status line is all there is
        return head
    detail = text
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        found = error.get("message") if isinstance(error, dict) else error
        if isinstance(found, str) and found.strip():
            detail = found
    detail = _scrubbed_head(detail)
    return f"{head}: {detail}"[:_MAX_MESSAGE] if detail else head


def malformed_answer(detail: str, provider: str, status: int) -> Rejected:
    """A success status whose body is not a chat completion: the provider answered (it may
    have acted) with something unusable, a fault of the provider (counts against health). No
    `status` on the error: it was no error answer (the summary would read "an error (HTTP
    200)"); the message names it."""
    text = _scrubbed_head(detail)
    return Rejected(
        f"HTTP {status} answer is not a chat completion: {text}"[:_MAX_MESSAGE],
        provider=provider,
        counts_against_health=True,
    )
