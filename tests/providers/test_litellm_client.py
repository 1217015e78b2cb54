"""litellm's second route, `hosted_vllm/` (litellm's own HTTP handler, not the openai SDK), gets
our client too: no redirect followed, the answer bounded (`jobrouter.providers.litellm_client`).
The `openai/` route is covered with the native transport in test_redirects.py and
test_bounded_answers.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobrouter.providers import CompletionRequest, Message, ProviderError
from jobrouter.providers.errors import AnswerTooLarge, Redirected
from tests.providers.conftest import MakeProvider
from tests.providers.fault_server import FaultServer, start_fault_server

REQUEST = CompletionRequest(
    messages=(Message(role="user", content="hi"),), max_tokens=16, timeout=10.0
)


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[FaultServer]:
    with start_fault_server() as server:
        yield server


@pytest.mark.parametrize("code", [302, 307])
async def test_hosted_vllm_follows_no_redirect(
    code: int, fault: FaultServer, elsewhere: FaultServer, make_provider: MakeProvider
) -> None:
    """Mutant seen failing: `LiteLLMClients.for_call` returning None for hosted_vllm/ (litellm's
    handler follows: the other origin answers, the call succeeds or 404s)."""
    elsewhere.reset()
    where = f"{elsewhere.api_base}/chat/completions"
    fault.control(default={"kind": "status", "status": code, "location": where})
    with pytest.raises(ProviderError) as caught:
        await make_provider(model="hosted_vllm/fault-model").complete(REQUEST)
    assert isinstance(caught.value, Redirected), repr(caught.value)
    assert caught.value.location == where
    assert elsewhere.stats()["total"] == 0


async def test_hosted_vllm_answer_past_the_cap_is_too_large(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """A gzip bomb through litellm's own handler stops at the cap (same mutant as above: litellm
    reads and inflates it whole, the call then ends at its deadline or as a malformed answer)."""
    fault.control(default={"kind": "bomb", "encoding": "gzip", "expands_to": 64 << 20})
    with pytest.raises(ProviderError) as caught:
        await make_provider(model="hosted_vllm/fault-model").complete(REQUEST)
    assert isinstance(caught.value, AnswerTooLarge), repr(caught.value)
