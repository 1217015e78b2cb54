"""Through either transport, a request missing from a cassette fails loudly as CassetteMiss, never
as a provider failure (a router would retry or fail over on litellm's 500 and hide the missing
recording). Recording and replay use the project's `jobrouter.providers.cassettes.cassette`."""

from __future__ import annotations

from pathlib import Path

import pytest
import vcr

from jobrouter.providers.base import CompletionRequest, Message
from jobrouter.providers.cassettes import cassette
from jobrouter.providers.errors import CassetteMiss, ProviderError
from tests.providers.conftest import TRANSPORTS, MakeProvider
from tests.providers.fault_server import FaultServer

pytestmark = pytest.mark.parametrize("transport", TRANSPORTS)


def ask(text: str) -> CompletionRequest:
    return CompletionRequest(messages=(Message(role="user", content=text),))


async def test_empty_cassette_in_replay_mode_is_a_cassette_miss(
    tmp_path: Path, fault: FaultServer, make_provider: MakeProvider
) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("interactions: []\nversion: 1\n")
    provider = make_provider(retry={"attempts": 3})
    replay = vcr.VCR(record_mode="none").use_cassette(str(path))
    with replay, pytest.raises(CassetteMiss) as caught:
        await provider.complete(ask("hello"))
    assert not isinstance(caught.value, ProviderError)  # the router cannot fail over on it
    assert caught.value.provider == "fault"
    assert fault.stats()["total"] == 0


async def test_recorded_call_replays_and_another_body_misses(
    tmp_path: Path, fault: FaultServer, make_provider: MakeProvider
) -> None:
    path = tmp_path / "caption.yaml"
    provider = make_provider()
    with cassette(path, record=True):
        recorded = await provider.complete(ask("hello"))
    assert fault.stats()["total"] == 1
    with cassette(path, record=False):
        replayed = await provider.complete(ask("hello"))
        with pytest.raises(CassetteMiss):
            await provider.complete(ask("a different prompt"))
    assert replayed.text == recorded.text
    assert fault.stats()["total"] == 1  # the replay reached no server
