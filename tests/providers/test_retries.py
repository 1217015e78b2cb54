"""Retries happen in exactly one layer (ours), counted at the fault server; bulkhead, rate limit
and deadline behave as documented. Pins the LITELLM-NOTES facts the design relies on. Every
test of the shared behaviour runs over both transports (`both`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

from jobrouter.providers import _litellm, resilience
from jobrouter.providers.adapter import Adapter
from jobrouter.providers.base import Completion, CompletionRequest, Message
from jobrouter.providers.config import ProviderConfig
from jobrouter.providers.errors import ErrorKind, ProviderError
from jobrouter.providers.litellm_provider import LiteLLMProvider
from jobrouter.providers.openai_http import OpenAIHttpProvider
from tests.providers.conftest import TRANSPORTS, MakeProvider
from tests.providers.fault_server import FaultServer

REQUEST = CompletionRequest(messages=(Message(role="user", content="hello"),))
STATUS_500 = {"kind": "status", "status": 500}
STATUS_429 = {"kind": "status", "status": 429, "retry_after": "0"}


both = pytest.mark.parametrize("transport", TRANSPORTS)


class _Counting(Adapter):
    """Counts our attempts, to count tries where the server cannot (a refused connection)."""

    attempts = 0

    async def _attempt(self, *args: Any, **kwargs: Any) -> Any:
        self.attempts += 1
        return await super()._attempt(*args, **kwargs)


class CountingLiteLLM(_Counting, LiteLLMProvider):
    pass


class CountingOpenAI(_Counting, OpenAIHttpProvider):
    pass


COUNTING = {"litellm": CountingLiteLLM, "openai": CountingOpenAI}


async def fail_kind(provider: Adapter, request: CompletionRequest = REQUEST) -> ErrorKind:
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request)
    return caught.value.kind


@both
@pytest.mark.parametrize(
    ("scenario", "kind"),
    [
        (STATUS_500, ErrorKind.REJECTED),
        ({"kind": "status", "status": 400}, ErrorKind.NOT_SENT),
        ("drop_after", ErrorKind.UNKNOWN),
        ("close_before", ErrorKind.UNKNOWN),
    ],
)
async def test_no_retry_on_answers_or_unknown_outcomes(
    scenario: Any, kind: ErrorKind, fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(default=scenario)
    assert await fail_kind(make_provider(retry={"attempts": 3})) is kind
    assert fault.stats()["total"] == 1  # not 3 (the SDK's default), not 5 (litellm's loop on top)


@both
async def test_hang_past_deadline_is_one_request(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(default="hang")
    provider = make_provider(retry={"attempts": 3})
    short = REQUEST.model_copy(update={"timeout": 0.4})
    assert await fail_kind(provider, short) is ErrorKind.UNKNOWN
    assert fault.stats()["total"] == 1


@both
async def test_connection_refused_is_tried_attempts_times(
    closed_port: int, fault: FaultServer, transport: str
) -> None:
    config = ProviderConfig(
        model="openai/m",
        api_base=f"http://127.0.0.1:{closed_port}/v1",
        retry={"attempts": 4},
        transport=transport,
    )
    counting = COUNTING[transport]
    async with counting("refused", config) as provider:
        assert await fail_kind(provider) is ErrorKind.NOT_SENT
        assert provider.attempts == 4
    one_attempt = ProviderConfig(**{**config.model_dump(), "retry": {"attempts": 1}})
    async with counting("refused", one_attempt) as provider:
        assert await fail_kind(provider) is ErrorKind.NOT_SENT
        assert provider.attempts == 1


@both
async def test_429_then_answer_is_two_requests_and_succeeds(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(sequence=[STATUS_429, "answer"])
    completion = await make_provider(retry={"attempts": 3}).complete(REQUEST)
    assert isinstance(completion, Completion)
    assert fault.stats()["by_scenario"] == {"status_429": 1, "answer": 1}


@both
async def test_429_forever_stops_after_attempts(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(default=STATUS_429)
    assert await fail_kind(make_provider(retry={"attempts": 3})) is ErrorKind.NOT_SENT
    assert fault.stats()["total"] == 3


@both
@pytest.mark.parametrize("scenario", [STATUS_429, STATUS_500, "drop_after", "answer"])
async def test_one_attempt_means_one_request(
    scenario: Any, fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(default=scenario)
    provider = make_provider(retry={"attempts": 1})
    with contextlib.suppress(ProviderError):
        await provider.complete(REQUEST)
    assert fault.stats()["total"] == 1


@both
async def test_retry_after_is_honoured(fault: FaultServer, make_provider: MakeProvider) -> None:
    resilience.set_testing(no_backoff=False)
    fault.control(sequence=[{"kind": "status", "status": 429, "retry_after": "0.5"}, "answer"])
    started = time.monotonic()
    await make_provider(retry={"attempts": 2, "initial": 0, "max": 0}).complete(REQUEST)
    assert time.monotonic() - started >= 0.5
    assert fault.stats()["total"] == 2


@both
async def test_retry_after_beyond_deadline_is_not_waited(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    resilience.set_testing(no_backoff=False)
    fault.control(default={"kind": "status", "status": 429, "retry_after": "30"})
    started = time.monotonic()
    request = REQUEST.model_copy(update={"timeout": 2.0})
    assert await fail_kind(make_provider(retry={"attempts": 5}), request) is ErrorKind.NOT_SENT
    assert time.monotonic() - started < 20.0  # not the 30 s Retry-After
    assert fault.stats()["total"] == 1


async def test_litellm_default_has_hidden_retries(fault: FaultServer) -> None:
    """LITELLM-NOTES: without num_retries=0, max_retries=0 one call sends several requests."""
    litellm = _litellm.load()
    fault.control(default=STATUS_500)
    with pytest.raises(Exception):  # noqa: B017 - litellm's own class; only the count matters
        await litellm.acompletion(
            model="openai/m",
            messages=[{"role": "user", "content": "x"}],
            api_base=fault.api_base,
            api_key="k",
            timeout=10,
        )
    assert fault.stats()["total"] > 1


@both
async def test_bulkhead_caps_requests_in_flight(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(default={"kind": "delay", "seconds": 0.3})
    provider = make_provider(max_concurrency=2)
    results = await asyncio.gather(*(provider.complete(REQUEST) for _ in range(6)))
    assert len(results) == 6
    stats = fault.stats()
    assert stats["total"] == 6
    assert stats["max_in_flight"] == 2
    assert provider.bulkhead.in_flight == 0


@both
async def test_without_a_tight_bulkhead_the_server_sees_the_concurrency(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """Control for the test above: the server's stat does see parallel requests."""
    fault.control(default={"kind": "delay", "seconds": 0.3})
    provider = make_provider(max_concurrency=6)
    await asyncio.gather(*(provider.complete(REQUEST) for _ in range(6)))
    assert fault.stats()["max_in_flight"] > 2


@both
async def test_waiting_for_a_bulkhead_slot_past_the_deadline_is_not_sent(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(default="hang")
    provider = make_provider(max_concurrency=1, retry={"attempts": 1})
    holder = asyncio.create_task(provider.complete(REQUEST.model_copy(update={"timeout": 2.0})))
    for _ in range(200):  # until the holder's request is at the server
        if fault.stats()["in_flight"]:
            break
        await asyncio.sleep(0.02)
    waiter = REQUEST.model_copy(update={"timeout": 0.3})
    with pytest.raises(ProviderError) as caught:
        await provider.complete(waiter)
    assert caught.value.kind is ErrorKind.NOT_SENT
    assert "bulkhead" in caught.value.message
    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder
    assert fault.stats()["total"] == 1


@both
async def test_trickling_body_outlives_read_timeout_but_not_the_deadline(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """LITELLM-NOTES: litellm's timeout is inactivity; our deadline is what bounds a call."""
    # A chunk every 0.25 s, far inside the 2 s read timeout even on a loaded machine; the
    # whole body takes 4 s, longer than the read timeout.
    fault.control(default={"kind": "trickle", "seconds": 4.0, "chunks": 16})
    provider = make_provider(timeout={"read": 2.0}, retry={"attempts": 1})
    started = time.monotonic()
    completion = await provider.complete(REQUEST.model_copy(update={"timeout": 60.0}))
    assert completion.text == '{"text": "ok"}'
    assert time.monotonic() - started > 2.0  # longer than the read timeout, and it succeeded
    # A 120 s trickle cut by a 1 s deadline: the bound tells the two apart by a wide margin.
    fault.control(default={"kind": "trickle", "seconds": 120.0, "chunks": 480})
    started = time.monotonic()
    cut = REQUEST.model_copy(update={"timeout": 1.0})
    assert await fail_kind(provider, cut) is ErrorKind.UNKNOWN
    assert time.monotonic() - started < 60.0


@both
async def test_local_rate_limit_refuses_beyond_the_budget(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    provider = make_provider(rate_limit={"requests_per_minute": 1}, retry={"attempts": 1})
    await provider.complete(REQUEST)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST.model_copy(update={"timeout": 1.0}))
    assert caught.value.kind is ErrorKind.NOT_SENT
    assert "rate limited locally" in caught.value.message
    assert fault.stats()["total"] == 1
