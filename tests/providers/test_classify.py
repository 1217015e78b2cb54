"""classify() rules on hand-built chains of real exception types (the HTTP-level table is in
test_classification.py), and Retry-After parsing."""

from __future__ import annotations

import email.utils
import itertools
import sys
import time
import types

import aiohttp
import httpx
import pytest
import yarl
from multidict import CIMultiDict, CIMultiDictProxy
from vcr.errors import CannotOverwriteExistingCassetteException as VcrMiss

from jobrouter.providers.classify import (
    HttpAnswer,
    HttpStatusError,
    _loaded,
    cause_chain,
    classify,
    from_status,
    malformed_answer,
    retry_after_from_headers,
)
from jobrouter.providers.errors import CassetteMiss, ErrorKind, NotSent, Rejected
from jobrouter.providers.http_wire import Wire, WireTimeouts
from jobrouter.providers.redact import register_secret

REQUEST = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")


def chained(*links: BaseException) -> BaseException:
    """links[0] is outermost; each is raised `from` the next, as a real stack would."""
    for outer, inner in itertools.pairwise(links):
        outer.__cause__ = inner
    return links[0]


def status_error(status: int, headers: dict[str, str] | None = None) -> httpx.HTTPStatusError:
    response = httpx.Response(status, headers=headers, request=REQUEST)
    return httpx.HTTPStatusError("status", request=REQUEST, response=response)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (
            chained(
                RuntimeError("wrapper"), httpx.ConnectError("refused"), ConnectionRefusedError()
            ),
            ErrorKind.NOT_SENT,
        ),
        (chained(RuntimeError("wrapper"), httpx.ConnectTimeout("slow")), ErrorKind.NOT_SENT),
        (chained(RuntimeError("w"), httpx.PoolTimeout("pool")), ErrorKind.NOT_SENT),
        (chained(RuntimeError("w"), httpx.ReadTimeout("t")), ErrorKind.UNKNOWN),
        (chained(RuntimeError("w"), httpx.RemoteProtocolError("eof")), ErrorKind.UNKNOWN),
        (chained(RuntimeError("w"), httpx.WriteError("half sent")), ErrorKind.UNKNOWN),
        (chained(RuntimeError("w"), aiohttp.ServerDisconnectedError()), ErrorKind.UNKNOWN),
        (chained(RuntimeError("w"), aiohttp.ClientPayloadError("cut")), ErrorKind.UNKNOWN),
        (chained(RuntimeError("w"), aiohttp.ConnectionTimeoutError()), ErrorKind.NOT_SENT),
        (chained(RuntimeError("w"), aiohttp.SocketTimeoutError()), ErrorKind.UNKNOWN),
        (chained(RuntimeError("w"), status_error(400)), ErrorKind.NOT_SENT),
        (chained(RuntimeError("w"), status_error(502)), ErrorKind.REJECTED),
        (chained(RuntimeError("w"), status_error(524)), ErrorKind.UNKNOWN),
        (chained(RuntimeError("w"), status_error(504)), ErrorKind.UNKNOWN),
        # the outermost decisive link is the latest event: an answer after a refused connect
        (
            chained(RuntimeError("w"), status_error(500), httpx.ConnectError("first try")),
            ErrorKind.REJECTED,
        ),
        (ValueError("never seen before"), ErrorKind.UNKNOWN),
        (httpx.TimeoutException("which phase?"), ErrorKind.UNKNOWN),
    ],
)
def test_chain_rules(exc: BaseException, kind: ErrorKind) -> None:
    error = classify(exc, "p")
    assert error.kind is kind
    # Every verdict names its provider and says what happened, outermost text and the deciding
    # link's type (kills the classify mutants that drop either).
    assert error.provider == "p"
    assert f"{type(_deciding(exc)).__name__}: " in error.message
    assert str(exc).strip().split()[0] in error.message


def _deciding(exc: BaseException) -> BaseException:
    """The link whose type the message names: the first one classify can decide on."""
    for link in cause_chain(exc):
        if isinstance(link, (httpx.HTTPError, aiohttp.ClientError, OSError)):
            return link
    return exc


def test_status_and_retry_after_come_from_the_real_response() -> None:
    error = classify(chained(RuntimeError("w"), status_error(429, {"Retry-After": "3"})), "p")
    assert (error.kind, error.status, error.retry_after) == (ErrorKind.NOT_SENT, 429, 3.0)
    assert error.retryable and error.counts_against_health


def test_only_from_status_reads_a_status() -> None:
    """The health decision for an HTTP rejection is made once, from its status, in
    `from_status`; the error class does not derive it again from the status it carries."""
    assert from_status(500, "boom", "p").counts_against_health is True
    assert from_status(502, "bad gateway", "p").counts_against_health is True
    assert from_status(409, "conflict", "p").counts_against_health is False
    assert Rejected("unusable answer", provider="p").counts_against_health is False
    assert Rejected("as told", provider="p", status=500).counts_against_health is False
    assert (
        Rejected(
            "as told", provider="p", status=500, counts_against_health=True
        ).counts_against_health
        is True
    )


def test_retry_after_is_kept_for_a_timeout_status_and_a_rejection() -> None:
    """A 504 (outcome unknown) and a 500 (rejected) keep their `Retry-After` too, and only the
    5xx counts against health. Kills mutants `providers.classify.x_from_status` 19, 23 (the
    unknown's `retry_after` dropped) and 27, 32 (the rejection's)."""
    error = classify(chained(RuntimeError("w"), status_error(504, {"Retry-After": "7"})), "p")
    assert (error.kind, error.status, error.retry_after) == (ErrorKind.UNKNOWN, 504, 7.0)
    error = classify(chained(RuntimeError("w"), status_error(500, {"Retry-After": "5"})), "p")
    assert (error.kind, error.status, error.retry_after) == (ErrorKind.REJECTED, 500, 5.0)
    assert error.counts_against_health
    error = classify(chained(RuntimeError("w"), status_error(409, {"Retry-After": "5"})), "p")
    assert (error.kind, error.retry_after, error.counts_against_health) == (
        ErrorKind.REJECTED,
        5.0,
        False,
    )


class LitellmError(RuntimeError):
    """The shape of litellm's top-level exception: it keeps the answer's headers as
    `litellm_response_headers` when the response in the chain lost them."""

    def __init__(self, message: str, headers: dict[str, str]) -> None:
        super().__init__(message)
        self.litellm_response_headers = headers


def test_retry_after_falls_back_to_the_headers_litellm_kept() -> None:
    """No headers on the response itself: the `Retry-After` litellm kept on the outermost
    exception is used. Kills mutants `providers.classify.x__headers_of` 10, 11, 16, 17, 18, 20
    and `x__from_response` 6 (the outermost exception not passed)."""
    exc = chained(LitellmError("w", {"Retry-After": "7"}), status_error(503))
    error = classify(exc, "p")
    assert (error.status, error.retry_after) == (503, 7.0)
    exc = chained(LitellmError("w", {"Retry-After": "7"}), status_error(504))
    assert classify(exc, "p").retry_after == 7.0
    # the response's own headers win over litellm's copy
    exc = chained(LitellmError("w", {"Retry-After": "7"}), status_error(503, {"Retry-After": "2"}))
    assert classify(exc, "p").retry_after == 2.0
    assert classify(chained(LitellmError("w", {}), status_error(503)), "p").retry_after is None


def test_the_message_names_the_deciding_link_with_the_first_text_there_is() -> None:
    """The outermost text, else the deciding link's, whitespace collapsed; no text at all: the
    link's type alone. Kills mutants `providers.classify.x__message` 4, 7, 10 and 12."""
    error = classify(chained(RuntimeError("  outer\n  text "), httpx.ConnectError("inner")), "p")
    assert error.message == "ConnectError: outer text"
    error = classify(chained(RuntimeError(""), httpx.ConnectError("refused  here")), "p")
    assert error.message == "ConnectError: refused here"
    assert classify(chained(RuntimeError(""), httpx.ConnectError("")), "p").message == (
        "ConnectError"
    )


def test_only_exception_classes_a_loaded_module_has_are_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A name the installed version lacks, or that is not an exception class, is skipped (a
    library's next version may rename a class). Kills mutants `providers.classify.x__loaded`
    11 (no default: AttributeError) and 13 (`and` -> `or`: a non-exception class taken)."""
    module = types.ModuleType("fake_sdk")
    module.Refused = type("Refused", (ConnectionError,), {})  # type: ignore[attr-defined]
    module.NotAnError = type("NotAnError", (), {})  # type: ignore[attr-defined]
    module.helper = len  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_sdk", module)
    table = {"fake_sdk": ("Refused", "NotAnError", "helper", "Renamed"), "absent_sdk": ("X",)}
    assert _loaded(table) == (module.Refused,)


def test_a_cassette_miss_quotes_vcrs_text_collapsed_and_cut() -> None:
    """Kills mutants `providers.classify.x__check_cassette` 15 (the join), 16 (the link's text
    not used) and 17 (the cut at 300 characters)."""
    miss = VcrMiss.__new__(VcrMiss)  # vcr's own __init__ wants a cassette and a request
    Exception.__init__(miss, "Can't overwrite  existing\ncassette " + "x" * 400)
    with pytest.raises(CassetteMiss) as caught:
        classify(chained(RuntimeError("w"), miss), "p")
    quoted = ("Can't overwrite existing cassette " + "x" * 400)[:300]
    assert caught.value.message == f"no recording matches this request ({quoted})"
    assert caught.value.provider == "p"


def test_context_is_followed_when_there_is_no_cause() -> None:
    """The openai SDK raises its status error `from None`: the httpx error is __context__."""
    try:
        try:
            raise status_error(401)
        except httpx.HTTPStatusError:
            raise RuntimeError("sdk error") from None
    except RuntimeError as exc:
        assert classify(exc, "p").status == 401


def test_a_provider_error_is_returned_as_is() -> None:
    error = NotSent("already classified", provider="p")
    assert classify(error, "p") is error


def test_cause_chain_stops_on_cycles() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert list(cause_chain(a)) == [a, b]


def test_retry_after_forms() -> None:
    assert retry_after_from_headers({"retry-after": "7"}) == 7.0
    assert retry_after_from_headers({"Retry-After": "1.5"}) == 1.5
    assert retry_after_from_headers({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    # An unreadable retry-after-ms falls back to retry-after. Mutant: its `except ValueError`
    # re-raising (the classification of a 429 raised: no error kind, the attempt never ended),
    # seen failing.
    assert retry_after_from_headers({"retry-after-ms": "later", "retry-after": "4"}) == 4.0
    when = email.utils.formatdate(1_000_030, usegmt=True)
    assert retry_after_from_headers({"retry-after": when}, now=1_000_000) == pytest.approx(30.0)
    assert retry_after_from_headers({"retry-after": when}, now=2_000_000) == 0.0
    assert retry_after_from_headers({"retry-after": "soon"}) is None
    assert retry_after_from_headers({}) is None
    assert retry_after_from_headers(None) is None
    # Zero and below-one waits are kept as they are; a past date is no wait; a date without
    # `now` is measured from the clock (kills the survivors of mutmut in
    # its former parse_retry_after).
    assert retry_after_from_headers({"retry-after": "0"}) == 0.0
    assert retry_after_from_headers({"retry-after": "0.2"}) == 0.2
    assert retry_after_from_headers({"retry-after": "-3"}) == 0.0
    assert retry_after_from_headers({"retry-after": email.utils.formatdate(0, usegmt=True)}) == 0.0
    future = email.utils.formatdate(time.time() + 3600, usegmt=True)
    assert 3000.0 < (retry_after_from_headers({"retry-after": future}) or 0.0) <= 3600.0


def _proxy_refusal() -> aiohttp.ClientHttpProxyError:
    info = aiohttp.RequestInfo(
        url=yarl.URL("https://api.example/v1"),
        method="CONNECT",
        headers=CIMultiDictProxy(CIMultiDict()),
        real_url=yarl.URL("https://api.example/v1"),
    )
    return aiohttp.ClientHttpProxyError(info, (), status=407, message="Proxy Auth Required")


@pytest.mark.parametrize(
    "link",
    [
        aiohttp.NonHttpUrlClientError("ftp://127.0.0.1/v1/chat/completions"),
        aiohttp.InvalidUrlClientError("http://[::1/v1"),
        aiohttp.InvalidURL("http://[::1/v1"),
        _proxy_refusal(),
    ],
    ids=["non-http", "invalid-url-client", "invalid-url", "proxy-refused"],
)
def test_a_request_the_client_refused_to_send_is_not_sent_and_not_the_providers_fault(
    link: BaseException,
) -> None:
    """Raised before anything reached the provider, and raised again for the same request."""
    error = classify(chained(RuntimeError("wrapped"), link), "p")
    assert isinstance(error, NotSent)
    assert not error.retryable
    assert not error.counts_against_health
    assert type(link).__name__ in str(error)


async def test_a_non_http_url_on_the_wire_is_not_sent() -> None:
    """The real aiohttp raise, through `Wire.post`, then `classify`."""
    wire = Wire(WireTimeouts(connect=1.0, read=1.0), connections=1)
    try:
        with pytest.raises(Exception) as caught:
            await wire.post("ftp://127.0.0.1:1/v1/chat/completions", b"{}", {})
    finally:
        await wire.close()
    error = classify(caught.value, "p")
    assert isinstance(error, NotSent)
    assert not error.retryable
    assert not error.counts_against_health


SECRET = "cut-secret-0123456789abcdef"


# the padding puts the secret's first 6 characters just inside the 400-character cap, after
# "HTTP 500: ", "RuntimeError: ", "HTTP 200 answer is not a chat completion: "
@pytest.mark.parametrize(("where", "pad"), [("answer", 384), ("link", 380), ("malformed", 352)])
def test_a_secret_is_scrubbed_before_the_message_is_cut(where: str, pad: int) -> None:
    """A secret straddling the length cap: cut first, its head would no longer match."""
    register_secret(SECRET)
    text = "x" * pad + SECRET
    if where == "answer":
        error = classify(HttpStatusError(HttpAnswer(500, "", {}, text)), "p")
    elif where == "link":
        error = classify(RuntimeError(text), "p")
    else:
        error = malformed_answer(text, "p", 200)
    assert SECRET[:6] not in error.message


def test_an_error_answer_whose_body_was_never_read_is_classified_by_its_status() -> None:
    """A streamed error answer whose body no one read (`httpx.ResponseNotRead` on `.text`):
    the status line proves what it proves, the body is not needed.
    Mutant: classify `_answer_message`'s `except` re-raising (the classification itself
    raised: a 503 the provider answered became a provider bug, `unknown`), seen failing."""
    body = httpx.ByteStream(b'{"error": {"message": "overloaded"}}')
    response = httpx.Response(503, request=REQUEST, stream=body)
    error = classify(httpx.HTTPStatusError("status", request=REQUEST, response=response), "p")
    assert (type(error), error.kind, error.status) == (Rejected, ErrorKind.REJECTED, 503)
    assert error.message == "HTTP 503 Service Unavailable"
