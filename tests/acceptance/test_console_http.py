"""The console and the listing attacked over plain HTTP (no browser): what a hostile or careless
client can send to the real server process, and what it must never get back."""

from __future__ import annotations

import httpx
import pytest

from router.ui.session import COOKIE
from tests.acceptance.conftest import Server


@pytest.fixture(scope="module")
def erin(server: Server) -> str:
    return server.token("erin")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("target", [
    "/v1/jobs?task=%00", "/v1/jobs?owner=erin%00", "/v1/jobs?provider=a%00b",
    "/v1/jobs?idempotency_key=%00", "/v1/jobs/counts?task=%00", "/v1/jobs/%00",
    "/v1/jobs/a%00/attempts", "/ui/jobs?task=%00", "/ui/jobs/rows?owner=%00", "/ui/jobs/%00",
    "/ui/jobs/%00/live",
])  # fmt: skip
async def test_a_nul_character_in_the_path_or_query_is_a_422_on_every_backend(
    server: Server, erin: str, target: str
) -> None:
    """PostgreSQL refuses NUL in text (a 500 that the same request on SQLite never gives):
    refused at the edge, for both backends alike."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10, headers=bearer(erin),
                                 cookies={COOKIE: erin}) as http:  # fmt: skip
        answer = await http.get(target)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
