"""How a provider really receives a prompt: roles, rendered text, token count, context window.

For a llama.cpp server (`chat_format` set) the prompt is rendered exactly as llama-cpp-python
renders it (`jobrouter.providers.chat_formats`) and counted by the server's own tokenizer:
``POST {api_base without /v1}/extras/tokenize`` with ``{"input": text, "model": alias}`` answers
``{"tokens": [...]}``. The server tokenizes there with BOS added and special tokens parsed, the
same call its chat handler makes on the rendered prompt, so the count is the model's own
(``count_basis="exact"``).

A control marker (``<start_of_turn>``) is a special token of the model when it tokenizes to BOS
plus exactly ONE id AND that id detokenizes (``POST /extras/detokenize``, which skips control
tokens) to the empty string. Both halves matter: ``<|im_start|>`` splits into six pieces on
Gemma, and ``<s>`` is one token there but an ordinary one (Gemma's vocabulary has HTML tags).
The ids of every marker are kept as evidence.

A chat format that `jobrouter.providers.chat_formats` does not reproduce cannot be shown: the count
is of the bare message texts (``lower_bound``: a template only adds), and `unverified` says that the
system text and the markers could not be checked.

For hosted models: the roles of the OpenAI chat API, litellm's offline `token_counter` (a
documented ``estimate``: exact for OpenAI models, a cl100k approximation otherwise) and
litellm's model map for the window. Whether the system text arrives is then shown only by the
provider's reported usage (see `jobrouter.contracts.rendering`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from jobrouter.providers import chat_formats
from jobrouter.providers.base import MarkerTokens, Message, PromptInspection

Tokenize = Callable[[str], Awaitable[list[int]]]
Detokenize = Callable[[list[int]], Awaitable[str]]

ALL_ROLES = frozenset({"system", "user", "assistant"})
TOKENIZE_PATH = "/extras/tokenize"
DETOKENIZE_PATH = "/extras/detokenize"


def server_root(api_base: str) -> str:
    """`http://host:port/v1` -> `http://host:port` (where llama-cpp-python serves /extras)."""
    root = api_base.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def context_window(litellm: Any, model: str, configured: int | None) -> int | None:
    if configured is not None:
        return configured
    try:
        info = litellm.get_model_info(model)
    except Exception:  # litellm raises plain Exception subclasses for unmapped models
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if window else None


def inspect_hosted(
    litellm: Any,
    model: str,
    messages: tuple[Message, ...],
    configured_window: int | None,
    *,
    bare: tuple[Message, ...] | None = None,
) -> PromptInspection:
    def count(sent: tuple[Message, ...]) -> int:
        return int(
            litellm.token_counter(
                model=model, messages=[{"role": m.role, "content": m.content} for m in sent]
            )
        )

    return PromptInspection(
        accepted_roles=ALL_ROLES,
        rendered=None,
        system_rendered=None,  # the provider's own template: not knowable from here
        prompt_tokens=count(messages),
        tokenizer=f"litellm token_counter ({model})",
        count_basis="estimate",
        prompt_tokens_without_system=count(bare) if bare is not None else None,
        context_window=context_window(litellm, model, configured_window),
        control_tokens_special=None,
        notes=(
            "hosted chat API: the provider applies its own template; the system role is "
            "sent as a message, and only the provider's usage can show that it arrived",
        ),
    )


async def inspect_llama(
    chat_format: str,
    messages: tuple[Message, ...],
    tokenize: Tokenize,
    detokenize: Detokenize,
    window: int | None,
    *,
    bare: tuple[Message, ...] | None = None,
) -> PromptInspection:
    """`messages` as the server renders and counts them. `bare` is what would be sent if the
    system text were lost (None: the contract has no system text)."""
    fmt = chat_formats.FORMATS.get(chat_format)
    if fmt is None:
        return await _unreproduced(chat_format, messages, tokenize, window)
    rendered = chat_formats.render(chat_format, messages)
    assert rendered is not None  # every format in FORMATS has a renderer
    notes = list(fmt.notes)
    if rendered.dropped:
        notes.append(f"{len(rendered.dropped)} system message(s) dropped by {chat_format}")
    tokens = await tokenize(rendered.text)
    without = None
    if bare is not None:
        bare_rendered = chat_formats.render(chat_format, bare)
        without = len(await tokenize(bare_rendered.text)) if bare_rendered else None
    markers = await marker_tokens(fmt.control_markers, tokenize, detokenize)
    return PromptInspection(
        accepted_roles=fmt.roles,
        rendered=rendered.text,
        system_rendered=rendered.system_present,
        prompt_tokens=len(tokens),
        tokenizer=f"llama.cpp {TOKENIZE_PATH}",
        count_basis="exact",
        prompt_tokens_without_system=without,
        context_window=window,
        control_tokens_special=all(m.special for m in markers),
        markers=markers,
        markers_measured=True,
        notes=tuple(notes),
    )


async def _unreproduced(
    chat_format: str, messages: tuple[Message, ...], tokenize: Tokenize, window: int | None
) -> PromptInspection:
    tokens = await tokenize("".join(m.content for m in messages))
    reason = (
        f"chat format {chat_format!r} is not reproduced here: what the model reads, whether "
        "the system text is in it and whether its markers are control tokens are unknown"
    )
    return PromptInspection(
        accepted_roles=ALL_ROLES,
        rendered=None,
        system_rendered=None,
        prompt_tokens=len(tokens),
        tokenizer=f"llama.cpp {TOKENIZE_PATH} (bare message texts)",
        count_basis="lower_bound",
        context_window=window,
        control_tokens_special=None,
        unverified=(reason,),
    )


async def marker_tokens(
    markers: tuple[str, ...], tokenize: Tokenize, detokenize: Detokenize
) -> tuple[MarkerTokens, ...]:
    """Each marker's ids beyond BOS, and whether it is one control token (see the module doc)."""
    baseline = await tokenize("")
    out = []
    for marker in markers:
        ids = await tokenize(marker)
        ids = ids[len(baseline) :] if ids[: len(baseline)] == baseline else ids
        special = len(ids) == 1 and await detokenize(ids) == ""
        out.append(MarkerTokens(marker=marker, token_ids=tuple(ids), special=special))
    return tuple(out)
