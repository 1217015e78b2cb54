"""`GET /v1/jobs` and `GET /v1/jobs/counts` against the real server process: filters, keyset
pages, owner scoping (an owner token never sees another owner's jobs), and the old
find-by-key form still answering as before."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.acceptance.conftest import Server


def auth(token: str, key: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


@pytest.fixture(scope="module")
def carol(server: Server) -> str:
    return server.token("carol")


@pytest.fixture(scope="module")
def dave(server: Server) -> str:
    return server.token("dave")


@pytest.fixture(scope="module")
def operator(server: Server) -> str:
    return server.token("ops", operator=True)


async def submit(http: httpx.AsyncClient, token: str, task: str, text: str) -> dict[str, Any]:
    answer = await http.post(
        "/v1/jobs",
        headers=auth(token, str(uuid.uuid4())),
        json={"task": task, "input": {"text": text}},
    )
    assert answer.status_code == 202, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def listed(http: httpx.AsyncClient, token: str, **query: Any) -> list[str]:
    """Every id the listing gives, following `next` links to the end."""
    ids: list[str] = []
    url: str | None = "/v1/jobs"
    params: dict[str, Any] | None = query
    while url is not None:
        answer = await http.get(url, headers=auth(token), params=params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        ids += [item["id"] for item in body["items"]]
        url, params = body["next"], None
    return ids


async def test_owner_lists_own_jobs_in_pages_and_never_another_owners(
    server: Server, carol: str, dave: str, operator: str
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        mine = [(await submit(http, carol, "slow", f"c{i}"))["id"] for i in range(5)]
        theirs = (await submit(http, dave, "slow", "d"))["id"]
        carols = await listed(http, carol, limit=2)
        everyone = await listed(http, operator, limit=2)
        only_dave = await listed(http, operator, owner="dave")
        widened = await http.get("/v1/jobs", headers=auth(carol), params={"owner": "dave"})
    assert carols == sorted(mine, reverse=True)
    assert theirs not in carols
    assert set(mine) | {theirs} <= set(everyone)
    assert only_dave == [theirs]
    assert widened.status_code == 403
    assert widened.headers["content-type"] == "application/problem+json"


async def test_needs_attention_state_and_task_filters(server: Server, carol: str) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        hung = await submit(http, carol, "hang", "post it")
        echo = await submit(http, carol, "echo", "hi")
        async with http.stream(
            "GET", f"/v1/jobs/{hung['id']}/events", headers=auth(carol)
        ) as events:
            async for _ in events.aiter_lines():  # the stream ends when the job settles
                pass
        attention = await listed(http, carol, needs_attention="true")
        hangs = await listed(http, carol, task="hang", state="unknown")
        echoes = await listed(http, carol, task="echo")
        counts = (await http.get("/v1/jobs/counts", headers=auth(carol))).json()
    assert hung["id"] in attention and echo["id"] not in attention
    assert hangs == [hung["id"]]
    assert echo["id"] in echoes and hung["id"] not in echoes
    assert counts["counts"]["unknown"] >= 1
    assert counts["total"] == sum(counts["counts"].values())


async def test_provider_and_created_bounds(server: Server, dave: str) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        job = await submit(http, dave, "echo", "when")
        on_fast = await listed(http, dave, provider="fast")
        on_hang = await listed(http, dave, provider="hang")
        after = await listed(http, dave, created_after=job["created_at"])
        before = await listed(http, dave, created_before=job["created_at"])
    assert job["id"] in on_fast and job["id"] not in on_hang
    assert job["id"] in after and job["id"] not in before


async def test_find_by_key_still_answers_one_job(server: Server, carol: str) -> None:
    key = str(uuid.uuid4())
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        made = await http.post(
            "/v1/jobs", headers=auth(carol, key), json={"task": "echo", "input": {"text": "k"}}
        )
        found = await http.get("/v1/jobs", headers=auth(carol), params={"idempotency_key": key})
        missing = await http.get(
            "/v1/jobs", headers=auth(carol), params={"idempotency_key": "never-used"}
        )
        mixed = await http.get(
            "/v1/jobs", headers=auth(carol), params={"idempotency_key": key, "state": "queued"}
        )
    assert [item["id"] for item in found.json()["items"]] == [made.json()["id"]]
    assert missing.json()["items"] == []
    assert mixed.status_code == 422


@pytest.mark.parametrize(
    "query",
    [
        {"cursor": "../etc"},
        {"limit": "0"},
        {"limit": "501"},
        {"state": "done"},
        {"created_after": "yesterday"},
    ],
)
async def test_bad_listing_queries_are_422_problems(
    server: Server, carol: str, query: dict[str, str]
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        answer = await http.get("/v1/jobs", headers=auth(carol), params=query)
    assert answer.status_code == 422, answer.text
