"""A router in the test's process for HTTP tests: one task, `echo`
(tests/acceptance/contracts/echo.yaml), on the offline `fast` provider of
tests/acceptance/serve_fixture.py, certification not required, and no workers (a submitted job
stays queued unless the test moves it). The `router` fixture opens it on the test's `db_url`
(import that fixture too, e.g. from tests/support/backends.py, or define it)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from jobrouter import Router
from jobrouter.config import CertificationConfig, RouterConfig, TaskConfig
from tests.acceptance.conftest import CONTRACT
from tests.acceptance.serve_fixture import PROVIDERS


@contextlib.asynccontextmanager
async def echo_router(db_url: str) -> AsyncIterator[Router]:
    config = RouterConfig(
        tasks={"echo": TaskConfig(contract=str(CONTRACT), providers=["fast"])},
        certification=CertificationConfig(required=False),
    )
    async with Router.open(db_url, config, providers=PROVIDERS, run_workers=False) as opened:
        yield opened


@pytest.fixture
async def router(db_url: str) -> AsyncIterator[Router]:
    async with echo_router(db_url) as opened:
        yield opened


async def submit_echo(
    client: httpx.AsyncClient, headers: dict[str, str], key: str, text: str = "hi"
) -> dict[str, Any]:
    """POST an echo job under `key` (`headers` carry the token); the 202's body."""
    answer = await client.post(
        "/v1/jobs",
        json={"task": "echo", "input": {"text": text}},
        headers={**headers, "Idempotency-Key": key},
    )
    assert answer.status_code == 202, answer.text
    body: dict[str, Any] = answer.json()
    return body
