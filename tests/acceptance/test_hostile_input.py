"""Hostile and careless requests against the HTTP API, in process, on SQLite and PostgreSQL
(issue 14): every refusal a clean 4xx, every store fault a 503 with Retry-After, nothing of the
deployment shown to an unauthenticated caller.

Each test names what the code before issue 14 answered (each fails there).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from jobrouter import Router
from jobrouter.http.app import create_app
from tests.store.pg import ADMIN_URL
from tests.support.backends import BACKENDS
from tests.support.backends import db_url as db_url  # a fixture, used by name
from tests.support.echo_router import router as router  # a fixture, used by name
from tests.support.echo_router import submit_echo
from tests.support.store_jobs import create_job

OWNER = "shop-1"


@pytest.fixture
async def client(router: Router) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(router))
    async with httpx.AsyncClient(transport=transport, base_url="http://jobrouter") as opened:
        yield opened


async def _auth(router: Router, *, operator: bool = False, **kwargs: Any) -> dict[str, str]:
    token, _ = await router.store.tokens.create_token(OWNER, operator=operator, **kwargs)
    return {"Authorization": f"Bearer {token}"}


async def test_a_nul_in_an_id_or_key_is_a_clean_refusal(
    router: Router, client: httpx.AsyncClient
) -> None:
    """Before: 500 with a traceback on PostgreSQL (the driver refuses NUL); SQLite stored it."""
    auth = await _auth(router)
    job = await submit_echo(client, auth, "k-1")
    answers = [
        await client.get("/v1/jobs/a%00b", headers=auth),
        await client.get("/v1/jobs/a%00b/attempts", headers=auth),
        await client.get("/v1/jobs", params={"idempotency_key": "k\x00"}, headers=auth),
        await client.post("/v1/jobs/a%00b/cancel", headers=auth),
        await client.post(
            f"/v1/jobs/{job['id']}/cancel", json={"reason": "no\x00pe"}, headers=auth
        ),
        await client.post(
            "/v1/jobs",
            json={"task": "echo", "input": {"text": "x"}},
            headers={**auth, "Idempotency-Key": "k\x00"},
        ),
    ]
    for answer in answers:
        assert 400 <= answer.status_code < 500, (answer.request.url, answer.text)
    assert answers[-1].status_code == 400
    assert answers[-1].json()["type"].endswith("idempotency-key-invalid")
    still = await client.get(f"/v1/jobs/{job['id']}", headers=auth)
    assert still.json()["state"] == "queued"  # the refused cancel changed nothing


async def test_a_huge_last_event_id_is_answered(router: Router, client: httpx.AsyncClient) -> None:
    """Before: 500 on PostgreSQL (the events' seq column was 32-bit)."""
    auth = await _auth(router)
    job = await submit_echo(client, auth, "k-2")
    await client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth)  # settled: the stream ends
    for start in (2**31, 2**40, 2**63 - 1):
        answer = await client.get(
            f"/v1/jobs/{job['id']}/events", headers={**auth, "Last-Event-ID": str(start)}
        )
        assert answer.status_code == 200, answer.text
        assert "event:" not in answer.text  # nothing after that seq
    too_big = await client.get(
        f"/v1/jobs/{job['id']}/events", headers={**auth, "Last-Event-ID": str(2**63)}
    )
    assert too_big.status_code == 422


async def test_revoked_and_expired_tokens_are_told_apart(
    router: Router, client: httpx.AsyncClient
) -> None:
    """Before: every refused token was "unknown or revoked", and no token could expire."""
    token, record = await router.store.tokens.create_token(OWNER)
    await router.store.tokens.revoke_token(record.id)
    expired, _ = await router.store.tokens.create_token(OWNER, expires_in=1e-6)
    for presented, word in ((token, "revoked"), (expired, "expired"), ("jr_nope", "unknown")):
        answer = await client.get(
            "/v1/jobs",
            params={"idempotency_key": "k"},
            headers={"Authorization": f"Bearer {presented}"},
        )
        assert answer.status_code == 401
        assert answer.json()["type"].endswith(f"token-{word}")
        assert f"is {word}" in answer.json()["detail"]


async def _break(router: Router, db_url: str) -> None:
    """Make the database refuse: SQLite read-only; PostgreSQL refusing every connection."""
    if db_url.startswith("sqlite"):
        _writer(router).execute("PRAGMA query_only=ON")
        return
    name = db_url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(ADMIN_URL)
    try:
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name
        )
    finally:
        await admin.close()


async def test_readiness_names_no_database(
    router: Router, client: httpx.AsyncClient, db_url: str
) -> None:
    """Before: the unauthenticated 503 showed the database URL and the driver's message (and
    on SQLite a read-only database was "ready")."""
    assert (await client.get("/health/ready")).status_code == 200
    await _break(router, db_url)
    answer = await client.get("/health/ready")
    assert answer.status_code == 503 and answer.headers["Retry-After"]
    where = db_url.split("://", 1)[1].strip("/")  # host and database, or the file's path
    assert where.split("/")[0] not in answer.text and where.split("/")[-1] not in answer.text


def _writer(router: Router) -> sqlite3.Connection:
    conn: sqlite3.Connection = router.store.connector._writer  # type: ignore[attr-defined]
    return conn


@pytest.mark.parametrize("db_url", [BACKENDS[0]], indirect=True)
async def test_a_read_only_database_is_not_ready_and_refuses_with_503(
    router: Router, client: httpx.AsyncClient
) -> None:
    """Before: /health/ready said ready (it only read) and every write was a 500."""
    auth = await _auth(router)
    assert (await client.get("/health/ready")).status_code == 200
    _writer(router).execute("PRAGMA query_only=ON")  # SQLITE_READONLY, as a read-only file
    ready = await client.get("/health/ready")
    assert ready.status_code == 503 and ready.headers["Retry-After"]
    refused = await client.post(
        "/v1/jobs",
        json={"task": "echo", "input": {"text": "x"}},
        headers={**auth, "Idempotency-Key": "k-ro"},
    )
    assert refused.status_code == 503 and refused.headers["Retry-After"], refused.text


@pytest.mark.parametrize("db_url", [BACKENDS[0]], indirect=True)
async def test_a_full_disk_refuses_with_503(router: Router, client: httpx.AsyncClient) -> None:
    """Before: 500 "unexpected" (a bare sqlite3.OperationalError: database or disk is full)."""
    auth = await _auth(router)
    writer = _writer(router)
    writer.execute(f"PRAGMA max_page_count={writer.execute('PRAGMA page_count').fetchone()[0]}")
    statuses = set()
    for n in range(200):  # until a write needs a new page
        answer = await client.post(
            "/v1/jobs",
            json={"task": "echo", "input": {"text": "x" * 400}},
            headers={**auth, "Idempotency-Key": f"k-full-{n}" + "y" * 200},
        )
        statuses.add(answer.status_code)
        if answer.status_code != 202:
            assert answer.status_code == 503 and answer.headers["Retry-After"], answer.text
            break
    assert 503 in statuses


def _series(text: str, name: str) -> set[str]:
    return {line.split(" ")[0] for line in text.splitlines() if line.startswith(name + "{")}


async def test_random_methods_and_paths_make_no_new_metric_series(
    router: Router, client: httpx.AsyncClient
) -> None:
    """Before: every unknown method was a label value (3,000 methods -> 3,021 series), and the
    outbox gauges were labelled with owners' names, shown without a token."""
    auth = await _auth(router)
    job = await submit_echo(client, auth, "k-metrics")
    await client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth)  # an outbox row of OWNER
    for n in range(3):  # every series these requests can make exists now
        await client.request(f"WARMUP{n}", f"/random/{n}")
        await client.get(f"/random/{n}")
        await client.get("/metrics")
    name = "jobrouter_http_request_duration_seconds_count"
    before = _series((await client.get("/metrics")).text, name)
    for n in range(60):
        await client.request(f"M{n}ETHOD", f"/v1/jobs/{n}/x{n}")
        await client.request(f"Z{n}", f"/p{n}")
    text = (await client.get("/metrics")).text
    assert _series(text, name) == before
    assert 'method="other"' in text
    assert OWNER not in text


async def test_a_job_with_deeply_nested_input_reads_back(
    router: Router, client: httpx.AsyncClient
) -> None:
    """A job stored with input nested 300 levels (the door's limit is another matter: this is
    data already in the store). Before: every answer about it was a 500 (pydantic's
    "Maximum serialization depth exceeded")."""
    auth = await _auth(router)
    deep: dict[str, Any] = {"text": "bottom"}
    for _ in range(300):
        deep = {"a": deep}
    deep["text"] = "top"
    job = await create_job(
        router.store,
        owner=OWNER,
        idempotency_key="k-deep",
        task="echo",
        input=deep,
        params={"p": deep},
        deadline_s=None,
        claimed_by=None,
        claim_s=0,
    )
    answers = [
        await client.get(f"/v1/jobs/{job.id}", headers=auth),
        await client.get("/v1/jobs", params={"idempotency_key": "k-deep"}, headers=auth),
        await client.get(f"/v1/jobs/{job.id}/attempts", headers=auth),
        await client.post(f"/v1/jobs/{job.id}/cancel", headers=auth),
        await client.get(f"/v1/jobs/{job.id}/events", headers=auth),
    ]
    for answer in answers:
        assert answer.status_code == 200, (answer.request.url, answer.text[:300])
    assert answers[0].json()["input"] == deep and answers[0].json()["params"] == {"p": deep}
    assert answers[1].json()["items"][0]["id"] == job.id
    assert answers[3].json()["state"] == "cancelled"
    assert "event: job.cancelled" in answers[4].text


@pytest.mark.parametrize(
    "body",
    [
        b'{"task": "echo", "input": {"text": "\\ud800"}}',  # a lone surrogate, legal JSON text
        b'{"task": "echo", "input": {"text": "hi"}, "params": {"x": "\\udfff"}}',
    ],
)
async def test_a_lone_surrogate_in_a_submit_is_a_4xx_not_a_500(
    router: Router, client: httpx.AsyncClient, body: bytes
) -> None:
    """JSON may spell a lone surrogate (`"\\ud800"`); Python decodes it into a str that cannot
    be encoded. It is refused with a 4xx problem, nothing written. Two guards stand in the way:
    the HTTP body's (http/schemas._json_problem) and the door's (door._check_scalar, for every
    path). Mutant (issue 33): both removed: UnicodeEncodeError, a 500 (seen). Either alone
    removed still answers 4xx (seen): the door's alone is killed by
    tests/unit/test_door.py::test_a_non_string_key_or_a_lone_surrogate_is_refused_not_a_type_error."""
    auth = await _auth(router)
    answer = await client.post(
        "/v1/jobs",
        content=body,
        headers={**auth, "Idempotency-Key": "k-surrogate", "Content-Type": "application/json"},
    )
    assert 400 <= answer.status_code < 500, answer.text
    assert "Unicode" in answer.text
    assert (
        await client.get("/v1/jobs", params={"idempotency_key": "k-surrogate"}, headers=auth)
    ).json()["items"] == []
