"""The failure table of docs/failures.md at router level, row by row, over real HTTP: the public
`Router`, the real `LiteLLMProvider`, two fault servers (a first, b the fallback).

For each outcome of provider a, on an exclusive task (`side_effects: external`) and on a task
whose repetition is harmless (`side_effects: none`): what a's attempt becomes, whether b is
called, and how the job ends. Nothing that may have acted is ever followed by a call to b on an
exclusive task (I4); an `unknown` attempt's server always saw the request.

Fails on the old code (f4844b9) for every row where a 5xx, 52x, 408, a 524 or an unusable
answer met an exclusive task: a's attempt was `failed` and b was called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobrouter import AttemptState, JobState, Router
from jobrouter.config import TaskConfig
from jobrouter.disclosure import disclose
from tests.acceptance.test_resilience import (  # noqa: F401 (fixtures, used by name)
    OWNER,
    SETTLE,
    Servers,
    _close_litellm_clients,
    _no_backoff,
    config,
    db_url,
    provider,
    requests,
    servers,
    settled_attempts,
)
from tests.acceptance.test_resilience import fault as fault  # a fixture, used by name

ECHO = Path(__file__).resolve().parent / "contracts" / "echo.yaml"
NOT_SENT, REJECTED, UNKNOWN = "not_sent", "rejected", "unknown"
ROWS: dict[str, tuple[Any, str]] = {
    "400": ({"kind": "status", "status": 400}, NOT_SENT),
    "401": ({"kind": "status", "status": 401}, NOT_SENT),
    "403": ({"kind": "status", "status": 403}, NOT_SENT),
    "404": ({"kind": "status", "status": 404}, NOT_SENT),
    "413": ({"kind": "status", "status": 413}, NOT_SENT),
    "422": ({"kind": "status", "status": 422}, NOT_SENT),
    "429": ({"kind": "status", "status": 429}, NOT_SENT),
    "408": ({"kind": "status", "status": 408}, UNKNOWN),
    "504": ({"kind": "status", "status": 504}, UNKNOWN),
    "524": ({"kind": "status", "status": 524}, UNKNOWN),
    "500": ({"kind": "status", "status": 500}, REJECTED),
    "502": ({"kind": "status", "status": 502}, REJECTED),
    "503": ({"kind": "status", "status": 503}, REJECTED),
    "520": ({"kind": "status", "status": 520}, REJECTED),
    "cut after sending": ("drop_after", UNKNOWN),
    "reset after sending": ("reset", UNKNOWN),
    "not JSON": ({"kind": "answer", "content": "Sure! {text: hi"}, REJECTED),
    "schema broken": ({"kind": "answer", "content": '{"txt": "hi"}'}, REJECTED),
}


@pytest.mark.parametrize("exclusive", [True, False], ids=["external", "none"])
@pytest.mark.parametrize(("scenario", "kind"), list(ROWS.values()), ids=list(ROWS))
async def test_outcome_of_a_then_b(
    tmp_path: Path, fault: Servers, scenario: Any, kind: str, exclusive: bool
) -> None:
    fault.a.control(default=scenario)
    task = TaskConfig(
        contract=str(ECHO),
        providers=["a", "b"],
        deadline=SETTLE,
        side_effects="external" if exclusive else None,
    )
    cfg = config({"a": provider(fault.a.api_base), "b": provider(fault.b.api_base)}, {"t": task})
    async with Router.open(db_url(tmp_path), cfg) as router:
        job = await router.submit(OWNER, "k", "t", {"text": "x"})
        job = await router.wait(job.id, timeout=SETTLE)
        attempts = await settled_attempts(router, job.id)
    first = attempts[0]
    assert (first.provider, first.error_kind) == ("a", kind), first.error
    assert requests(fault.a) >= 1
    may_have_acted = kind != NOT_SENT
    if exclusive and may_have_acted:  # I4: it waits for an operator, b is never called
        assert first.state is AttemptState.UNKNOWN
        assert job.state is JobState.UNKNOWN
        assert requests(fault.b) == 0 and len(attempts) == 1
        assert "may have" in (first.error or "") + (job.error or "")
    else:
        expected = AttemptState.UNKNOWN if kind == UNKNOWN else AttemptState.FAILED
        assert first.state is expected
        assert job.state is JobState.SUCCEEDED and job.result == {"text": "ok"}
        assert requests(fault.b) == 1


async def test_an_unusable_answer_of_an_exclusive_task_is_kept_for_the_operator(
    tmp_path: Path, fault: Servers
) -> None:
    """The answer that broke the schema is on the attempt: the operator can see what the
    provider said (and did) before resolving."""
    fault.a.control(default={"kind": "answer", "content": '{"txt": "posted"}'})
    task = TaskConfig(contract=str(ECHO), providers=["a", "b"], side_effects="external")
    cfg = config({"a": provider(fault.a.api_base), "b": provider(fault.b.api_base)}, {"t": task})
    async with Router.open(db_url(tmp_path), cfg) as router:
        job = await router.submit(OWNER, "k", "t", {"text": "x"})
        job = await router.wait(job.id, timeout=SETTLE)
        [attempt] = await settled_attempts(router, job.id)
    assert job.state is JobState.UNKNOWN
    assert attempt.output == '{"txt": "posted"}'  # the answer's text, as received
    assert "does not match the output schema" in (attempt.error_detail or "")
    assert "(check: schema)" in (attempt.error or "")  # the summary: our words only
    shown = disclose(attempt, operator=False)  # what the job's owner is shown of it
    assert (shown.output, shown.error_detail, shown.error) == (None, None, attempt.error)
    assert disclose(attempt, operator=True) == attempt
