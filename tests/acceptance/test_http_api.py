"""The HTTP API against the real server process: idempotency, owners, validation, limits,
operator actions, health and metrics."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from jobrouter.client import (
    IdempotencyKeyReused,
    JobClient,
    JobIntent,
    NotFound,
    ProblemError,
    RetryPolicy,
)
from tests.acceptance.conftest import Server

PROBLEM = "application/problem+json"
FAST = RetryPolicy(attempts=4, initial=0.02, cap=0.2, deadline=10)


def client(server: Server, token: str) -> JobClient:
    return JobClient(server.url, token, retry=FAST)


def auth(token: str, key: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


@pytest.fixture(scope="module")
def alice(server: Server) -> str:
    return server.token("alice")


@pytest.fixture(scope="module")
def bob(server: Server) -> str:
    return server.token("bob")


@pytest.fixture(scope="module")
def operator(server: Server) -> str:
    return server.token("ops", operator=True)


async def test_missing_key_is_400_problem_saying_what_to_send(server: Server, alice: str) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.post(
            "/v1/jobs", json={"task": "echo", "input": {"text": "a"}}, headers=auth(alice)
        )
    assert response.status_code == 400
    assert response.headers["content-type"] == PROBLEM
    assert "Idempotency-Key" in response.json()["detail"]
    assert (
        server.count("SELECT COUNT(*) FROM jobs WHERE owner = 'alice' AND input LIKE '%\"a\"%'")
        == 0
    )


async def test_first_submit_202_with_url_then_replay_in_flight_and_finished(
    server: Server, alice: str
) -> None:
    """A replay carries `Idempotency-Replayed: true`, the header README names. Kills the mutant
    "the server sends `Idempotent-Replayed`" (what it sent until issue 30)."""
    key = str(uuid.uuid4())
    body = {"task": "slow", "input": {"text": "replay"}}
    async with httpx.AsyncClient(base_url=server.url) as http:
        first = await http.post("/v1/jobs", json=body, headers=auth(alice, key))
        in_flight = await http.post("/v1/jobs", json=body, headers=auth(alice, key))
        assert first.status_code == 202
        assert first.headers["Location"] == first.json()["url"]
        assert "Idempotency-Replayed" not in first.headers
        assert in_flight.status_code == 202
        assert in_flight.headers["Idempotency-Replayed"] == "true"
        assert in_flight.json()["id"] == first.json()["id"]
        assert not in_flight.json()["terminal"]
        async with client(server, alice) as jobs:
            done = await jobs.wait(first.json()["id"], timeout=60)
        finished = await http.post("/v1/jobs", json=body, headers=auth(alice, key))
    assert done.state == "succeeded"
    assert finished.headers["Idempotency-Replayed"] == "true"
    assert finished.json()["id"] == first.json()["id"]
    assert finished.json()["state"] == "succeeded"


async def test_twenty_concurrent_identical_posts_make_one_job(server: Server, alice: str) -> None:
    key = f"order-{uuid.uuid4()}"
    body = {"task": "echo", "input": {"text": "twenty"}}
    async with httpx.AsyncClient(base_url=server.url) as http:
        answers = await asyncio.gather(
            *(http.post("/v1/jobs", json=body, headers=auth(alice, key)) for _ in range(20))
        )
    assert {answer.status_code for answer in answers} == {202}
    assert len({answer.json()["id"] for answer in answers}) == 1
    assert sum("Idempotency-Replayed" not in answer.headers for answer in answers) == 1
    assert (
        server.count("SELECT COUNT(*) FROM jobs WHERE owner = 'alice' AND idempotency_key = ?", key)
        == 1
    )


async def test_same_key_other_payload_is_422_naming_the_job(server: Server, alice: str) -> None:
    intent = JobIntent("echo", {"text": "original"})
    async with client(server, alice) as jobs:
        job = await jobs.submit(intent)
        changed = JobIntent("echo", {"text": "changed"}, idempotency_key=intent.idempotency_key)
        with pytest.raises(IdempotencyKeyReused) as refused:
            await jobs.submit(changed)
    assert refused.value.status == 422
    assert refused.value.job_id == job.id
    assert "new key" in refused.value.detail


async def test_another_owner_gets_404_and_its_own_key_space(
    server: Server, alice: str, bob: str
) -> None:
    intent = JobIntent("echo", {"text": "mine"})
    async with client(server, alice) as mine, client(server, bob) as theirs:
        job = await mine.submit(intent)
        for call in (theirs.get(job.id), theirs.attempts(job.id), theirs.cancel(job.id)):
            with pytest.raises(NotFound):
                await call
        with pytest.raises(NotFound):
            async for _ in theirs.events(job.id):
                pass
        assert await theirs.find(intent.idempotency_key) is None
        bobs = await theirs.submit(intent)  # the same key is another intent for another owner
    assert bobs.id != job.id and bobs.created and bobs.owner == "bob"


async def test_input_checked_against_the_contract_before_a_job_exists(
    server: Server, alice: str
) -> None:
    key = str(uuid.uuid4())
    async with httpx.AsyncClient(base_url=server.url) as http:
        bad_input = await http.post(
            "/v1/jobs", json={"task": "echo", "input": {"txt": "x"}}, headers=auth(alice, key)
        )
        bad_task = await http.post(
            "/v1/jobs", json={"task": "nope", "input": {"text": "x"}}, headers=auth(alice, key)
        )
        not_json = await http.post("/v1/jobs", content=b"{", headers=auth(alice, key))
    assert bad_input.status_code == 422
    assert bad_input.json()["type"].endswith("input-invalid")
    assert "text" in bad_input.json()["detail"]
    assert bad_task.status_code == 422 and "echo" in bad_task.json()["detail"]
    assert not_json.status_code == 422 and not_json.headers["content-type"] == PROBLEM
    assert server.count("SELECT COUNT(*) FROM jobs WHERE idempotency_key = ?", key) == 0


async def test_the_door_refuses_params_and_depth_over_http_as_over_the_api(
    server: Server, alice: str
) -> None:
    """The HTTP route calls the domain's door (`Router.submit`): the same refusals, as 422
    problems naming the field, nothing written. Fails on the old code, which accepted both."""
    key = str(uuid.uuid4())
    deep: object = "x"
    for _ in range(40):
        deep = {"d": deep}
    async with httpx.AsyncClient(base_url=server.url) as http:
        hot = await http.post(
            "/v1/jobs",
            headers=auth(alice, key),
            json={"task": "echo", "input": {"text": "x"}, "params": {"temperature": 2.0}},
        )
        nested = await http.post(
            "/v1/jobs",
            headers=auth(alice, key),
            json={"task": "echo", "input": {"text": "x", "deep": deep}},
        )
    assert hot.status_code == 422 and hot.headers["content-type"] == PROBLEM
    assert hot.json()["type"].endswith("params-refused")
    assert hot.json()["field"] == "params.temperature"
    assert "fixed by the contract's certification" in hot.json()["detail"]
    assert nested.status_code == 422 and nested.json()["type"].endswith("input-too-deep")
    assert server.count("SELECT COUNT(*) FROM jobs WHERE idempotency_key = ?", key) == 0


async def test_oversized_body_is_413_declared_or_chunked(server: Server, alice: str) -> None:
    body = {"task": "echo", "input": {"text": "x" * 70_000}}

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b"x" * 8192

    async with httpx.AsyncClient(base_url=server.url) as http:
        declared = await http.post("/v1/jobs", json=body, headers=auth(alice, "big"))
        chunked = await http.post("/v1/jobs", content=chunks(), headers=auth(alice, "big"))
    assert declared.status_code == chunked.status_code == 413
    assert "max_body_bytes" in declared.json()["detail"]
    assert "Content-Length" not in chunked.request.headers


async def test_tokens_are_required_and_checked(server: Server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        missing = await http.get("/v1/jobs", params={"idempotency_key": "k"})
        wrong = await http.get(
            "/v1/jobs", params={"idempotency_key": "k"}, headers=auth("jr_not-a-token")
        )
    assert missing.status_code == wrong.status_code == 401
    assert "token create" in missing.json()["detail"]
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")


async def test_find_by_key_and_cancel(server: Server, alice: str) -> None:
    intent = JobIntent("slow", {"text": "cancel me"})
    async with client(server, alice) as jobs:
        job = await jobs.submit(intent)
        found = await jobs.find(intent.idempotency_key)
        cancelled = await jobs.cancel(job.id, "changed my mind")
        again = await jobs.cancel(job.id)
        waited = await jobs.wait(job.id, timeout=5)
    assert found is not None and found.id == job.id
    assert cancelled.state == again.state == waited.state == "cancelled"
    assert cancelled.error == "changed my mind"


async def test_cancelling_a_finished_job_is_409(server: Server, alice: str) -> None:
    async with client(server, alice) as jobs:
        job = await jobs.submit(JobIntent("echo", {"text": "done"}))
        await jobs.wait(job.id, timeout=10)
        with pytest.raises(ProblemError) as refused:
            await jobs.cancel(job.id)
    assert refused.value.status == 409


async def test_operator_resolves_an_unknown_attempt(
    server: Server, alice: str, operator: str
) -> None:
    async with client(server, alice) as jobs, client(server, operator) as ops:
        job = await jobs.submit(JobIntent("hang", {"text": "post it"}))
        settled = await jobs.wait(job.id, timeout=10)
        assert settled.state == "unknown"  # the stream ended: the job needs attention
        [attempt] = await jobs.attempts(job.id)
        assert attempt.state == "unknown"
        with pytest.raises(ProblemError) as forbidden:
            await jobs.resolve(attempt.id, "succeeded", {"text": "posted"})
        resolved = await ops.resolve(attempt.id, "succeeded", {"text": "posted"}, "seen online")
        with pytest.raises(NotFound):
            await ops.resolve("no-such-attempt", "failed")
        # A late watcher follows the log past the pause to the job's end, as the server's
        # stream does (the client once stopped at the old `job.unknown`).
        replay = [event.kind async for event in jobs.events(job.id)]
    assert forbidden.value.status == 403
    assert resolved.state == "succeeded" and resolved.result == {"text": "posted"}
    assert resolved.winner_attempt_id == attempt.id
    assert replay[-1] == "job.succeeded" and "job.unknown" in replay


async def test_a_resolution_is_checked_then_recorded_with_the_token(
    server: Server, alice: str, operator: str
) -> None:
    """`succeeded` without a result is a 422 naming `result` (it was a 409 about `None is
    not of type 'object'`: the mutant "no `result is None` check in router/resolution.py");
    the resolution keeps its note and the operator token's id (never the token) on the
    attempt and in the job's events, and the succeeded job has no stale error."""
    async with client(server, alice) as jobs:
        job = await jobs.submit(JobIntent("hang", {"text": "post it"}))
        assert (await jobs.wait(job.id, timeout=10)).state == "unknown"
        [attempt] = await jobs.attempts(job.id)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        path = f"/v1/attempts/{attempt.id}/resolve"
        missing = await http.post(path, json={"outcome": "succeeded"}, headers=auth(operator))
        done = await http.post(
            path,
            json={"outcome": "succeeded", "result": {"text": "posted"}, "note": "seen online"},
            headers=auth(operator),
        )
        shown = await http.get(f"/v1/jobs/{job.id}/attempts", headers=auth(operator))
        events = await http.get(f"/v1/jobs/{job.id}/events", headers=auth(operator))
    assert missing.status_code == 422 and missing.headers["content-type"] == PROBLEM
    problem = missing.json()
    assert problem["type"].endswith(":resolution-invalid") and problem["field"] == "result"
    assert problem["errors"][0]["where"] == "result"
    assert "result is required" in problem["detail"] and "None is not" not in problem["detail"]
    assert done.status_code == 200, done.text
    assert done.json()["state"] == "succeeded" and done.json()["error"] is None
    [record] = shown.json()["items"]
    assert record["resolution_note"] == "seen online"
    assert record["resolved_by"].startswith("token:") and operator not in record["resolved_by"]
    assert '"resolution"' in events.text and record["resolved_by"] in events.text


async def test_health_and_metrics(server: Server, alice: str) -> None:
    async with client(server, alice) as jobs:
        await jobs.wait((await jobs.submit(JobIntent("echo", {"text": "m"}))).id, timeout=10)
    async with httpx.AsyncClient(base_url=server.url) as http:
        live = await http.get("/health/live")
        ready = await http.get("/health/ready")
        metrics = (await http.get("/metrics")).text
    assert live.json()["status"] == "ok"
    assert ready.json()["status"] == "ready"
    assert 'jobrouter_attempts_total{outcome="succeeded",provider="fast"}' in metrics
    assert "jobrouter_jobs_open" in metrics
    assert 'jobrouter_http_request_duration_seconds_count{method="POST",route="/v1/jobs"' in metrics
