"""The provider seam: what the router and the contract runner need from any LLM provider.

Nothing here knows litellm. A `Provider` takes a fully rendered `CompletionRequest` and either
returns a `Completion` or raises `ProviderError` whose `kind` says what is known about the
request's fate (see `jobrouter.providers.errors`).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant"]


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Role
    content: str


class CompletionRequest(BaseModel):
    """One rendered call. `timeout` is the whole-call deadline in seconds (None: provider's own)."""

    model_config = ConfigDict(frozen=True)

    messages: tuple[Message, ...]
    output_schema: dict[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    # Free-form labels for logs and cassettes (job id, contract name); never sent to the provider.
    labels: dict[str, str] = Field(default_factory=dict)


class Usage(BaseModel):
    """What a call used; `cost_usd` None is an unknown cost, `cost_unknown` says why (never 0
    for unknown); `cost_source` where the price came from (`jobrouter.providers.pricing`)."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    cost_source: str | None = None
    cost_unknown: str | None = None


class Completion(BaseModel):
    """A usable answer: `text` as received; `output` parsed (schema-valid if a schema was asked)."""

    model_config = ConfigDict(frozen=True)

    text: str
    output: Any = None
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    # why generation stopped, as the provider said: "stop", "length" (cut off at max_tokens)...
    finish_reason: str | None = None


@runtime_checkable
class Provider(Protocol):
    """Anything that can answer a `CompletionRequest`: everything the router and the contracts
    use of a provider, and nothing more.

    `name` is the configured provider name (e.g. "primary"); `fingerprint` identifies everything
    about the provider that affects behaviour (model, endpoint, output mode, chat format), so that
    a certification becomes stale when it changes; `model` is what an attempt records as its
    model when it starts (None: only the answer will name it, and the attempt records that).
    """

    @property
    def name(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    async def warm_up(self) -> None:
        """Do now what the first call would do first (imports, client setup), sending nothing:
        called before a process claims jobs or certifies. Nothing to do is fine."""
        ...

    async def complete(self, request: CompletionRequest) -> Completion: ...

    async def close(self) -> None:
        """Release what the provider holds; a second call does nothing."""
        ...


CountBasis = Literal["exact", "estimate", "lower_bound"]
"""How far `PromptInspection.prompt_tokens` can be trusted against the provider's own count:
``exact`` the provider's tokenizer on the provider's real rendering; ``estimate`` a documented
approximation (litellm's `token_counter`); ``lower_bound`` the bare message texts of a chat format
that is not reproduced (the template can only add tokens)."""


class MarkerTokens(BaseModel):
    """A chat format's control marker as the model's tokenizer splits it (BOS left out).

    `special` is True when it is ONE token that detokenizes to nothing (a control token); a
    marker split into several ids, or one ordinary token like Gemma's ``<s>``, is plain text.
    """

    model_config = ConfigDict(frozen=True)

    marker: str
    token_ids: tuple[int, ...]
    special: bool


class PromptInspection(BaseModel):
    """How a provider really receives a list of messages (for contract certification).

    `rendered` is the text the provider's chat format produces, when it is knowable (local
    llama.cpp models); `system_rendered` says whether the system text is in that text (None:
    no rendering is known, as for a hosted API or a format not reproduced here).
    `control_tokens_special` says whether the chat format's control markers
    are single special tokens of the model's own tokenizer (None: not applicable, or not known;
    `unverified` then says which), and `markers` shows how each one was split;
    `markers_measured` is True when those ids come from the provider's own tokenizer.
    `prompt_tokens_without_system` is the same count for the messages without their system
    text: what the provider would count if it dropped it. `unverified` lists what this
    inspection could not establish (e.g. a chat format that is not reproduced).
    """

    model_config = ConfigDict(frozen=True)

    accepted_roles: frozenset[str]
    rendered: str | None = None
    system_rendered: bool | None
    prompt_tokens: int
    tokenizer: str  # where prompt_tokens came from: "llama.cpp /extras/tokenize", "litellm ..."
    count_basis: CountBasis = "exact"
    prompt_tokens_without_system: int | None = None
    context_window: int | None = None
    control_tokens_special: bool | None = None
    markers: tuple[MarkerTokens, ...] = ()
    markers_measured: bool = False
    unverified: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@runtime_checkable
class InspectableProvider(Provider, Protocol):
    """A provider that can show how it receives a prompt, without generating anything.

    `output_schema` is the schema the request will ask for: a provider that cannot be asked for
    a schema adds an instruction to the prompt, and the inspection must count it too.
    """

    async def inspect_prompt(
        self, messages: tuple[Message, ...], output_schema: dict[str, Any] | None = None
    ) -> PromptInspection: ...
