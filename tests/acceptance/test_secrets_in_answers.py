"""A schema-valid answer that quotes the configured key: the owner gets the answer with the key
scrubbed, on every surface (issue 31 item 3; before, scrubbing ran on errors only).

The real CLI serves (`jobrouter serve`, a subprocess) with the real litellm provider; the fault
server answers 200 with the JSON `{"text": ...}` the echo contract asks for, its text holding
the key bare and as `Authorization: Bearer <key>`, and a token-shaped credential the router
never held (`hf_...`). The key has no vendor's shape, so only its registered VALUE can catch it.
Then every place an owner (or anyone) reads is searched: the owner's and the operator's HTTP
answers (job, attempts, listing), the SSE stream, the console's job page, the webhook body (a
real receiving server), the NATS messages (`[delivery] nats_url`, a core subscriber on the
subject), `jobrouter show --events --json`, `Router.get` / `attempts` / `events`, every row of
the database (events and outbox rows included) and the server's log.

The rule for token shapes in an answer is pinned too: the `hf_` token stays in the owner's
result (docs/operations.md, "Secrets in provider answers").

Mutant: `scrub_output` removed from `AttemptCall._succeed` - seen failing (the key in the
result, the webhook body, the outbox row...).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import nats
import pytest

from jobrouter import Router
from jobrouter.providers.redact import REDACTED
from tests.acceptance.conftest import CONTRACT
from tests.acceptance.e2e.test_cli_serve import free_port
from tests.acceptance.test_secrets import _cli, _read_job, _ready, _serve, _table_text
from tests.providers.fault_server import start_fault_server
from tests.store.pg import fresh_database
from tests.support.backends import sqlite_url
from tests.support.fakes import FakeProvider
from tests.support.nats_bus import NATS_URL, own_stream
from tests.support.waiting import until
from tests.support.webhook_receiver import WebhookReceiver

KEY = "jrtestkey-" + "3d9b7e1f5a2c8046e1b3"  # no vendor's shape: only its registered value
FOREIGN = "hf_" + "Mn4bV5cX6zL7kJ8hG9fD0sAq"  # token-shaped, never configured
OWNER = "shop-1"
SETTLE_S = 60.0
ANSWER = f"use {KEY}; send Authorization: Bearer {KEY}; a sample token: {FOREIGN}"
SCRUBBED = f"use {REDACTED}; send Authorization: Bearer {REDACTED}; a sample token: {FOREIGN}"

CONFIG = """
[database]
url = "{db}"

[certification]
required = false

[providers.quoting]
model = "openai/fault-model"
api_base = "{api_base}"
api_key_env = "JR_QUOTE_TEST_KEY"
structured_output = "none"
retry = {{ attempts = 1 }}

[tasks.echo]
contract = "{contract}"
providers = ["quoting"]
max_attempts = 1

[webhooks.{owner}]
url = "{hook}"
secret_env = "JR_QUOTE_HOOK_SECRET"

[outbox]
backoff_initial = 0.1
poll_interval = 0.1
"""

NATS_CONFIG = """
[delivery]
nats_url = "{url}"
stream = "{stream}"
subject = "{subject}"
consumer = "{consumer}"
"""

WHERE = [
    pytest.param(("sqlite", "database"), id="sqlite"),
    pytest.param(("postgres", "database"), id="postgres", marks=pytest.mark.postgres),
    pytest.param(("sqlite", "nats"), id="sqlite-nats", marks=pytest.mark.nats),
]


class Nats:
    """A core subscriber on the delivery subject: every message the relay publishes."""

    def __init__(self, subject: str) -> None:
        self.subject = subject
        self.messages: list[str] = []

    async def start(self, stack: AsyncExitStack) -> None:
        nc = await nats.connect(NATS_URL)
        stack.push_async_callback(nc.close)

        async def keep(msg: nats.aio.msg.Msg) -> None:
            self.messages.append(msg.data.decode())

        await nc.subscribe(self.subject, cb=keep)
        await nc.flush()


@dataclass(frozen=True)
class Where:
    db: str  # the database's URL
    delivery: str = ""  # the [delivery] block: empty for the database's own delivery
    subject: str | None = None  # the NATS subject events are published on


@pytest.fixture(params=WHERE)
async def where(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Where]:
    backend, delivery = request.param
    async with AsyncExitStack() as stack:
        url = sqlite_url(tmp_path)
        if backend == "postgres":
            url = await stack.enter_async_context(fresh_database())
        if delivery == "database":
            yield Where(url)
            return
        bus = await stack.enter_async_context(own_stream("jrquote"))
        block = NATS_CONFIG.format(
            url=bus.url, stream=bus.stream, subject=bus.subject, consumer=bus.consumer
        )
        yield Where(url, block, bus.subject)


async def _python_api(config: Path, job_id: str) -> str:
    """What `Router.get`, `attempts` and `events` return, as text (no workers run)."""
    fake = {"quoting": FakeProvider("quoting")}  # never called: no workers, no litellm
    async with Router.open(None, config, providers=fake, run_workers=False) as router:
        job = await router.get(job_id)
        attempts = await router.attempts(job_id)
        events = await router.events(job_id)
    return "\n".join(map(repr, [job, *attempts, *events]))


@pytest.mark.timeout(240)
async def test_a_key_quoted_in_a_valid_answer_reaches_no_owner(
    tmp_path: Path, where: Where
) -> None:
    db = where.db
    env = {**os.environ, "JR_QUOTE_TEST_KEY": KEY, "JR_QUOTE_HOOK_SECRET": "hook-secret-2"}
    receiver = WebhookReceiver()
    subscriber = None if where.subject is None else Nats(where.subject)
    with start_fault_server() as fault:
        async with receiver.running(), AsyncExitStack() as stack:
            config = tmp_path / "jobrouter.toml"
            text = CONFIG.format(
                db=db, api_base=fault.api_base, contract=CONTRACT, owner=OWNER, hook=receiver.url
            )
            config.write_text(text + where.delivery)
            owner = _cli("token", "create", OWNER, "--config", str(config), env=env)
            operator = _cli(
                "token", "create", "ops", "--operator", "--config", str(config), env=env
            )
            if subscriber is not None:
                await subscriber.start(stack)
            fault.reset(sequence=[{"kind": "answer", "content": json.dumps({"text": ANSWER})}])
            port = free_port()
            log_path = tmp_path / "serve.log"
            server = _serve(config, port, log_path, env)
            url = f"http://127.0.0.1:{port}"
            try:
                await _ready(url)
                seen = await _submit_and_read(url, owner, operator)
                bodies = await receiver.wait_for(1, within=SETTLE_S)
                if subscriber is not None:
                    published = subscriber.messages
                    await until(lambda: published, "a NATS message", SETTLE_S)
            finally:
                server.send_signal(signal.SIGINT)
                server.wait(timeout=30)
            echoed = fault.stats()["requests"]
            job_id = bodies[0].json["data"]["job_id"]
            shown = _cli("show", job_id, "--events", "--json", "--config", str(config), env=env)
    assert any(KEY in str(request["headers"]) for request in echoed)  # the key was sent
    owner_sees = {
        "owner's HTTP answers, SSE and console page": "\n".join(seen["owner"]),
        "webhook body": "\n".join(b.body.decode() for b in bodies),
    }
    if subscriber is not None:
        owner_sees["NATS messages"] = "\n".join(subscriber.messages)
    places = {
        **owner_sees,
        "operator's HTTP answers, SSE and console page": "\n".join(seen["operator"]),
        "jobrouter show": shown,
        "Router.get, attempts and events": await _python_api(config, job_id),
        "database (events and outbox rows included)": await _table_text(db),
        "server log": log_path.read_text(errors="replace"),
    }
    for place, text in places.items():
        assert KEY not in text, f"the configured key reached the {place}"
    for place, text in owner_sees.items():  # the answer itself arrived, scrubbed
        assert SCRUBBED in text, f"the scrubbed answer is not in the {place}"
    assert bodies[0].json["data"]["result"] == {"text": SCRUBBED}


async def _submit_and_read(url: str, owner: str, operator: str) -> dict[str, list[str]]:
    """One job, settled, read whole with the owner's token and with the operator's."""
    seen: dict[str, list[str]] = {"owner": [], "operator": []}
    async with httpx.AsyncClient(timeout=SETTLE_S) as client:
        submitted = await client.post(
            f"{url}/v1/jobs",
            json={"task": "echo", "input": {"text": "quote"}},
            headers={"Authorization": f"Bearer {owner}", "Idempotency-Key": "k-quote"},
        )
        seen["owner"].append(submitted.text)
        job_id = submitted.json()["id"]
        for who, token in (("owner", owner), ("operator", operator)):
            seen[who] += await _read_job(client, url, token, job_id, "k-quote")
    return seen
