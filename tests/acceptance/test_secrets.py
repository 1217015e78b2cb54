"""A provider that echoes the key it was sent: the key is found nowhere the router stores or
shows anything (issue 14).

The real CLI serves (`jobrouter serve`, a subprocess) with the real litellm provider; the fault
server (tests/providers/fault_server.py, `echo: true`) answers 401 and 500 echoing the
`Authorization` header and the bare key in its body and headers, and a 200 whose text holds the
key. The key has no known token shape, so only the registered VALUE can catch it; a second,
token-shaped credential the router never held (`hf_...`) is planted in the answer text to
prove the pattern net. Then every table, every log line, every SSE event, every webhook body
and every HTTP answer (owner and operator) is searched for both.

On the code before the scrubber, the key was in job.error, the attempts, the events, the
outbox row, the webhook body and the SSE stream (the test fails there).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.acceptance.conftest import CONTRACT, ROOT
from tests.acceptance.test_cli_serve import CLI, free_port
from tests.providers.fault_server import start_fault_server
from tests.support.webhook_receiver import WebhookReceiver

KEY = "jrtestkey-" + "7f3a9c2e1b8d4f60a5e7"  # no vendor's shape: only its registered value
FOREIGN = "hf_" + "Qw3rTy8uIo9pAs5dFg6hJk2lZx"  # a token the router never held
OWNER = "shop-1"
SETTLE_S = 60.0

CONFIG = """
[database]
url = "sqlite:///{db}"

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
    done = subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True, env=env)  # fmt: skip
    return done.stdout.strip()


def _serve(config: Path, port: int, log_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen([*CLI, "serve", "--config", str(config), "--port", str(port)],
                                cwd=ROOT, stdout=log, stderr=log, env=env)


def _table_text(db: Path) -> str:
    """Every row of every table, as SQL text (the whole database's content)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return "\n".join(conn.iterdump())


async def _ready(url: str) -> None:
    async with httpx.AsyncClient() as client, asyncio.timeout(60):
        while True:
            try:
                if (await client.get(f"{url}/health/ready")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)


async def _read_job(client: httpx.AsyncClient, url: str, token: str, job_id: str,
                    key: str) -> list[str]:
    """Follow the SSE stream to its end, read everything about the job: the texts."""
    auth = {"Authorization": f"Bearer {token}"}
    async with client.stream("GET", f"{url}/v1/jobs/{job_id}/events", headers=auth) as stream:
        texts = ["".join([chunk async for chunk in stream.aiter_text()])]
    for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/attempts",
                 f"/v1/jobs?idempotency_key={key}"):
        texts.append((await client.get(url + path, headers=auth)).text)
    return texts


@pytest.mark.timeout(180)
async def test_an_echoed_key_is_stored_shown_sent_and_logged_nowhere(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    env = {**os.environ, "JR_ECHO_TEST_KEY": KEY, "JR_ECHO_HOOK_SECRET": "hook-secret-1"}
    receiver = WebhookReceiver()
    with start_fault_server() as fault:
        async with receiver.running():
            config = tmp_path / "jobrouter.toml"
            config.write_text(CONFIG.format(db=db, api_base=fault.api_base, contract=CONTRACT,
                                            owner=OWNER, hook=receiver.url))  # fmt: skip
            owner_token = _cli("token", "create", OWNER, "--config", str(config), env=env)
            operator = _cli("token", "create", "ops", "--operator", "--config", str(config),
                            env=env)  # fmt: skip
            fault.reset(sequence=[{"kind": "status", "status": 401, "echo": True},
                                  {"kind": "status", "status": 500, "echo": True},
                                  {"kind": "answer",
                                   "content": f"not json: {KEY} and {FOREIGN}"}])  # fmt: skip
            port = free_port()
            log_path = tmp_path / "serve.log"
            server = _serve(config, port, log_path, env)
            url = f"http://127.0.0.1:{port}"
            try:
                await _ready(url)
                texts: list[str] = []
                async with httpx.AsyncClient(timeout=SETTLE_S) as client:
                    for key in ("k-401", "k-500", "k-200"):  # one after the other: in sequence
                        submitted = await client.post(
                            f"{url}/v1/jobs", json={"task": "echo", "input": {"text": key}},
                            headers={"Authorization": f"Bearer {owner_token}",
                                     "Idempotency-Key": key})  # fmt: skip
                        texts.append(submitted.text)
                        job_id = submitted.json()["id"]
                        for token in (owner_token, operator):
                            texts += await _read_job(client, url, token, job_id, key)
                    bodies = await receiver.wait_for(3, within=SETTLE_S)
            finally:
                server.send_signal(signal.SIGINT)
                server.wait(timeout=30)
            echoed = fault.stats()["requests"]
    # the provider really was sent the key, and really echoed it
    assert any(KEY in str(request["headers"]) for request in echoed)
    places = {
        "database": _table_text(db),
        "server log": log_path.read_text(errors="replace"),
        "webhook bodies": "\n".join(b.body.decode() for b in bodies),
        "HTTP answers and SSE": "\n".join(texts),
    }
    assert "401" in places["HTTP answers and SSE"]  # the errors themselves are still shown
    for where, text in places.items():
        assert KEY not in text, f"the configured key leaked into the {where}"
        assert FOREIGN not in text, f"a token-shaped credential leaked into the {where}"
