"""`GET /v1/spend` against the real server process, on SQLite and on PostgreSQL: jobs of two
owners run by the server (its providers report no usage: every cost is unknown, counted and
never summed as 0); an owner's token reads its own owner's spend and budgets only, naming
another owner is 403; an operator reads everyone's, or one owner's; a bad parameter is a 422
problem naming it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from jobrouter.client import JobClient, JobIntent, ProblemError
from tests.acceptance.conftest import Server, start_server, stop_server
from tests.acceptance.test_http_api import FAST
from tests.store.pg import create_database, drop_databases

PROBLEM = "application/problem+json"
BUDGETS = """
[budgets.alice_daily]
owner = "alice"
period = "day"
tokens = 100000

[budgets.bob_daily]
owner = "bob"
period = "day"
tokens = 100000
"""


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def spent(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, dict[str, str]]]:
    """A server on each backend where alice ran two jobs and bob one; the tokens by name."""
    url = asyncio.run(create_database()) if request.param == "postgres" else None
    server = start_server(tmp_path_factory.mktemp("spend"), extra_config=BUDGETS, database_url=url)
    try:
        tokens = {
            "alice": server.token("alice"),
            "bob": server.token("bob"),
            "ops": server.token("ops", operator=True),
        }
        asyncio.run(run_jobs(server, tokens))
        yield server, tokens
    finally:
        stop_server(server)
        if url is not None:
            drop_databases([url])


async def run_jobs(server: Server, tokens: dict[str, str]) -> None:
    for owner, count in (("alice", 2), ("bob", 1)):
        async with JobClient(server.url, tokens[owner], retry=FAST) as client:
            for n in range(count):
                job = await client.submit(JobIntent("echo", {"text": f"{owner}-{n}"}))
                async for _ in client.events(job.id):  # until the job settles
                    pass
                assert (await client.get(job.id)).state == "succeeded"


def get(server: Server, token: str, **params: Any) -> httpx.Response:
    return httpx.get(
        f"{server.url}/v1/spend",
        params=params,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def test_an_owner_reads_its_own_spend_and_budgets(spent: tuple[Server, dict[str, str]]) -> None:
    """Mutant killed: `scoped_owner` returning the asked owner for an owner token (None: alice
    reads bob's spend and budget too)."""
    server, tokens = spent
    answer = get(server, tokens["alice"], by="owner,task")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["owner"] == "alice"
    assert [(x["owner"], x["task"], x["attempts"]) for x in body["lines"]] == [("alice", "echo", 2)]
    [line] = body["lines"]
    assert (line["cost_usd"], line["cost_unknown"]) == (None, 2)  # no usage: unknown, not 0
    assert [b["budget"] for b in body["budgets"]] == ["alice_daily"]


def test_an_owner_naming_another_owner_is_refused(spent: tuple[Server, dict[str, str]]) -> None:
    """Mutant killed: `scoped_owner` without its refusal (bob's name silently narrowed to
    alice's own spend: a 200)."""
    server, tokens = spent
    answer = get(server, tokens["alice"], owner="bob")
    assert answer.status_code == 403
    assert answer.headers["content-type"] == PROBLEM
    assert answer.json()["type"] == "urn:jobrouter:problem:operator-only"
    assert get(server, tokens["alice"], owner="alice").status_code == 200


def test_an_operator_reads_every_owner_or_one(spent: tuple[Server, dict[str, str]]) -> None:
    """Mutant killed: `scoped_owner` holding an operator to its own owner (`ops`: nothing)."""
    server, tokens = spent
    every = get(server, tokens["ops"], by=["owner", "day"]).json()
    assert [(x["owner"], x["attempts"]) for x in every["lines"]] == [("alice", 2), ("bob", 1)]
    assert every["by"] == ["owner", "day"] and every["owner"] is None
    assert every["total"]["attempts"] == 3 and every["total"]["cost_unknown"] == 3
    assert [b["budget"] for b in every["budgets"]] == ["alice_daily", "bob_daily"]
    bob = get(server, tokens["ops"], owner="bob").json()
    assert [(x["owner"], x["attempts"]) for x in bob["lines"]] == [("bob", 1)]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"by": "owner,shop"}, "by"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-12-05", "until": "2026-12-01"}, "until"),
    ],
)
def test_a_bad_parameter_is_a_422_naming_it(
    spent: tuple[Server, dict[str, str]], params: dict[str, str], field: str
) -> None:
    """Mutant killed: problems.py without its SpendQueryInvalid mapping (a 500)."""
    server, tokens = spent
    answer = get(server, tokens["alice"], **params)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == PROBLEM
    problem = answer.json()
    assert problem["type"] == "urn:jobrouter:problem:spend-query-invalid"
    assert problem["field"] == field
    assert problem["errors"][0]["where"] == f"query.{field}"
    assert problem["detail"].startswith(f"{field}: ")


async def test_the_http_client_reads_the_same_report(spent: tuple[Server, dict[str, str]]) -> None:
    """`JobClient.spend` is the route through the Python HTTP client: alice's own report and
    budgets as the route answers them, an operator's by owner, and a bad query a problem naming
    it, not retried into a hang. Mutants seen failing: `by` not sent (alice's report grouped
    by owner only, no task); the answer parsed without its budgets."""
    server, tokens = spent
    async with JobClient(server.url, tokens["alice"], retry=FAST) as alice:
        mine = await alice.spend("owner,task")
        with pytest.raises(ProblemError) as refused:
            await alice.spend(since="yesterday")
    assert mine.model_dump(mode="json") == get(server, tokens["alice"], by="owner,task").json()
    assert [(x.owner, x.task, x.attempts) for x in mine.lines] == [("alice", "echo", 2)]
    assert [b.budget for b in mine.budgets] == ["alice_daily"]
    assert refused.value.status == 422 and "since" in str(refused.value)
    async with JobClient(server.url, tokens["ops"], retry=FAST) as ops:
        every = await ops.spend()
    assert [(x.owner, x.attempts) for x in every.lines] == [("alice", 2), ("bob", 1)]
