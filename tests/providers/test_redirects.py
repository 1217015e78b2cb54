"""No answer from an origin that was not certified (issue 31 item 2), over both transports.

The fault server answers each redirect code with a Location on a second fault server, which must
get no request at all: neither transport follows a redirect (litellm's own client re-sent a
307/308 POST to the Location and turned a 301/302/303 into a GET there, recording that origin's
answer as the certified provider's). The server had the whole request before it answered, so a
redirect is never `not_sent` (the native transport's was, and an exclusive task failed over).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobrouter.disclosure import provider_failure
from jobrouter.providers import CompletionRequest, ErrorKind, Message, ProviderError
from jobrouter.providers.errors import Redirected
from tests.providers.conftest import TRANSPORTS, MakeProvider
from tests.providers.fault_server import FaultServer, start_fault_server

pytestmark = pytest.mark.parametrize("transport", TRANSPORTS)

REQUEST = CompletionRequest(messages=(Message(role="user", content="hi"),), timeout=10.0)


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[FaultServer]:
    """The origin a redirect points to: it answers 200 to anything it gets."""
    with start_fault_server() as server:
        yield server


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
async def test_a_redirect_is_not_followed_and_may_have_acted(
    code: int, fault: FaultServer, elsewhere: FaultServer, make_provider: MakeProvider
) -> None:
    """Rejected (`Redirected`), never not_sent: not retried, counted against health, its Location
    on the error, in its message and (origin and path) in the summary; the other origin got
    nothing. Mutants seen failing: `REDIRECT_STATUSES` back to NotSent (kind not_sent, native);
    the litellm transport without its own client (litellm follows: elsewhere answers, the call
    succeeds, or 301/302/303 come back as a 404 of a GET)."""
    elsewhere.reset()
    where = f"{elsewhere.api_base}/chat/completions?sig=abc"
    fault.control(default={"kind": "status", "status": code, "location": where})
    with pytest.raises(ProviderError) as caught:
        await make_provider(retry={"attempts": 3}).complete(REQUEST)
    error = caught.value
    assert isinstance(error, Redirected), repr(error)
    assert (error.kind, error.status, error.location) == (ErrorKind.REJECTED, code, where)
    assert (error.retryable, error.counts_against_health) == (False, True)
    assert f"redirected to {where}" in error.message
    summary = provider_failure(error)
    assert f"redirect (HTTP {code}) to {elsewhere.api_base}/chat/completions," in summary
    assert "sig=abc" not in summary and "may have acted" in summary
    assert fault.stats()["total"] == 1
    assert elsewhere.stats()["total"] == 0
