"""The console and the listing attacked over plain HTTP (no browser): what a hostile or careless
client can send to the real server process, and what it must never get back."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from jobrouter.ui.session import COOKIE, csrf_of
from tests.acceptance.conftest import Server


@pytest.fixture(scope="module")
def erin(server: Server) -> str:
    return server.token("erin")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    "target",
    [
        "/v1/jobs?task=%00",
        "/v1/jobs?owner=erin%00",
        "/v1/jobs?provider=a%00b",
        "/v1/jobs?idempotency_key=%00",
        "/v1/jobs/counts?task=%00",
        "/v1/jobs/%00",
        "/v1/jobs/a%00/attempts",
        "/ui/jobs?task=%00",
        "/ui/jobs/rows?owner=%00",
        "/ui/jobs/%00",
        "/ui/jobs/%00/live",
    ],
)
async def test_a_nul_character_in_the_path_or_query_is_a_422_on_every_backend(
    server: Server, erin: str, target: str
) -> None:
    """PostgreSQL refuses NUL in text (a 500 that the same request on SQLite never gives):
    refused at the edge, for both backends alike."""
    async with httpx.AsyncClient(
        base_url=server.url, timeout=10, headers=bearer(erin), cookies={COOKIE: erin}
    ) as http:
        answer = await http.get(target)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"


@pytest.fixture(scope="module")
def frank(server: Server) -> str:
    return server.token("frank")


async def test_resolving_another_owners_attempt_is_no_such_attempt_and_names_no_job(
    server: Server, erin: str, frank: str
) -> None:
    """An owner token posting to another owner's attempt learns nothing: the same answer as an
    attempt that does not exist (it used to answer "no job <the other owner's job id>")."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        made = await http.post(
            "/v1/jobs",
            headers={**bearer(frank), "Idempotency-Key": "fr-1"},
            json={"task": "hang", "input": {"text": "post it"}},
        )
        job_id = made.json()["id"]
        attempts: list[dict[str, str]] = []
        while not attempts:  # the attempt row is written before the provider is called
            listed = await http.get(f"/v1/jobs/{job_id}/attempts", headers=bearer(frank))
            attempts = listed.json()["items"]
            await asyncio.sleep(0.02)
        csrf = {"csrf": csrf_of(erin), "outcome": "failed", "note": "n"}
        http.cookies.set(COOKIE, erin)
        theirs = await http.post(f"/ui/attempts/{attempts[0]['id']}/resolve", data=csrf)
        missing = await http.post(f"/ui/attempts/{'0' * 32}/resolve", data=csrf)
    assert theirs.status_code == missing.status_code == 404
    assert job_id not in theirs.text
    assert "No such attempt" in theirs.text


@pytest.mark.parametrize("off", ["false", "0", "no", "off"])
async def test_needs_attention_off_in_the_console_url_means_off_as_in_the_api(
    server: Server, erin: str, off: str
) -> None:
    """`/v1/jobs?needs_attention=false` lists every state; the console read any value as on."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        made = await http.post(
            "/v1/jobs",
            headers={**bearer(erin), "Idempotency-Key": f"na-{off}"},
            json={"task": "echo", "input": {"text": "hi"}},
        )
        http.cookies.set(COOKIE, erin)
        page = await http.get("/ui/jobs", params={"needs_attention": off})
    assert page.status_code == 200
    assert made.json()["id"] in page.text


@pytest.mark.parametrize("path", ["/ui/login", "/ui/jobs", "/ui/attention", "/ui/matrix"])
async def test_console_pages_cannot_be_framed_or_kept_in_the_browser_cache(
    server: Server, erin: str, path: str
) -> None:
    """Framing is a click-jacking surface for the cancel and resolve buttons (from a sibling
    site, which SameSite does not stop); a cached page of jobs outlives the sign-out."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10, cookies={COOKIE: erin}) as http:
        answer = await http.get(path)
    assert answer.status_code == 200
    assert answer.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["cache-control"] == "no-store"
