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

from providers.base import CompletionRequest, Message
from providers.errors import ErrorKind, ProviderError
from tests.providers.conftest import MakeProvider
from tests.providers.fault_server import FaultServer

SCHEMA = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}


def request(timeout: float | None = None) -> CompletionRequest:
    return CompletionRequest(messages=(Message(role="user", content="caption please"),),
                             output_schema=SCHEMA, timeout=timeout)


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


ROWS = {
    "hang past deadline": Row("hang", ErrorKind.UNKNOWN, timeout=0.5, says="deadline"),
    "read timeout (inactivity)": Row({"kind": "delay", "seconds": 3}, ErrorKind.UNKNOWN,
                                     config={"timeout": {"read": 0.4}}, timeout=5,
                                     says="ReadTimeout"),
    "close before answer": Row("close_before", ErrorKind.UNKNOWN, says="ReadError"),
    "drop after compute": Row("drop_after", ErrorKind.UNKNOWN, says="ReadError"),
    "reset by peer": Row("reset", ErrorKind.UNKNOWN, says="ReadError"),
    "400": Row({"kind": "status", "status": 400}, ErrorKind.REJECTED, 400),
    "401": Row({"kind": "status", "status": 401}, ErrorKind.REJECTED, 401),
    "500": Row({"kind": "status", "status": 500}, ErrorKind.REJECTED, 500),
    "503": Row({"kind": "status", "status": 503}, ErrorKind.REJECTED, 503),
    "504 gateway timeout": Row({"kind": "status", "status": 504}, ErrorKind.UNKNOWN, 504),
    "429": Row({"kind": "status", "status": 429, "retry_after": "7"}, ErrorKind.REJECTED, 429),
    "invalid JSON content": Row("answer", ErrorKind.REJECTED, content="Sure! {text: hi",
                                says="not valid JSON"),
    "schema-invalid content": Row("answer", ErrorKind.REJECTED, content='{"txt": "hi"}',
                                  says="does not match the output schema"),
}


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
async def test_scenario_maps_to_error_kind(row: Row, fault: FaultServer,
                                           make_provider: MakeProvider) -> None:
    fault.control(default=row.scenario, **({"content": row.content} if row.content else {}))
    provider = make_provider(retry={"attempts": 1}, **row.config)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request(row.timeout))
    error = caught.value
    assert error.kind is row.kind, str(error)
    assert error.status == row.status
    assert error.provider == "fault"
    assert row.says in error.message
    assert fault.stats()["total"] == row.requests


async def test_429_carries_retry_after_seconds(fault: FaultServer,
                                               make_provider: MakeProvider) -> None:
    fault.control(default={"kind": "status", "status": 429, "retry_after": "7"})
    with pytest.raises(ProviderError) as caught:
        await make_provider(retry={"attempts": 1}).complete(request())
    assert caught.value.retry_after == 7.0


async def test_connection_refused_is_not_sent(closed_port: int,
                                              make_provider: MakeProvider) -> None:
    provider = make_provider(api_base=f"http://127.0.0.1:{closed_port}/v1", retry={"attempts": 1})
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    assert caught.value.kind is ErrorKind.NOT_SENT
    assert "ConnectError" in caught.value.message
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


async def test_connect_timeout_is_not_sent(full_backlog_port: int,
                                           make_provider: MakeProvider) -> None:
    provider = make_provider(api_base=f"http://127.0.0.1:{full_backlog_port}/v1",
                             timeout={"connect": 0.3, "read": 10}, retry={"attempts": 1})
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request())
    assert caught.value.kind is ErrorKind.NOT_SENT
    assert "ConnectTimeout" in caught.value.message


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
