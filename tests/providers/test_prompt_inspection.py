"""Chat-format rendering (exactly llama-cpp-python's), and inspect_prompt for llama.cpp servers
(the fault server's fake /extras/tokenize) and hosted models (litellm, offline)."""

from __future__ import annotations

import pytest

from jobrouter.providers.base import InspectableProvider, Message, Provider
from jobrouter.providers.chat_formats import fold_system, render
from tests.providers.conftest import TRANSPORTS, MakeProvider
from tests.providers.fault_server import DEFAULT_SPECIALS, FaultServer

both = pytest.mark.parametrize("transport", TRANSPORTS)  # inspection is shared code


def msgs(*pairs: tuple[str, str]) -> tuple[Message, ...]:
    return tuple(Message(role=role, content=content) for role, content in pairs)  # type: ignore[arg-type]


CONVERSATION = msgs(("system", "S"), ("user", "U1"), ("assistant", "A1"), ("user", "U2"))

# Expected texts checked against llama-cpp-python 0.3.36's format_gemma / format_chatml /
# format_llama2 (and pinned against the installed package by test_live_formats.py).
RENDERINGS = [
    (
        "gemma",
        CONVERSATION,
        "<start_of_turn>user\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n"
        "<start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n",
    ),
    (
        "gemma",
        msgs(("user", ""), ("user", "U")),
        "<start_of_turn>user\n<start_of_turn>user\nU<end_of_turn>\n<start_of_turn>model\n",
    ),
    (
        "chatml",
        CONVERSATION,
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
        "<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n"
        "<|im_start|>assistant\n",
    ),
    (
        "chatml",
        msgs(("user", "U")),
        "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n",
    ),
    (
        "chatml",
        msgs(("system", "S1"), ("system", "S2"), ("user", "U")),
        "<|im_start|>system\nS1<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n",
    ),
    ("llama-2", CONVERSATION, "[INST] <<SYS>>\nS\n<</SYS>> U1 [/INST]A1 </s><s>[INST]U2  [/INST]"),
    ("llama-2", msgs(("user", "U")), " <s>[INST]U  [/INST]"),
    (
        "llama-2",
        msgs(("system", "S1"), ("system", "S2"), ("user", "U")),
        "[INST] <<SYS>>\nS1\n<</SYS>> U [/INST]",
    ),
]


@pytest.mark.parametrize(("chat_format", "messages", "expected"), RENDERINGS)
def test_rendering_matches_llama_cpp_python(
    chat_format: str, messages: tuple[Message, ...], expected: str
) -> None:
    rendered = render(chat_format, messages)
    assert rendered is not None
    assert rendered.text == expected


def test_gemma_drops_system_and_chatml_keeps_only_the_first() -> None:
    gemma = render("gemma", CONVERSATION)
    chatml = render("chatml", msgs(("system", "S1"), ("system", "S2"), ("user", "U")))
    assert gemma is not None and chatml is not None
    assert (gemma.system_present, [m.content for m in gemma.dropped]) == (False, ["S"])
    assert (chatml.system_present, [m.content for m in chatml.dropped]) == (False, ["S2"])
    assert render("chatml", CONVERSATION).system_present is True  # type: ignore[union-attr]
    assert render("llama-2", CONVERSATION).system_present is True  # type: ignore[union-attr]
    assert render("mistral-instruct", CONVERSATION) is None


def fake_token_count(text: str, specials: tuple[str, ...] = DEFAULT_SPECIALS) -> int:
    """The fault server's fake tokenizer: BOS + one per special marker + one per UTF-8 byte."""
    count, i = 1, 0
    while i < len(text):
        special = next((s for s in specials if text.startswith(s, i)), None)
        count += 1 if special else len(text[i].encode())
        i += len(special) if special else 1
    return count


@both
async def test_llama_gemma_inspection(fault: FaultServer, make_provider: MakeProvider) -> None:
    provider = make_provider(
        model="openai/gemma-3-270m",
        chat_format="gemma",
        structured_output="json_object_schema",
        context_window=32768,
    )
    assert isinstance(provider, InspectableProvider) and isinstance(provider, Provider)
    inspection = await provider.inspect_prompt(CONVERSATION)
    # llama.cpp's gemma format drops system messages; the adapter folds them into the first
    # user turn (as Gemma's own template does), and the inspection shows what is really sent.
    folded = render("gemma", fold_system("gemma", CONVERSATION))
    assert folded is not None and folded.text != RENDERINGS[0][2]
    expected = folded.text
    assert inspection.rendered == expected
    assert inspection.accepted_roles == frozenset({"system", "user", "assistant"})
    system_texts = [m.content for m in CONVERSATION if m.role == "system"]
    assert system_texts and all(text in expected for text in system_texts)
    assert inspection.system_rendered is True and inspection.markers_measured
    assert any("folds the system text" in note for note in inspection.notes)
    assert inspection.prompt_tokens == fake_token_count(expected)
    assert inspection.tokenizer == "llama.cpp /extras/tokenize"
    assert inspection.context_window == 32768
    assert inspection.control_tokens_special is True
    body = fault.stats()
    # tokenize: the prompt, the prompt without its system text, the empty string, two markers;
    # detokenize: each marker that is one token (is it a control token?)
    assert body["tokenize_calls"] == 7
    assert inspection.count_basis == "exact"
    without = render("gemma", msgs(("user", "U1"), ("assistant", "A1"), ("user", "U2")))
    assert without is not None
    assert inspection.prompt_tokens_without_system == fake_token_count(without.text)
    assert [(m.marker, m.token_ids, m.special) for m in inspection.markers] == [
        ("<start_of_turn>", (100,), True),
        ("<end_of_turn>", (101,), True),
    ]
    assert body["total"] == 0  # inspecting generates nothing


@both
async def test_markers_that_split_are_not_special(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """chatml markers on a model whose vocabulary lacks them (as gemma's does) split up."""
    fault.control(tokenizer_specials=["<start_of_turn>", "<end_of_turn>"])
    provider = make_provider(chat_format="chatml")
    inspection = await provider.inspect_prompt(CONVERSATION)
    assert inspection.control_tokens_special is False
    assert inspection.system_rendered is True
    assert inspection.accepted_roles == frozenset({"system", "user", "assistant"})
    assert inspection.prompt_tokens == fake_token_count(
        inspection.rendered or "", ("<start_of_turn>", "<end_of_turn>")
    )


@both
async def test_unreproduced_chat_format_says_so(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    inspection = await make_provider(chat_format="mistral-instruct").inspect_prompt(CONVERSATION)
    assert inspection.rendered is None
    assert (inspection.system_rendered, inspection.markers_measured) == (None, False)
    assert inspection.control_tokens_special is None
    assert inspection.count_basis == "lower_bound"
    assert len(inspection.unverified) == 1 and "not reproduced" in inspection.unverified[0]


@both
async def test_llama2_markers_are_split_into_plain_tokens_with_their_ids(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """The issue's server: no chat template, llama-2 fallback, a Gemma vocabulary. Before,
    llama-2 was not reproduced, the markers check was None, and certification passed it."""
    fault.control(
        tokenizer_specials=["<start_of_turn>", "<end_of_turn>"], tokenizer_ordinary=["<s>"]
    )
    inspection = await make_provider(chat_format="llama-2").inspect_prompt(CONVERSATION)
    assert inspection.rendered == RENDERINGS[5][2]
    assert inspection.system_rendered is True
    assert inspection.control_tokens_special is False
    markers = {m.marker: m for m in inspection.markers}
    assert markers["[INST]"].token_ids == tuple(1000 + b for b in b"[INST]")
    assert not markers["[INST]"].special
    # ONE token, but an ordinary one: it detokenizes to itself, not to ""
    assert (markers["<s>"].token_ids, markers["<s>"].special) == ((500,), False)
    # every character a token, but "<s>" one (as a one-byte stand-in counts)
    assert inspection.prompt_tokens == fake_token_count(RENDERINGS[5][2].replace("<s>", "\0"), ())


async def test_hosted_inspection_is_offline(make_provider: MakeProvider) -> None:
    mapped = await make_provider(model="openai/gpt-4o-mini", api_base=None).inspect_prompt(
        CONVERSATION
    )
    assert mapped.rendered is None
    assert (mapped.system_rendered, mapped.markers_measured) == (None, False)
    assert mapped.accepted_roles == frozenset({"system", "user", "assistant"})
    assert 5 < mapped.prompt_tokens < 40
    assert mapped.count_basis == "estimate"
    assert mapped.prompt_tokens_without_system is not None
    assert mapped.prompt_tokens_without_system < mapped.prompt_tokens
    assert mapped.context_window == 128000  # litellm's bundled model map
    assert mapped.tokenizer.startswith("litellm token_counter")
    unmapped = await make_provider(model="openai/some-local-model").inspect_prompt(CONVERSATION)
    assert unmapped.context_window is None
    configured = await make_provider(
        model="openai/some-local-model", context_window=4096
    ).inspect_prompt(CONVERSATION)
    assert configured.context_window == 4096
