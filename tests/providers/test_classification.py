"""Every failure scenario, over real HTTP to the fault server, lands on the right ErrorKind.

Retries are off here (retry.attempts=1) so each row is exactly one request; the retry layer
has its own tests (test_retries.py).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobrouter.providers.base import CompletionRequest, Message
from jobrouter.providers.errors import ErrorKind, ProviderError
from tests.providers.conftest import TRANSPORTS, MakeProvider
from tests.providers.fault_server import FaultServer

# Both transports must classify every scenario alike; they differ only in the exception names
# a message quotes (`Row.native_says`).
pytestmark = pytest.mark.parametrize("transport", TRANSPORTS)

SCHEMA = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}


def request(timeout: float | None = None) -> CompletionRequest:
    return CompletionRequest(
        messages=(Message(role="user", content="caption please"),),
        output_schema=SCHEMA,
        timeout=timeout,
    )


@dataclass(frozen=True)
class Row:
    scenario: Any
    kind: ErrorKind
    status: int | None = None
    requests: int = 1  # requests the server must have seen
    config: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    content: str | None = None
    says: str = ""  # a fragment the error message must contain
    native_says: str | None = None  # the fragment for transport "openai", when it differs
    retryable: bool = False
    counts: bool = True  # counts_against_health


def status(code: int, kind: ErrorKind, *, retryable: bool = False, counts: bool) -> Row:
    return Row({"kind": "status", "status": code}, kind, code, retryable=retryable, counts=counts)


NOT_SENT, REJECTED, UNKNOWN = ErrorKind.NOT_SENT, ErrorKind.REJECTED, ErrorKind.UNKNOWN
# The classification table of docs/failures.md, row by row, over real HTTP.
ROWS = {
    "hang past deadline": Row("hang", UNKNOWN, timeout=0.5, says="deadline"),
    "read timeout (inactivity)": Row(
        {"kind": "delay", "seconds": 3},
        UNKNOWN,
        config={"timeout": {"read": 0.4}},
        timeout=5,
        says="ReadTimeout",
        native_says="SocketTimeoutError",
    ),
    # litellm's aiohttp transport reports a closed connection as httpx's ReadError; the native
    # transport's aiohttp as the link under it, ServerDisconnectedError
    "close before answer": Row(
        "close_before", UNKNOWN, says="ReadError", native_says="ServerDisconnectedError"
    ),
    "drop after compute": Row(
        "drop_after", UNKNOWN, says="ReadError", native_says="ServerDisconnectedError"
    ),
    "reset by peer": Row("reset", UNKNOWN, says="ReadError", native_says="ClientOSError"),
    # documented "not processed": the provider did not act
    "400": status(400, NOT_SENT, counts=False),
    "401": status(401, NOT_SENT, counts=False),
    "403": status(403, NOT_SENT, counts=False),
    "404": status(404, NOT_SENT, counts=False),
    "413": status(413, NOT_SENT, counts=False),
    "422": status(422, NOT_SENT, counts=False),
    "429": Row(
        {"kind": "status", "status": 429, "retry_after": "7"}, NOT_SENT, 429, retryable=True
    ),
    # a timeout somewhere behind the answer: it may still run
    "408": status(408, UNKNOWN, counts=True),
    "504 gateway timeout": status(504, UNKNOWN, counts=True),
    "524 CDN timeout": status(524, UNKNOWN, counts=True),
    # answered with a failure that may have acted
    "500": status(500, REJECTED, counts=True),
    "502": status(502, REJECTED, counts=True),
    "503": status(503, REJECTED, counts=True),
    "520 CDN unknown error": status(520, REJECTED, counts=True),
    "522 CDN connect timeout": status(522, REJECTED, counts=True),
    "409 (undocumented 4xx)": status(409, REJECTED, counts=False),
    "invalid JSON content": Row(
        "answer", REJECTED, content="Sure! {text: hi", says="not valid JSON", counts=False
    ),
    "schema-invalid content": Row(
        "answer",
        REJECTED,
        content='{"txt": "hi"}',
        says="does not match the output schema",
        counts=False,
    ),
}


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
async def test_scenario_maps_to_error_kind(
    row: Row, fault: FaultServer, make_provider: MakeProvider, transport: str
) -> None:
    fault.control(default=row.scenario, **({"content": row.content} if row.content else {}))
    provider = make_provider(retry={"attempts": 1}, **row.config)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request(row.timeout))
    error = caught.value
    assert error.kind is row.kind, str(error)
    assert error.status == row.status
    assert error.provider == "fault"
    says = row.native_says if transport == "openai" and row.native_says else row.says
    assert says in error.message
    assert (error.retryable, error.counts_against_health) == (row.retryable, row.counts)
    assert error.may_have_acted is (row.kind is not NOT_SENT)
    assert fault.stats()["total"] == row.requests


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS.values() if r.status is not None],
    ids=[k for k, r in ROWS.items() if r.status is not None],
)
async def test_only_retryable_statuses_are_sent_again(
    row: Row, fault: FaultServer, make_provider: MakeProvider
) -> None:
    """With three tries allowed, only a retryable answer (429) is sent again: nothing that may
    have acted is ever repeated by the retry layer."""
    fault.control(default=row.scenario)
    with pytest.raises(ProviderError):
        await make_provider(retry={"attempts": 3}).complete(request())
    assert fault.stats()["total"] == (3 if row.retryable else 1)


async def test_429_carries_retry_after_seconds(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(default={"kind": "status", "status": 429, "retry_after": "7"})
    with pytest.raises(ProviderError) as caught:
        await make_provider(retry={"attempts": 1}).complete(request())
    assert caught.value.retry_after == 7.0


# The exception a message names for a failed connect, by transport (httpx's link under
# litellm; aiohttp's own on the native transport).
CONNECT_SAYS = {
    "refused": {"litellm": "ConnectError", "openai": "ClientConnectorError"},
    "timeout": {"litellm": "ConnectTimeout", "openai": "ConnectionTimeoutError"},
}


async def test_connection_refused_is_not_sent(
    closed_port: int, make_provider: MakeProvider, transport: str
) -> None:
    provider = make_provider(api_base=f"http://127.0.0.1:{closed_port}/v1", retry={"attempts": 1})
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    assert caught.value.kind is ErrorKind.NOT_SENT
    assert CONNECT_SAYS["refused"][transport] in caught.value.message
    assert caught.value.status is None  # litellm says 500; nothing answered


@pytest.fixture
def full_backlog_port() -> Iterator[int]:
    """A listener whose accept queue is full: new SYNs are dropped, so connect times out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port: int = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for sock in (*fillers, listener):
        sock.close()


async def test_connect_timeout_is_not_sent(
    full_backlog_port: int, make_provider: MakeProvider, transport: str
) -> None:
    provider = make_provider(
        api_base=f"http://127.0.0.1:{full_backlog_port}/v1",
        timeout={"connect": 0.3, "read": 10},
        retry={"attempts": 1},
    )
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    assert caught.value.kind is ErrorKind.NOT_SENT
    assert CONNECT_SAYS["timeout"][transport] in caught.value.message


async def test_missing_key_env_is_not_sent_and_names_the_variable(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    provider = make_provider(api_key_env="JOBROUTER_TEST_ABSENT_KEY")
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    assert caught.value.kind is ErrorKind.NOT_SENT
    assert "JOBROUTER_TEST_ABSENT_KEY" in str(caught.value)
    assert fault.stats()["total"] == 0


async def test_key_comes_from_the_named_env_var(
    fault: FaultServer, make_provider: MakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBROUTER_TEST_KEY", "test-key-123")
    completion = await make_provider(api_key_env="JOBROUTER_TEST_KEY").complete(request())
    assert completion.output == {"text": "ok"}
    assert fault.stats()["last_request"]["headers"]["authorization"] == "Bearer test-key-123"
