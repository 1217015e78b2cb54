"""How a provider really receives a prompt: roles, rendered text, token count, context window.

For a llama.cpp server (`chat_format` set) the prompt is rendered exactly as llama-cpp-python
renders it (`providers.chat_formats`) and counted by the server's own tokenizer:
``POST {api_base without /v1}/extras/tokenize`` with ``{"input": text, "model": alias}`` answers
``{"tokens": [...]}``. The server tokenizes there with BOS added and special tokens parsed, the
same call its chat handler makes on the rendered prompt, so the count is the model's own.
A control marker (``<start_of_turn>``) is "special" when it is ONE token beyond what the empty
string yields (the BOS): a marker split into several pieces means the template would feed the
model plain text instead of its turn structure.

For hosted models: the roles of the OpenAI chat API, litellm's offline `token_counter` (exact
for OpenAI models, a cl100k approximation otherwise) and litellm's model map for the window.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from providers import chat_formats
from providers.base import Message, PromptInspection

Tokenize = Callable[[str], Awaitable[list[int]]]

ALL_ROLES = frozenset({"system", "user", "assistant"})
TOKENIZE_PATH = "/extras/tokenize"


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


def inspect_hosted(litellm: Any, model: str, messages: tuple[Message, ...],
                   configured_window: int | None) -> PromptInspection:
    count = litellm.token_counter(
        model=model, messages=[{"role": m.role, "content": m.content} for m in messages]
    )
    return PromptInspection(
        accepted_roles=ALL_ROLES,
        rendered=None,
        system_present=any(m.role == "system" for m in messages),
        prompt_tokens=int(count),
        tokenizer=f"litellm token_counter ({model})",
        context_window=context_window(litellm, model, configured_window),
        control_tokens_special=None,
        notes=("hosted chat API: the provider applies its own template; the system role is "
               "sent as a message",),
    )


async def inspect_llama(
    chat_format: str, messages: tuple[Message, ...], tokenize: Tokenize,
    window: int | None,
) -> PromptInspection:
    fmt = chat_formats.FORMATS.get(chat_format)
    rendered = chat_formats.render(chat_format, messages)
    notes: list[str] = list(fmt.notes) if fmt is not None else []
    if rendered is None:
        text = "".join(m.content for m in messages)
        notes.append(f"chat format {chat_format!r} is not reproduced here: token count is of the "
                     "bare message texts and the system message cannot be shown to be present")
    else:
        text = rendered.text
        if rendered.dropped:
            notes.append(f"{len(rendered.dropped)} system message(s) dropped by {chat_format}")
    tokens = await tokenize(text)
    special = await _markers_special(fmt.control_markers, tokenize) if fmt is not None else None
    return PromptInspection(
        accepted_roles=fmt.roles if fmt is not None else ALL_ROLES,
        rendered=rendered.text if rendered is not None else None,
        system_present=rendered.system_present if rendered is not None else False,
        prompt_tokens=len(tokens),
        tokenizer=f"llama.cpp {TOKENIZE_PATH}",
        context_window=window,
        control_tokens_special=special,
        notes=tuple(notes),
    )


async def _markers_special(markers: tuple[str, ...], tokenize: Tokenize) -> bool:
    baseline = len(await tokenize(""))
    for marker in markers:
        if len(await tokenize(marker)) - baseline != 1:
            return False
    return True
