"""Provider-test fixtures: the fault server (one process per session, reset per test), a
provider factory that closes what it made, and no retry backoff (resilience.set_testing).

`make_provider` builds the transport the `transport` fixture names: "litellm" unless a module
or test parametrizes it (``pytestmark = pytest.mark.parametrize("transport", TRANSPORTS)``),
so a behaviour both transports must share is one test run over both."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from jobrouter.providers import _litellm, resilience
from jobrouter.providers.adapter import Adapter
from jobrouter.providers.config import ProviderConfig
from jobrouter.providers.transports import build_provider
from tests.providers.fault_server import FaultServer, start_fault_server

MakeProvider = Callable[..., Adapter]
TRANSPORTS = ("litellm", "openai")


@pytest.fixture(scope="session")
def fault_server_process() -> Iterator[FaultServer]:
    with start_fault_server() as server:
        yield server


@pytest.fixture(scope="session")
def _warm_litellm(fault_server_process: FaultServer) -> None:
    """Import litellm and make one call, so no test's deadline pays litellm's first-call setup."""
    litellm = _litellm.load()

    async def one_call() -> None:
        await litellm.acompletion(
            model="openai/warm-up",
            messages=[{"role": "user", "content": "hi"}],
            api_base=fault_server_process.api_base,
            api_key="k",
            num_retries=0,
            max_retries=0,
        )
        await _litellm.close_clients()

    asyncio.run(one_call())


@pytest.fixture
def fault(fault_server_process: FaultServer, _warm_litellm: None) -> FaultServer:
    """The fault server, counters and scenarios reset for this test."""
    fault_server_process.reset()
    return fault_server_process


@pytest.fixture(autouse=True)
def _no_backoff() -> Iterator[None]:
    resilience.set_testing(no_backoff=True)
    yield
    resilience.set_testing(no_backoff=False)


@pytest.fixture(autouse=True)
async def _close_litellm_clients() -> AsyncIterator[None]:
    """litellm caches HTTP clients per event loop: close them before this test's loop ends
    (an unclosed one surfaces later as a ResourceWarning, an error under filterwarnings)."""
    yield
    await _litellm.close_clients()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def transport() -> str:
    """The transport `make_provider` builds (parametrize it to run a test over both)."""
    return "litellm"


@pytest.fixture
async def make_provider(fault: FaultServer, transport: str) -> AsyncIterator[MakeProvider]:
    """Build a provider of `transport` aimed at the fault server; fields override the config."""
    made: list[Adapter] = []

    def make(name: str = "fault", **fields: Any) -> Adapter:
        fields.setdefault("model", "openai/fault-model")
        fields.setdefault("api_base", fault.api_base)
        fields.setdefault("transport", transport)
        provider = build_provider(name, ProviderConfig(**fields))
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.close()
