"""JobClient against httpx.MockTransport: one key across retries, what is and is not retried,
unknown (not failed) when retries run out, event streams resumed, wait falling back to reads."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from tenacity import AsyncRetrying, RetryCallState

from jobrouter.client import (
    IdempotencyKeyReused,
    JobClient,
    JobIntent,
    OverBudget,
    ProblemError,
    RetryPolicy,
    SubmitUnknown,
    _RetryableStatus,
)
from jobrouter.providers import backoff

NOW = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
QUICK = RetryPolicy(attempts=4, initial=0.001, cap=0.002, deadline=5)
Handler = Callable[[httpx.Request], httpx.Response]


def job_body(state: str = "queued", **extra: Any) -> dict[str, Any]:
    return {
        "id": "j1",
        "owner": "o",
        "idempotency_key": "k",
        "fingerprint": "f",
        "task": "t",
        "input": {},
        "params": {},
        "state": state,
        "version": 1,
        "winner_attempt_id": None,
        "result": None,
        "error": None,
        "created_at": NOW,
        "updated_at": NOW,
        "deadline_at": None,
        "url": "http://x/v1/jobs/j1",
        **extra,
    }


def problem(status: int, slug: str, **extra: Any) -> httpx.Response:
    body = {
        "type": f"urn:jobrouter:problem:{slug}",
        "title": "t",
        "status": status,
        "detail": "what to fix",
        **extra,
    }
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


def event(seq: int, kind: str, state: str) -> str:
    data = {"job_id": "j1", "seq": seq, "kind": kind, "job_state": state, "data": {}, "at": NOW}
    return f"id: {seq}\nevent: {kind}\ndata: {json.dumps(data)}\n\n"


def client(handler: Handler, retry: RetryPolicy = QUICK) -> JobClient:
    return JobClient(
        "http://jobrouter.test", "token", retry=retry, transport=httpx.MockTransport(handler)
    )


class Script:
    """Answers in order; records every request."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_retries_send_the_same_key_and_a_replay_is_not_created() -> None:
    script = Script(
        httpx.ConnectError("refused"),
        httpx.ReadError("reset"),
        httpx.Response(503, headers={"Retry-After": "0"}),
        httpx.Response(202, json=job_body(), headers={"Idempotency-Replayed": "true"}),
    )
    intent = JobIntent("t", {"n": 1}, idempotency_key="order-42")
    async with client(script) as jobs:
        job = await jobs.submit(intent)
    assert [r.headers["Idempotency-Key"] for r in script.requests] == ["order-42"] * 4
    assert job.id == "j1" and job.created is False
    assert json.loads(script.requests[0].content) == {"task": "t", "input": {"n": 1}, "params": {}}


async def test_a_fresh_intent_has_its_own_key_kept_for_its_life() -> None:
    first, second = JobIntent("t", {}), JobIntent("t", {})
    assert first.idempotency_key != second.idempotency_key
    assert len(first.idempotency_key) == 36


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 413, 422])
async def test_client_errors_are_not_retried(status: int) -> None:
    script = Script(problem(status, "whatever"))
    async with client(script) as jobs:
        with pytest.raises(ProblemError) as raised:
            await jobs.submit(JobIntent("t", {}))
    assert len(script.requests) == 1
    assert raised.value.status == status and raised.value.detail == "what to fix"


async def test_key_reused_names_the_job() -> None:
    script = Script(problem(422, "idempotency-key-reused", job_id="j0"))
    async with client(script) as jobs:
        with pytest.raises(IdempotencyKeyReused) as raised:
            await jobs.submit(JobIntent("t", {}))
    assert raised.value.job_id == "j0"


async def test_a_budget_refusal_is_final_and_says_when_to_come_back() -> None:
    """A 429 for a budget is a refusal whose period may end hours later: not retried (a plain
    429 is), raised as OverBudget with the budget and Retry-After. Mutant killed: the
    `_over_budget` guard removed from the retry decision (4 requests, then SubmitUnknown)."""
    refusal = problem(429, "budget-exhausted", budget="shop")
    refusal.headers["Retry-After"] = "3600"
    script = Script(refusal)
    async with client(script) as jobs:
        with pytest.raises(OverBudget) as raised:
            await jobs.submit(JobIntent("t", {}))
    assert len(script.requests) == 1
    assert (raised.value.budget, raised.value.retry_after) == ("shop", 3600.0)


@pytest.mark.parametrize(
    ("header", "seconds"), [("soon", None), ("-5", 0.0), ("in 600 s, as a date", 600.0)]
)
async def test_a_budget_refusals_retry_after_is_read_by_the_one_parser(
    header: str, seconds: float | None
) -> None:
    """Before, a bare `float()`: "soon" raised ValueError out of the error mapping, and an HTTP
    date too. Mutant: `float(retry_after)` back (seen failing on "soon" and the date)."""
    if header.endswith("as a date"):
        header = email.utils.formatdate(time.time() + 600, usegmt=True)
    refusal = problem(429, "budget-exhausted", budget="shop")
    refusal.headers["Retry-After"] = header
    async with client(Script(refusal)) as jobs:
        with pytest.raises(OverBudget) as raised:
            await jobs.submit(JobIntent("t", {}))
    if seconds is None:
        assert raised.value.retry_after is None
    else:
        assert raised.value.retry_after == pytest.approx(seconds, abs=5.0)


def test_the_wait_honours_a_retry_after_date_up_to_the_cap() -> None:
    """The client's wait reads Retry-After by the one parser, HTTP dates included (before:
    seconds only), and never waits past its cap. Mutants: `_retry_after` returning None, the
    Retry-After uncapped (`retry_after_cap=None`), both seen failing."""
    policy = RetryPolicy(initial=0.001, cap=30.0)

    def wait_after(retry_after: str) -> float:
        state = RetryCallState(AsyncRetrying(), None, (), {})
        state.attempt_number = 1
        busy = _RetryableStatus(httpx.Response(503, headers={"Retry-After": retry_after}))
        state.set_exception((_RetryableStatus, busy, None))
        return policy.wait(state)

    assert 15.0 < wait_after(email.utils.formatdate(time.time() + 20, usegmt=True)) <= 20.0
    assert wait_after("120") == 30.0


def test_the_client_obeys_the_one_test_switch() -> None:
    """`backoff.set_testing()` zeroes the client's waits too (it had no switch before).
    Mutant: `RetryPolicy.backoff` drawing its own `random.uniform` again (seen failing)."""
    policy = RetryPolicy(initial=1.0, cap=4.0)
    backoff.set_testing()
    try:
        assert [policy.backoff(n) for n in range(1, 10)] == [0.0] * 9
    finally:
        backoff.set_testing(no_backoff=False)
    assert max(policy.backoff(3) for _ in range(50)) > 0.0


@pytest.mark.parametrize("failure", [httpx.ReadTimeout("slow"), httpx.Response(502)])
async def test_exhausted_retries_are_unknown_with_the_key(
    failure: httpx.Response | Exception,
) -> None:
    script = Script(failure)
    intent = JobIntent("t", {}, idempotency_key="order-7")
    async with client(script) as jobs:
        with pytest.raises(SubmitUnknown) as raised:
            await jobs.submit(intent)
    assert len(script.requests) == QUICK.attempts
    assert raised.value.idempotency_key == "order-7" and raised.value.intent is intent
    assert "find(key)" in str(raised.value)


def test_backoff_is_full_jitter_under_a_cap() -> None:
    """Up to the cap, also after thousands of failures (a long `wait`; mutant: the exponent
    unbounded, OverflowError at 1,100 failures, seen failing)."""
    policy = RetryPolicy(initial=0.5, cap=4.0)
    for failures, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (9, 4.0), (1100, 4.0)]:
        waits = [policy.backoff(failures) for _ in range(200)]
        assert all(0 <= wait <= ceiling for wait in waits)
        assert max(waits) > ceiling / 2  # spread over the whole range, not a fixed delay


async def test_events_resume_after_the_last_seen_event() -> None:
    streams = [
        event(1, "job.queued", "queued") + event(2, "attempt.started", "running"),
        event(3, "attempt.succeeded", "succeeded") + event(4, "job.succeeded", "succeeded"),
    ]
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Last-Event-ID"))
        return httpx.Response(
            200, text=streams.pop(0), headers={"content-type": "text/event-stream"}
        )

    async with client(handler) as jobs:
        events = [item async for item in jobs.events("j1")]
    assert [item.seq for item in events] == [1, 2, 3, 4]
    assert seen == ["0", "2"]


async def test_wait_reads_the_durable_record_when_the_stream_is_unavailable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            return httpx.Response(503)
        return httpx.Response(200, json=job_body("succeeded", result={"text": "hi"}))

    async with client(handler) as jobs:
        job = await jobs.wait("j1", timeout=5)
    assert job.state == "succeeded" and job.result == {"text": "hi"}


async def test_wait_outlasts_a_read_whose_retries_ran_out_within_its_timeout() -> None:
    """The server unreachable for longer than one read's retries (8 connection errors against
    4 attempts a read, the stream refused too): `wait` keeps reading within its own timeout and
    returns the settled job, as it does when only the stream fails (mutant: the record's read
    outside the `except Unavailable`, `wait` raised Unavailable, seen failing)."""
    refused = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal refused
        if request.url.path.endswith("/events"):
            return httpx.Response(503)
        if refused < 2 * QUICK.attempts:
            refused += 1
            raise httpx.ConnectError("refused")
        return httpx.Response(200, json=job_body("succeeded", result={"text": "hi"}))

    async with client(handler) as jobs:
        job = await jobs.wait("j1", timeout=30)
    assert refused == 2 * QUICK.attempts
    assert job.state == "succeeded" and job.result == {"text": "hi"}


async def test_wait_returns_the_record_read_after_the_settling_event() -> None:
    reads = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal reads
        if request.url.path.endswith("/events"):
            return httpx.Response(
                200,
                text=event(1, "job.succeeded", "succeeded"),
                headers={"content-type": "text/event-stream"},
            )
        reads += 1
        return httpx.Response(200, json=job_body("succeeded", version=3))

    async with client(handler) as jobs:
        job = await jobs.wait("j1", timeout=5)
    assert reads == 1 and job.version == 3


def sse(text: str) -> httpx.Response:
    return httpx.Response(
        200, text=f"retry: 1000\n\n{text}", headers={"content-type": "text/event-stream"}
    )


async def test_events_follow_a_resolved_unknown_job_to_its_end() -> None:
    """The stream ends where the server's watch does: not on a `job.unknown` that a later
    event already moved on from (the client once stopped there: a bug fixed with issue 17)."""
    log = [
        (1, "job.queued", "queued"),
        (2, "attempt.started", "running"),
        (3, "attempt.unknown", "running"),
        (4, "job.unknown", "unknown"),
        (5, "job.reopened", "running"),
        (6, "attempt.started", "running"),
        (7, "attempt.succeeded", "succeeded"),
        (8, "job.succeeded", "succeeded"),
    ]
    script = Script(sse("".join(event(*entry) for entry in log)))
    async with client(script) as jobs:
        kinds = [item.kind async for item in jobs.events("j1")]
    assert kinds == [kind for _, kind, _ in log]
    assert len(script.requests) == 1


async def test_events_of_a_job_paused_for_a_person_end_with_the_stream() -> None:
    script = Script(sse(event(1, "job.queued", "queued") + event(2, "job.unknown", "unknown")))
    async with client(script) as jobs:
        kinds = [item.kind async for item in jobs.events("j1")]
    assert kinds == ["job.queued", "job.unknown"]
    assert len(script.requests) == 1  # ended with the stream: no reconnect, no read


async def test_events_after_the_end_of_a_settled_job_end_without_reconnecting() -> None:
    """Nothing after `after` and the job settled: the server ends the stream at once and the
    client reads the job to know why (it once reconnected forever: fixed with issue 17)."""
    script = Script(sse(""), httpx.Response(200, json=job_body("succeeded")))
    async with client(script) as jobs:
        items = [item async for item in jobs.events("j1", after=4)]
    assert items == []
    assert [request.url.path for request in script.requests] == [
        "/v1/jobs/j1/events",
        "/v1/jobs/j1",
    ]
    assert script.requests[0].headers["Last-Event-ID"] == "4"


async def test_events_of_a_running_job_reconnect_when_the_stream_ends_early() -> None:
    """A stream closed before the job settled (a proxy, say) is resumed, not taken as the end."""
    script = Script(
        sse(event(1, "job.queued", "queued")), sse(""), sse(event(2, "job.succeeded", "succeeded"))
    )
    async with client(script) as jobs:
        seqs = [item.seq async for item in jobs.events("j1")]
    assert seqs == [1, 2]
    assert [request.headers.get("Last-Event-ID") for request in script.requests] == ["0", "1", "1"]


async def test_a_stream_ended_for_its_token_surfaces_the_401_that_says_why() -> None:
    """The server's last event of a stream whose token was revoked is no job event: the client
    stops there, and its reconnect gets the 401 problem, raised as such. (mutant: the
    `stream-ended` branch of JobClient._stream removed: a validation error instead, seen
    failing.)"""
    ended = 'event: stream-ended\ndata: {"reason":"token-revoked","detail":"d"}\n\n'
    script = Script(sse(event(1, "job.queued", "queued") + ended), problem(401, "token-revoked"))
    seen = []
    async with client(script) as jobs:
        with pytest.raises(ProblemError) as raised:
            async for item in jobs.events("j1"):
                seen.append(item.kind)
    assert seen == ["job.queued"]
    assert raised.value.status == 401
    assert [request.headers.get("Last-Event-ID") for request in script.requests] == ["0", "1"]
