"""What the provider sends for structured output (read back from the fault server), and what it
makes of the answer: fences, JSON, schema, usage and cost."""

from __future__ import annotations

import pytest

from jobrouter.providers.base import CompletionRequest, Message
from jobrouter.providers.errors import ErrorKind, InvalidOutput, NotSent, ProviderError
from jobrouter.providers.structured import schema_instruction, strip_fence
from tests.providers.conftest import TRANSPORTS, MakeProvider
from tests.providers.fault_server import FaultServer

both = pytest.mark.parametrize("transport", TRANSPORTS)  # each test that calls a provider

SCHEMA = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
SYSTEM = Message(role="system", content="You write captions.")
USER = Message(role="user", content="Tea, warm.")
REQUEST = CompletionRequest(
    messages=(SYSTEM, USER), output_schema=SCHEMA, temperature=0, max_tokens=50
)


def sent_body(fault: FaultServer) -> dict[str, object]:
    body: dict[str, object] = fault.stats()["last_request"]["body"]
    return body


@both
async def test_json_schema_mode_sends_strict_json_schema(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    await make_provider(structured_output="json_schema").complete(REQUEST)
    body = sent_body(fault)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": SCHEMA, "strict": True},
    }
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM.content},
        {"role": "user", "content": USER.content},
    ]
    assert body["temperature"] == 0
    assert body["max_tokens"] == 50


@both
async def test_json_object_schema_mode_sends_what_llama_cpp_accepts(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    await make_provider(structured_output="json_object_schema").complete(REQUEST)
    assert sent_body(fault)["response_format"] == {"type": "json_object", "schema": SCHEMA}


@both
async def test_none_mode_puts_the_schema_in_the_system_message(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    await make_provider(structured_output="none").complete(REQUEST)
    body = sent_body(fault)
    assert "response_format" not in body
    assert body["messages"] == [
        {"role": "system", "content": f"{SYSTEM.content}\n\n{schema_instruction(SCHEMA)}"},
        {"role": "user", "content": USER.content},
    ]


@both
async def test_none_mode_without_system_role_uses_the_last_user_message(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """gemma's chat format drops system messages: the system text is folded into the first user
    turn (as Gemma's own template does) and the instruction goes last, where it is read."""
    await make_provider(structured_output="none", chat_format="gemma").complete(REQUEST)
    messages = sent_body(fault)["messages"]
    assert isinstance(messages, list)
    assert all(m["role"] != "system" for m in messages)
    assert messages[-1] == {
        "role": "user",
        "content": (f"{SYSTEM.content}\n\n{USER.content}\n\n{schema_instruction(SCHEMA)}"),
    }


@both
async def test_no_schema_sends_no_response_format_and_returns_text(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(content="plain words")
    request = CompletionRequest(messages=(USER,))
    completion = await make_provider().complete(request)
    assert "response_format" not in sent_body(fault)
    assert completion.text == "plain words"
    assert completion.output is None


@both
@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"text": "hi"}\n```',
        '```\n{"text": "hi"}\n```',
        '  {"text": "hi"}  ',
        '```json {"text": "hi"}```',
    ],
)
async def test_fenced_or_padded_json_is_parsed(
    content: str, fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(content=content)
    completion = await make_provider().complete(REQUEST)
    assert completion.output == {"text": "hi"}
    assert completion.text == content  # the raw answer is kept as received


def test_strip_fence_leaves_unfenced_text_alone() -> None:
    assert strip_fence('{"a": "```"}') == '{"a": "```"}'


@both
@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("", "<empty answer>"),
        ("not json", "not valid JSON"),
        ('{"text": 3}', "$.text: 3 is not of type 'string'"),
        ("[1, 2]", "is not of type 'object'"),
    ],
)
async def test_unusable_answers_are_rejected_with_the_reason(
    content: str, says: str, fault: FaultServer, make_provider: MakeProvider
) -> None:
    fault.control(content=content)
    with pytest.raises(ProviderError) as caught:
        await make_provider().complete(REQUEST)
    assert caught.value.kind is ErrorKind.REJECTED
    assert caught.value.status is None
    assert says in caught.value.message
    assert fault.stats()["total"] == 1  # an answer is final: no retry


@both
async def test_usage_comes_from_the_response(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    completion = await make_provider().complete(REQUEST)
    # the fault server counts a token per 4 characters of the messages it received
    assert completion.usage.prompt_tokens == (len(SYSTEM.content) + len(USER.content)) // 4
    assert completion.usage.completion_tokens == 7
    assert completion.model == "fault-model"


@both
async def test_cost_only_for_models_in_litellms_map(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """Both transports price from litellm's shipped map (docs/spend.md): a model missing from
    it has an unknown cost with the reason, a mapped one its tokens at the map's price."""
    unmapped = await make_provider(model="openai/fault-model").complete(REQUEST)
    assert unmapped.usage.cost_usd is None and unmapped.usage.cost_unknown is not None
    mapped = await make_provider(model="openai/gpt-4o-mini").complete(REQUEST)
    usage = mapped.usage
    assert usage.cost_source == "litellm_map" and usage.prompt_tokens is not None
    # gpt-4o-mini as litellm 1.110.2 ships it: $0.15 / $0.60 per million tokens
    assert usage.cost_usd == pytest.approx(usage.prompt_tokens * 0.15e-6 + 7 * 0.6e-6)


@both
async def test_closed_provider_refuses_and_a_new_one_works_on_the_same_loop(
    fault: FaultServer, transport: str
) -> None:
    """close() of the last open provider closes litellm's shared clients; litellm would then
    hand the next call a closed client (measured) unless the client cache is flushed too."""
    from jobrouter.providers.config import ProviderConfig
    from jobrouter.providers.transports import build_provider

    config = ProviderConfig(
        model="openai/fault-model", api_base=fault.api_base, transport=transport
    )
    first = build_provider("first", config)
    await first.complete(REQUEST)
    await first.close()
    with pytest.raises(NotSent, match="closed"):
        await first.complete(REQUEST)
    async with build_provider("second", config) as second:
        assert (await second.complete(REQUEST)).output == {"text": "ok"}
    assert fault.stats()["total"] == 2


@both
async def test_a_server_that_reports_no_usage_gives_no_prompt_count(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """litellm fills a missing `usage` with zeros; 0 is no count of a non-empty prompt. Passed
    on as a count, it made certification fail `rendering` ("N tokens fewer than meant") where
    the provider merely reported nothing (`unverified`, waivable), docs/certification.md."""
    fault.control(default={"kind": "answer", "usage": False})
    completion = await make_provider().complete(REQUEST)
    assert completion.usage.prompt_tokens is None
    assert completion.usage.completion_tokens is None
    fault.control(default={"kind": "answer", "usage": False, "content": "not json"})
    with pytest.raises(InvalidOutput) as caught:
        await make_provider().complete(REQUEST)
    assert caught.value.prompt_tokens is None


@both
async def test_no_usage_from_the_real_adapter_is_unverified_not_a_rendering_failure(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    from jobrouter.contracts import certify, contract_from_data

    contract = contract_from_data(
        {
            "name": "ok",
            "version": 1,
            "side_effects": "none",
            "prompt": {"system": "Answer with JSON only.", "user": "Say {{ word }}."},
            "output_schema": {
                "type": "object",
                "required": ["text"],
                "properties": {"text": {"type": "string"}},
            },
            "sampling": {"max_tokens": 20, "repeats": 1},
            "cases": [{"name": "ok", "input": {"word": "ok"}}],
        },
        file="ok.yaml",
    )
    fault.control(default={"kind": "answer", "usage": False})
    cert = await certify(make_provider(), contract)
    case = cert.cases[0]
    assert (case.verdict, case.failures) == ("unverified", ())
    assert case.rendering.reported_prompt_tokens == (None,)
    waiver = {"rendering": "reports no usage; accepted in this test"}
    assert (await certify(make_provider(), contract, accept_unverified=waiver)).passed


@both
async def test_an_extra_property_is_rejected_where_the_schema_closes_the_object(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """An answer with a key the schema does not allow is `rejected` by the adapter, before any
    contract check. Kills the mutant "schema check ignoring additionalProperties" in
    providers/structured.py (checked by dropping the keyword from the validated schema)."""
    closed = {**SCHEMA, "additionalProperties": False}
    request = REQUEST.model_copy(update={"output_schema": closed})
    fault.control(content='{"text": "Warm tea.", "note": "extra"}')
    with pytest.raises(ProviderError) as caught:
        await make_provider().complete(request)
    assert caught.value.kind is ErrorKind.REJECTED
    assert "('note' was unexpected)" in caught.value.message
    fault.control(content='{"text": "Warm tea."}')
    assert (await make_provider().complete(request)).output == {"text": "Warm tea."}


def test_a_schema_is_judged_by_its_content_whichever_object_carries_it() -> None:
    """The validator cache finds a schema by identity first: an equal schema in another object
    is judged the same, and a different schema is never judged by a cached one."""
    from jobrouter.providers.structured import parse_output

    first = {"type": "object", "required": ["text"]}
    assert parse_output('{"text": "a"}', first, provider="p") == {"text": "a"}
    equal = {"type": "object", "required": ["text"]}
    assert parse_output('{"text": "b"}', equal, provider="p") == {"text": "b"}
    other = {"type": "object", "required": ["title"]}
    with pytest.raises(InvalidOutput):
        parse_output('{"text": "a"}', other, provider="p")
    with pytest.raises(InvalidOutput):
        parse_output("{}", first, provider="p")


@both
async def test_a_closed_provider_proves_nothing_was_sent(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """A call on a closed provider sends nothing, so it is a `not_sent` ProviderError (free
    to fail over from, even on an exclusive task), neither retried nor held against the
    provider's health. Before it was a bare RuntimeError, which the attempt recorded as
    `unknown`: a job held for an operator though its request never left.
    Mutants: adapter.complete raising RuntimeError again; retryable=True;
    counts_against_health=True."""
    provider = make_provider()
    await provider.close()
    with pytest.raises(ProviderError) as refused:
        await provider.complete(REQUEST)
    error = refused.value
    assert (error.kind, error.retryable, error.counts_against_health) == (
        ErrorKind.NOT_SENT,
        False,
        False,
    )
    assert not error.may_have_acted
    assert fault.stats()["total"] == 0
