"""A provider that echoes the key it was sent: the key is found nowhere the router stores or
shows anything, and the job's owner is shown none of the provider's words at all (issue 14).

The real CLI serves (`jobrouter serve`, a subprocess) with the real litellm provider, on SQLite
and on PostgreSQL; the fault server (tests/providers/fault_server.py, `echo: true`) answers 401
and 500 echoing the `Authorization` header and the bare key in its body and headers, and a 200
whose text holds the key. The key has no known token shape, so only the registered VALUE can
catch it; a second, token-shaped credential the router never held (`hf_...`) is planted in the
401's message and headers and in the answer text to prove the pattern net. Then every table,
every log line, every SSE event, every webhook body and every HTTP answer (owner and operator)
is searched for both.

Raw provider detail is operator-only: what an OWNER's token reads (the job, its attempts, the
listing, the SSE stream, the console's job page), the webhook bodies and the event and outbox
rows hold no provider text at all, not even scrubbed; an operator's token reads the scrubbed
detail (`error_detail`, and the console shows it).

On the code before the scrubber, the key was in job.error, the attempts, the events, the
outbox row, the webhook body and the SSE stream (the test fails there). On the code before
`error_detail`, the owner read the provider's scrubbed message in all of those places.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import asyncpg
import httpx
import pytest

from jobrouter.providers.redact import REDACTED
from jobrouter.ui.session import COOKIE
from tests.acceptance.conftest import CONTRACT, ROOT
from tests.acceptance.e2e.test_cli_serve import CLI, free_port
from tests.providers.fault_server import start_fault_server
from tests.support.backends import empty_url as empty_url  # a fixture, used by name
from tests.support.webhook_receiver import WebhookReceiver

KEY = "jrtestkey-" + "7f3a9c2e1b8d4f60a5e7"  # no vendor's shape: only its registered value
FOREIGN = "hf_" + "Qw3rTy8uIo9pAs5dFg6hJk2lZx"  # a token the router never held
OWNER = "shop-1"
SETTLE_S = 60.0
# The provider's own words, as the fault server and the 200 answer put them: none may reach an
# owner, scrubbed or not (the scrubber's mark is a sign of scrubbed provider text too).
PROVIDER_WORDS = ("fault server says", "Incorrect API key", "You sent", "not json", REDACTED)

CONFIG = """
[database]
url = "{db}"

[certification]
required = false

[providers.echoing]
model = "openai/fault-model"
api_base = "{api_base}"
api_key_env = "JR_ECHO_TEST_KEY"
structured_output = "none"
retry = {{ attempts = 1 }}

[tasks.echo]
contract = "{contract}"
providers = ["echoing"]
max_attempts = 1

[webhooks.{owner}]
url = "{hook}"
secret_env = "JR_ECHO_HOOK_SECRET"

[outbox]
backoff_initial = 0.1
poll_interval = 0.1
"""


def _cli(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True, env=env
    )
    return done.stdout.strip()


def _serve(config: Path, port: int, log_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            [*CLI, "serve", "--config", str(config), "--port", str(port)],
            cwd=ROOT,
            stdout=log,
            stderr=log,
            env=env,
        )


async def _rows(url: str, sql: str) -> list[str]:
    """The rows of a query, each as text."""
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///")
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return [str(row) for row in db.execute(sql)]
    conn = await asyncpg.connect(url)
    try:
        return [str(tuple(row)) for row in await conn.fetch(sql)]
    finally:
        await conn.close()


async def _table_text(url: str) -> str:
    """Every row of every table (the whole database's content)."""
    if url.startswith("sqlite"):
        tables = "SELECT name FROM sqlite_master WHERE type = 'table'"
    else:
        tables = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
    names = [row.strip("(),'") for row in await _rows(url, tables)]
    assert {"jobs", "attempts", "job_events", "outbox"} <= set(names)
    return "\n".join([text for name in names for text in await _rows(url, f"SELECT * FROM {name}")])


async def _ready(url: str) -> None:
    async with httpx.AsyncClient() as client, asyncio.timeout(60):
        while True:
            try:
                if (await client.get(f"{url}/health/ready")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)


async def _read_job(
    client: httpx.AsyncClient, url: str, token: str, job_id: str, key: str
) -> list[str]:
    """Follow the SSE stream to its end, read everything about the job: the texts."""
    auth = {"Authorization": f"Bearer {token}"}
    async with client.stream("GET", f"{url}/v1/jobs/{job_id}/events", headers=auth) as stream:
        texts = ["".join([chunk async for chunk in stream.aiter_text()])]
    for path in (
        f"/v1/jobs/{job_id}",
        f"/v1/jobs/{job_id}/attempts",
        f"/v1/jobs?idempotency_key={key}",
    ):
        texts.append((await client.get(url + path, headers=auth)).text)
    client.cookies.set(COOKIE, token)  # the console's session: the token itself
    page = await client.get(f"{url}/ui/jobs/{job_id}")
    client.cookies.clear()
    assert page.status_code == 200 and job_id in page.text
    return [*texts, page.text]


async def _submit_and_read(url: str, owner: str, operator: str) -> dict[str, list[str]]:
    """Three jobs, one after the other (the provider answers in sequence), each read whole
    with the owner's token and with the operator's: what each was shown."""
    seen: dict[str, list[str]] = {"owner": [], "operator": []}
    async with httpx.AsyncClient(timeout=SETTLE_S) as client:
        for key in ("k-401", "k-500", "k-200"):
            submitted = await client.post(
                f"{url}/v1/jobs",
                json={"task": "echo", "input": {"text": key}},
                headers={"Authorization": f"Bearer {owner}", "Idempotency-Key": key},
            )
            seen["owner"].append(submitted.text)
            job_id = submitted.json()["id"]
            for who, token in (("owner", owner), ("operator", operator)):
                seen[who] += await _read_job(client, url, token, job_id, key)
    return seen


@pytest.mark.timeout(240)
async def test_an_echoed_key_is_stored_shown_sent_and_logged_nowhere(
    tmp_path: Path, empty_url: str
) -> None:
    env = {**os.environ, "JR_ECHO_TEST_KEY": KEY, "JR_ECHO_HOOK_SECRET": "hook-secret-1"}
    receiver = WebhookReceiver()
    with start_fault_server() as fault:
        async with receiver.running():
            config = tmp_path / "jobrouter.toml"
            config.write_text(
                CONFIG.format(
                    db=empty_url,
                    api_base=fault.api_base,
                    contract=CONTRACT,
                    owner=OWNER,
                    hook=receiver.url,
                )
            )
            owner_token = _cli("token", "create", OWNER, "--config", str(config), env=env)
            operator = _cli(
                "token", "create", "ops", "--operator", "--config", str(config), env=env
            )
            fault.reset(
                sequence=[
                    {
                        "kind": "status",
                        "status": 401,
                        "echo": True,
                        "say": f"your token {FOREIGN} is not ours",
                    },
                    {"kind": "status", "status": 500, "echo": True},
                    {"kind": "answer", "content": f"not json: {KEY} and {FOREIGN}"},
                ]
            )
            port = free_port()
            log_path = tmp_path / "serve.log"
            server = _serve(config, port, log_path, env)
            url = f"http://127.0.0.1:{port}"
            try:
                await _ready(url)
                seen = await _submit_and_read(url, owner_token, operator)
                bodies = await receiver.wait_for(3, within=SETTLE_S)
            finally:
                server.send_signal(signal.SIGINT)
                server.wait(timeout=30)
            echoed = fault.stats()["requests"]
    # the provider really was sent the key, and really echoed it
    assert any(KEY in str(request["headers"]) for request in echoed)
    logged = await _rows(empty_url, "SELECT data FROM job_events")
    logged += await _rows(empty_url, "SELECT payload FROM outbox")
    places = {
        "database": await _table_text(empty_url),
        "server log": log_path.read_text(errors="replace"),
        "webhook bodies": "\n".join(b.body.decode() for b in bodies),
        "owner's HTTP answers and SSE": "\n".join(seen["owner"]),
        "operator's HTTP answers and SSE": "\n".join(seen["operator"]),
    }
    for where, text in places.items():
        assert KEY not in text, f"the configured key leaked into the {where}"
        assert FOREIGN not in text, f"a token-shaped credential leaked into the {where}"
    owner_sees = {
        where: places[where] for where in ("owner's HTTP answers and SSE", "webhook bodies")
    }
    owner_sees["event and outbox rows"] = "\n".join(logged)
    assert len(logged) >= 9 and len(bodies) == 3
    for where, text in owner_sees.items():
        for words in PROVIDER_WORDS:
            assert words not in text, f"the provider's words ({words!r}) reached the {where}"
    # the owner is still told what happened, in our words; the operator also reads the
    # provider's (scrubbed) words, its message and its unusable answer
    assert "refused the request (HTTP 401)" in owner_sees["owner's HTTP answers and SSE"]
    assert "(HTTP 500)" in owner_sees["webhook bodies"]
    operator_sees = places["operator's HTTP answers and SSE"]
    for words in ("fault server says 401", "fault server says 500", "not json", REDACTED):
        assert words in operator_sees, f"the operator was not shown {words!r}"
    assert "Detail (operators only)" in operator_sees  # the console's job page too
