"""What only the native transport does: the request it puts on the wire, an answer that is no
chat completion, its one HTTP session, and how it is chosen. Everything it shares with the litellm
transport (classification, retries, deadline, bulkhead, output checks, inspection) runs over both
transports in test_classification, test_retries, test_output, test_prompt_inspection and
test_cassette_miss."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jobrouter.build import build_providers
from jobrouter.config import RouterConfig
from jobrouter.providers.base import CompletionRequest, InspectableProvider, Message, Provider
from jobrouter.providers.config import ProviderConfig
from jobrouter.providers.errors import ErrorKind, InvalidOutput, NotSent, ProviderError
from jobrouter.providers.litellm_provider import LiteLLMProvider
from jobrouter.providers.openai_http import OpenAIHttpProvider
from jobrouter.providers.transports import build_provider
from tests.providers.conftest import MakeProvider
from tests.providers.fault_server import FaultServer

ECHO = Path(__file__).resolve().parents[1] / "acceptance" / "contracts" / "echo.yaml"
SCHEMA = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
REQUEST = CompletionRequest(
    messages=(
        Message(role="system", content="You write captions."),
        Message(role="user", content="Tea, warm."),
    ),
    output_schema=SCHEMA,
    temperature=0.5,
    max_tokens=40,
)


@pytest.fixture
def transport() -> str:
    return "openai"


async def test_the_request_on_the_wire(fault: FaultServer, make_provider: MakeProvider) -> None:
    provider = make_provider(
        structured_output="json_object_schema", extra_params={"seed": 7, "top_k": 20}
    )
    assert isinstance(provider, OpenAIHttpProvider)
    await provider.complete(REQUEST)
    sent = fault.stats()["last_request"]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer no-key"  # keyless: as litellm sends it
    assert sent["headers"]["content-type"] == "application/json"
    assert sent["body"] == {
        "model": "fault-model",  # the route prefix "openai/" is not the server's model name
        "messages": [
            {"role": "system", "content": "You write captions."},
            {"role": "user", "content": "Tea, warm."},
        ],
        "temperature": 0.5,
        "max_tokens": 40,
        "response_format": {"type": "json_object", "schema": SCHEMA},
        "seed": 7,
        "top_k": 20,
    }


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("<html>bad gateway</html>", "not JSON"),
        ('{"id": "x", "object": "chat.completion"}', "no choices[0].message"),
        ('{"choices": []}', "no choices[0].message"),
        ("[" * 100_000, "not JSON"),  # nested too deep: a RecursionError, not a ValueError
    ],
)
async def test_a_success_status_without_a_chat_completion_is_rejected_once(
    body: str, says: str, fault: FaultServer, make_provider: MakeProvider
) -> None:
    """The server answered (it may have acted) with something unusable: `rejected`, counted
    against its health, not retried, and not an `InvalidOutput` (the model said nothing)."""
    fault.control(default={"kind": "garbled", "body": body})
    with pytest.raises(ProviderError) as caught:
        await make_provider(retry={"attempts": 3}).complete(REQUEST)
    error = caught.value
    assert error.kind is ErrorKind.REJECTED and not isinstance(error, InvalidOutput)
    assert (error.status, error.retryable, error.counts_against_health) == (None, False, True)
    assert "HTTP 200 answer is not a chat completion" in error.message and says in error.message
    assert fault.stats()["total"] == 1


async def test_an_error_answer_quotes_the_servers_message(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(default={"kind": "status", "status": 503, "say": "model is loading"})
    with pytest.raises(ProviderError) as caught:
        await make_provider(retry={"attempts": 1}).complete(REQUEST)
    assert caught.value.message.startswith("HTTP 503 Service Unavailable: ")
    assert "model is loading" in caught.value.message


async def test_a_null_content_is_an_empty_text(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(content="")
    completion = await make_provider().complete(REQUEST.model_copy(update={"output_schema": None}))
    assert completion.text == ""


async def test_one_client_kept_alive_across_calls_and_closed_with_the_provider(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    provider = make_provider()
    await provider.warm_up()  # makes the client, sends nothing
    assert fault.stats()["total"] == 0
    client = provider._wire.session
    assert client is not None and not client.closed
    for _ in range(3):
        await provider.complete(REQUEST)
    assert provider._wire.session is client
    await provider.close()
    assert client.closed
    with pytest.raises(NotSent, match="closed"):
        await provider.complete(REQUEST)
    assert fault.stats()["total"] == 3  # the refused call sent nothing
    await provider.close()  # a second close does nothing


async def test_the_session_s_pool_and_timeouts_come_from_the_config(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """A connection for every slot of the bulkhead; connect and inactivity timeouts as
    configured, no total (the adapter's deadline bounds the call)."""
    provider = make_provider(max_concurrency=12, timeout={"connect": 1.5, "read": 7})
    await provider.warm_up()
    session = provider._wire.session
    assert session is not None and session.connector is not None
    assert session.connector.limit >= 12
    timeout = session.timeout
    assert (timeout.sock_connect, timeout.sock_read, timeout.total) == (1.5, 7, None)
    assert fault.stats()["total"] == 0


async def test_a_proxy_from_the_environment_is_used_and_no_proxy_bypasses_it(
    fault: FaultServer,
    make_provider: MakeProvider,
    closed_port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """http_proxy is honoured (here a proxy that refuses: nothing sent, the server saw
    nothing); with the server's host in no_proxy the call goes direct."""
    for name in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed_port}")
    with pytest.raises(ProviderError) as caught:
        await make_provider(retry={"attempts": 1}).complete(REQUEST)
    assert caught.value.kind is ErrorKind.NOT_SENT
    assert fault.stats()["total"] == 0
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    await make_provider().complete(REQUEST)
    assert fault.stats()["total"] == 1


def test_the_transport_picks_the_class() -> None:
    native = ProviderConfig(model="openai/m", api_base="http://127.0.0.1:1/v1", transport="openai")
    built = build_provider("n", native)
    assert isinstance(built, OpenAIHttpProvider)
    assert isinstance(built, InspectableProvider) and isinstance(built, Provider)
    assert isinstance(build_provider("l", ProviderConfig(model="openai/m")), LiteLLMProvider)


async def test_the_router_builds_the_configured_transport() -> None:
    data: dict[str, Any] = {
        "database": {"url": "sqlite:///unused.db"},
        "providers": {
            "native": {
                "model": "openai/m",
                "api_base": "http://127.0.0.1:1/v1",
                "transport": "openai",
            },
            "routed": {"model": "openai/m", "api_base": "http://127.0.0.1:1/v1"},
        },
    }
    built = build_providers(RouterConfig.model_validate(data), None)
    try:
        assert type(built["native"]) is OpenAIHttpProvider
        assert type(built["routed"]) is LiteLLMProvider
        assert built["native"].fingerprint != built["routed"].fingerprint
    finally:
        for provider in built.values():
            await provider.close()


@pytest.mark.parametrize("exclusive", [True, False], ids=["external", "none"])
async def test_a_job_through_the_router_on_the_native_transport(
    tmp_path: Path, fault: FaultServer, exclusive: bool
) -> None:
    """End to end through the public `Router`, both providers native (on one fault server):
    a cut after the request was read is `unknown` on provider a; an exclusive task then waits
    for an operator (b never called, I4), a harmless one fails over to b's answer."""
    from jobrouter import AttemptState, JobState, Router
    from jobrouter.config import TaskConfig
    from tests.acceptance.test_resilience import OWNER, SETTLE, config, db_url, settled_attempts

    def native(**fields: Any) -> ProviderConfig:
        return ProviderConfig(
            model="openai/fault-model",
            api_base=fault.api_base,
            structured_output="none",
            retry={"attempts": 1},
            transport="openai",
            **fields,
        )

    fault.control(sequence=["drop_after", "answer"])
    task = TaskConfig(
        contract=str(ECHO),
        providers=["a", "b"],
        deadline=SETTLE,
        side_effects="external" if exclusive else None,
    )
    async with Router.open(
        db_url(tmp_path), config({"a": native(), "b": native()}, {"t": task})
    ) as router:
        assert type(router.providers["a"]) is OpenAIHttpProvider
        job = await router.submit(OWNER, "k", "t", {"text": "x"})
        job = await router.wait(job.id, timeout=SETTLE)
        attempts = await settled_attempts(router, job.id)
    first = attempts[0]
    assert (first.provider, first.error_kind, first.state) == ("a", "unknown", AttemptState.UNKNOWN)
    if exclusive:
        assert job.state is JobState.UNKNOWN and len(attempts) == 1
        assert fault.stats()["total"] == 1
    else:
        assert job.state is JobState.SUCCEEDED and job.result == {"text": "ok"}
        assert [a.provider for a in attempts] == ["a", "b"]
        assert fault.stats()["total"] == 2


def test_a_second_event_loop_is_refused_clearly_before_anything_is_sent(
    fault: FaultServer,
) -> None:
    """The session belongs to the loop it was made in (here by `warm_up`, which opens no
    connection: one kept alive in a loop that ends would leak its socket whatever we do): a
    call from a second `asyncio.run` is a clear NotSent (it was "Event loop is closed" or "a
    different loop", an outcome unknown), and nothing reaches the server; closing the provider
    from yet another loop still works."""
    provider = build_provider(
        "fault",
        ProviderConfig(model="openai/fault-model", api_base=fault.api_base, transport="openai"),
    )
    asyncio.run(provider.warm_up())
    with pytest.raises(ProviderError) as caught:
        asyncio.run(provider.complete(REQUEST))
    assert caught.value.kind is ErrorKind.NOT_SENT
    assert "another event loop" in caught.value.message
    assert (caught.value.retryable, caught.value.counts_against_health) == (False, False)
    assert fault.stats()["total"] == 0
    asyncio.run(provider.close())
