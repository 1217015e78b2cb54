"""The prompt text a llama-cpp-python server builds from chat messages, for its chat formats.

Reproduces `llama_cpp/llama_chat_format.py` (llama-cpp-python 0.3.x: `format_gemma`,
`format_chatml`, `format_llama2`) so certification can see what the model really reads; a format
not listed here is not reproduced, and certification says so (``unverified``). What they do:

gemma   Only user and assistant turns are rendered; EVERY system message is dropped (the server
        logs that at debug level only). Each turn is ``<start_of_turn>user\\n`` or
        ``<start_of_turn>model\\n`` + content + ``<end_of_turn>\\n``; a turn with empty content is
        its opening marker alone. The prompt ends with ``<start_of_turn>model\\n``.
chatml  The FIRST system message becomes ``<|im_start|>system\\n`` + text + ``<|im_end|>\\n``;
        that block is emitted even when there is no system message (with empty text), and later
        system messages are dropped. Turns are ``<|im_start|>user\\n`` or
        ``<|im_start|>assistant\\n``, then content + ``<|im_end|>\\n`` (empty content: the
        opening line alone). The prompt ends with ``<|im_start|>assistant\\n``.
llama-2 The server's fallback for a GGUF without a chat template. The FIRST non-empty system
        message becomes ``[INST] <<SYS>>\\n`` + text + ``\\n<</SYS>>``, followed by a space and
        the first turn's text (its role prefix replaced by that block); other turns are
        ``<s>[INST]`` + text + ``  `` (user) or ``[/INST]`` + text + `` </s>`` (assistant), and
        the prompt ends with ``[/INST]``. Without a system message it starts with a space.
        ``[INST]``, ``<<SYS>>`` and the rest are plain text to a model not trained on them.

The server tokenizes the result with BOS added and special tokens parsed (``special=True``),
which is also what its ``POST /extras/tokenize`` does, so counting there is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobrouter.providers.base import Message


@dataclass(frozen=True)
class ChatFormat:
    name: str
    roles: frozenset[str]  # roles whose text reaches the model
    control_markers: tuple[str, ...]  # must each be ONE special token of the model's tokenizer
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rendered:
    text: str
    system_present: bool  # there is a system message and every one of them was rendered
    dropped: tuple[Message, ...]  # messages the format silently left out


GEMMA = ChatFormat(
    name="gemma",
    roles=frozenset({"user", "assistant"}),
    control_markers=("<start_of_turn>", "<end_of_turn>"),
    notes=("gemma has no system role: llama-cpp-python drops every system message",),
)
CHATML = ChatFormat(
    name="chatml",
    roles=frozenset({"system", "user", "assistant"}),
    control_markers=("<|im_start|>", "<|im_end|>"),
    notes=("chatml keeps only the first system message",),
)
LLAMA_2 = ChatFormat(
    name="llama-2",
    roles=frozenset({"system", "user", "assistant"}),
    control_markers=("[INST]", "[/INST]", "<<SYS>>", "<</SYS>>", "<s>", "</s>"),
    notes=("llama-2 keeps only the first system message",),
)
FORMATS = {f.name: f for f in (GEMMA, CHATML, LLAMA_2)}


def _turns(messages: Sequence[Message], prefixes: dict[str, str], end: str) -> str:
    out = []
    for message in messages:
        prefix = prefixes.get(message.role)
        if prefix is None:
            continue
        out.append(prefix + message.content + end if message.content else prefix)
    return "".join(out)


def render_gemma(messages: Sequence[Message]) -> Rendered:
    prefixes = {"user": "<start_of_turn>user\n", "assistant": "<start_of_turn>model\n"}
    text = _turns(messages, prefixes, "<end_of_turn>\n") + "<start_of_turn>model\n"
    dropped = tuple(m for m in messages if m.role == "system")
    return Rendered(text=text, system_present=False, dropped=dropped)


def render_chatml(messages: Sequence[Message]) -> Rendered:
    systems = [m for m in messages if m.role == "system"]
    system_text = systems[0].content if systems else ""
    prefixes = {"user": "<|im_start|>user\n", "assistant": "<|im_start|>assistant\n"}
    text = (
        "<|im_start|>system\n"
        + system_text
        + "<|im_end|>\n"
        + _turns(messages, prefixes, "<|im_end|>\n")
        + "<|im_start|>assistant\n"
    )
    return Rendered(text=text, system_present=len(systems) == 1, dropped=tuple(systems[1:]))


def render_llama2(messages: Sequence[Message]) -> Rendered:
    """`format_llama2` + `_format_llama2` (llama_chat_format.py), step for step."""
    systems = [m for m in messages if m.role == "system"]
    system = systems[0].content if systems else ""
    head = f"[INST] <<SYS>>\n{system}\n<</SYS>>" if system else ""
    prefixes = {"user": "<s>[INST]", "assistant": "[/INST]"}
    turns = [(prefixes[m.role], m.content) for m in messages if m.role in prefixes]
    seps = (" ", "</s>")
    text = head + seps[0]
    for index, (prefix, content) in enumerate(turns):
        if head and index == 0:
            text += content + seps[0]
        elif content:
            text += prefix + content + " " + seps[index % 2]
        else:
            text += prefix + " "
    return Rendered(
        text=text + "[/INST]",
        system_present=len(systems) == 1 and bool(system),
        dropped=tuple(systems[1:]),
    )


_RENDERERS = {"gemma": render_gemma, "chatml": render_chatml, "llama-2": render_llama2}


def fold_system(chat_format: str | None, messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """For a format with no system role, put the system text at the start of the first user
    turn (separated by a blank line), as Gemma's own chat template does; llama-cpp-python's
    `gemma` format would silently drop it. Other formats: the messages unchanged."""
    fmt = FORMATS.get(chat_format or "")
    systems = [m.content for m in messages if m.role == "system"]
    if fmt is None or "system" in fmt.roles or not systems:
        return messages
    rest = [m for m in messages if m.role != "system"]
    preamble = "\n\n".join(systems)
    first_user = next((i for i, m in enumerate(rest) if m.role == "user"), None)
    if first_user is None:
        return (Message(role="user", content=preamble), *rest)
    merged = Message(role="user", content=f"{preamble}\n\n{rest[first_user].content}")
    return (*rest[:first_user], merged, *rest[first_user + 1 :])


def render(chat_format: str, messages: Sequence[Message]) -> Rendered | None:
    """The server's prompt text for `chat_format`, or None for a format not reproduced here."""
    renderer = _RENDERERS.get(chat_format)
    return renderer(messages) if renderer is not None else None
