"""Issue 27 against the real llama.cpp server (marked `live`: `pytest -m live tests/providers`
after installing the [local] extra). A provider certified on a server running the `gemma` chat
format; the server restarted with `chatml` under the same provider config (same fingerprint:
nothing the router can see changed). Every answer still parses and fits the schema, so only the
server's own prompt counts tell; the router's live watch suspends the provider from them alone,
by the rendering rule, within `rendering_run` answers."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jobrouter import Router
from jobrouter.certifier import certify_pair, pairs_to_certify
from jobrouter.config import (
    CertificationConfig,
    DatabaseConfig,
    EngineConfig,
    RouterConfig,
    TaskConfig,
    WatchConfig,
)
from jobrouter.providers.config import ProviderConfig
from jobrouter.providers.local import start_local_server, stop_local_server
from jobrouter.states import JobState

pytestmark = [pytest.mark.live, pytest.mark.timeout(1800)]  # CPU generation on 2 cores

CONTRACT = """\
name: greet
version: 1
side_effects: none
prompt:
  system: >-
    You greet customers of a small tea shop.
    Answer with JSON only: {"text": "a greeting of a few words"}.
  user: "The customer's name: {{ name }}"
output_schema:
  type: object
  required: [text]
  properties: {text: {type: string}}
sampling: {temperature: 0, max_tokens: 96, repeats: 1}
cases:
  - name: ann
    input: {name: Ann}
  - name: bob
    input: {name: Bob Smith}
"""
NAMES = ("Carla", "Dev Patel", "Eve", "Farid Haddad", "Gus", "Hana Sato", "Ivo", "Jun Park")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
async def port(tmp_path: Path) -> AsyncIterator[int]:
    chosen = free_port()
    try:
        yield chosen
    finally:
        await stop_local_server(chosen, tmp_path)


def config(tmp_path: Path, port: int) -> RouterConfig:
    contract = tmp_path / "greet.yaml"
    contract.write_text(CONTRACT)
    local = ProviderConfig(
        model="openai/gemma-3-270m",
        api_base=f"http://127.0.0.1:{port}/v1",
        chat_format="gemma",
        structured_output="json_object_schema",
        context_window=2048,
        timeout={"read": 600},
        retry={"attempts": 1},
    )
    return RouterConfig(
        database=DatabaseConfig(url=f"sqlite:///{tmp_path / 'jobs.db'}"),
        providers={"local": local},
        tasks={"greet": TaskConfig(contract=str(contract), providers=["local"])},
        engine=EngineConfig(poll_interval=0.05, sweep_interval=0.5),
        certification=CertificationConfig(watch=WatchConfig(interval=0.1)),
    )


async def test_a_server_restarted_with_another_chat_format_is_suspended_from_live_traffic(
    tmp_path: Path, port: int
) -> None:
    cfg = config(tmp_path, port)
    log = tmp_path / "llama.log"
    await start_local_server(chat_format="gemma", port=port, log_file=log, state_dir=tmp_path)
    async with Router.open(config=cfg, run_workers=False) as router:
        [pair] = pairs_to_certify(cfg, router.tasks)
        cert = await certify_pair(
            router.store.certifications, router.providers["local"], pair, ttl_days=1
        )
    assert cert.passed, cert.first_failure
    await stop_local_server(port, tmp_path)
    await start_local_server(chat_format="chatml", port=port, log_file=log, state_dir=tmp_path)

    async with Router.open(config=cfg) as router:
        suspension = None
        answered = 0
        while suspension is None:
            assert answered < len(NAMES), "never suspended"
            name = NAMES[answered]
            job = await router.submit("shop", f"k{answered}", "greet", {"name": name})
            job = await router.wait(job.id, timeout=900)
            assert job.state is JobState.SUCCEEDED, job.error  # every answer holds the schema
            answered += 1
            found = await router.store.certifications.list_suspensions()
            suspension = found.get(("local", "greet"))
        watch = (await router.store.live_watch.watches())[("local", "greet")]
    assert suspension.rule == "rendering", suspension
    assert suspension.answered <= cfg.certification.watch.rendering_run, suspension
    assert watch.rendering_off == watch.rendering_checked == watch.answered
