"""Provider configuration: what to call, how hard, and what identifies its behaviour.

`ProviderConfig` holds no secret: `api_key_env` names the environment variable that holds the
key, and anything that looks like a key itself is refused (without echoing it back).
`provider_fingerprint` hashes only what changes the provider's answers, so a certification goes
stale when the model, endpoint, output mode, chat format or extra parameters change, and not
when a timeout or a concurrency limit is tuned.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

StructuredOutput = Literal["json_schema", "json_object_schema", "none"]
Transport = Literal["litellm", "openai"]
OPENAI_PREFIX = "openai/"  # the model prefix of an OpenAI-compatible server (litellm's route)
Waivable = Literal["rendering"]  # the certification checks whose `unverified` may be accepted

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
_KEY_PREFIXES = ("pk-", "key-", "ghp_", "xoxb-", "AIza", "Bearer ")

# `extra_params` is an allow-list: each key reaches litellm as is, so only sampling knobs that
# certification then covers (they are part of the provider fingerprint) may pass, each with a
# flat value. Everything else is refused by name, with the reason.
_NUMBER = (int, float)
ALLOWED_EXTRA_PARAMS: dict[str, tuple[type, ...]] = {
    "top_p": _NUMBER,
    "top_k": (int,),
    "min_p": _NUMBER,
    "seed": (int,),
    "frequency_penalty": _NUMBER,
    "presence_penalty": _NUMBER,
    "repetition_penalty": _NUMBER,
    "stop": (str, list),
    "user": (str,),
    "reasoning_effort": (str,),
}
_REFUSED_BECAUSE = {
    (
        "fallbacks",
        "context_window_fallbacks",
        "content_policy_fallbacks",
        "model_list",
        "default_fallbacks",
    ): "litellm would call another model, never certified, and record it as this provider",
    ("mock_response", "mock_tool_calls", "mock_timeout", "mock_delay"): "litellm would answer "
    "without calling the provider",
    (
        "api_key",
        "api_base",
        "base_url",
        "api_version",
        "headers",
        "extra_headers",
        "aws_access_key_id",
        "aws_secret_access_key",
        "vertex_credentials",
    ): "keys and endpoints belong in api_key_env and api_base (never a secret in the config file)",
    (
        "num_retries",
        "max_retries",
        "retry_strategy",
        "retry_policy",
        "timeout",
        "stream_timeout",
    ): "retries and timeouts belong to [providers.NAME.retry] and .timeout "
    "(the router's one retry layer)",
    (
        "model",
        "messages",
        "temperature",
        "max_tokens",
        "response_format",
        "stream",
        "n",
        "tools",
        "tool_choice",
        "functions",
    ): "the adapter sets it from the contract",
}


def extra_param_problem(key: str, value: Any) -> str | None:
    """Why `extra_params.<key> = value` is refused (None: allowed)."""
    for keys, why in _REFUSED_BECAUSE.items():
        if key in keys:
            return f"extra_params.{key} is not allowed: {why}"
    kinds = ALLOWED_EXTRA_PARAMS.get(key)
    if kinds is None:
        return (
            f"extra_params.{key} is not an allowed parameter; allowed: "
            f"{', '.join(sorted(ALLOWED_EXTRA_PARAMS))}"
        )
    flat = isinstance(value, kinds) and not isinstance(value, bool)
    if isinstance(value, list):
        flat = all(isinstance(item, str) for item in value)
    if not flat:
        names = " or ".join("list of strings" if k is list else k.__name__ for k in kinds)
        return f"extra_params.{key} must be a {names}, got {type(value).__name__}"
    return None


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class Timeouts(_Frozen):
    """Seconds. `read` is litellm's inactivity timeout and the default whole-call deadline."""

    connect: float = Field(default=5.0, gt=0)
    read: float = Field(default=30.0, gt=0)


class RateLimit(_Frozen):
    requests_per_minute: int | None = Field(default=None, gt=0)
    tokens_per_minute: int | None = Field(default=None, gt=0)


class RetryPolicy(_Frozen):
    """Our ONE retry layer: `attempts` counts the first try; waits are full-jitter exponential."""

    attempts: int = Field(default=3, ge=1, le=20)
    initial: float = Field(default=0.2, ge=0)
    max: float = Field(default=5.0, ge=0)


class Prices(_Frozen):
    """What the provider charges, USD per million tokens (a local server: 0 and 0)."""

    input_usd_per_million: float = Field(ge=0, description="USD per million prompt tokens")
    output_usd_per_million: float = Field(ge=0, description="USD per million completion tokens")


class ProviderConfig(_Frozen):
    model: str = Field(min_length=1, description="litellm model string, e.g. openai/gpt-4o-mini")
    api_base: str | None = None
    api_key_env: str | None = Field(
        default=None, description="NAME of the env var holding the key; None: keyless server"
    )
    timeout: Timeouts = Field(default_factory=Timeouts)
    max_concurrency: int = Field(default=16, ge=1)
    rate_limit: RateLimit = Field(default_factory=RateLimit)
    structured_output: StructuredOutput = "json_schema"
    chat_format: str | None = Field(
        default=None, description="llama.cpp server chat format name (gemma, chatml); None: hosted"
    )
    context_window: int | None = Field(default=None, gt=0)
    accept_unverified: dict[Waivable, str] = Field(
        default_factory=dict,
        description="a named waiver: certification may pass with this check unverified, "
        "e.g. {rendering = 'hosted API, template not visible; agreed by ops'}",
    )
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    max_answer_bytes: int | None = Field(
        default=None,
        gt=0,
        description="bytes a success answer may hold, decoded (gzip and deflate are undone "
        "within the same cap); a longer answer is `rejected` and not read further. Default: "
        "262144 plus 64 per token of the request's max_tokens (docs/failures.md)",
    )
    extra_params: dict[str, Any] = Field(default_factory=dict)
    price: Prices | None = Field(
        default=None,
        description="what the provider charges; unset: litellm's cost map as shipped prices "
        "the model, and a model missing from it has an unknown cost (never 0; docs/spend.md)",
    )
    transport: Transport = Field(
        default="litellm",
        description="how requests travel: `litellm` (any model litellm reaches), or `openai`: "
        "straight to an OpenAI-compatible server over HTTP without litellm (model `openai/...` "
        "with an http:// or https:// api_base; less CPU per call, priced as litellm's "
        "transport is; a new fingerprint, so certify again; docs/local-provider.md)",
    )

    @field_validator("api_key_env")
    @classmethod
    def _env_name_not_key(cls, value: str | None) -> str | None:
        if value is None:
            return None
        looks_random = len(value) >= 24 and "_" not in value  # env names have words
        if value.startswith(_KEY_PREFIXES) or value.startswith(("sk-", "sk_")) or looks_random:
            raise ValueError("api_key_env must NAME an environment variable; this looks like a key")
        if not _ENV_NAME.match(value):
            raise ValueError(
                "api_key_env must be an env var name (A-Z, 0-9, _), e.g. OPENAI_API_KEY"
            )
        return value

    @field_validator("extra_params")
    @classmethod
    def _extra_params_allowed(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key, item in value.items():
            problem = extra_param_problem(key, item)
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("accept_unverified")
    @classmethod
    def _waiver_has_reason(cls, value: dict[Waivable, str]) -> dict[Waivable, str]:
        for check, reason in value.items():
            if not reason.strip():
                raise ValueError(f"accept_unverified.{check} needs a reason (who accepted what)")
        return value

    @model_validator(mode="after")
    def _retry_bounds(self) -> ProviderConfig:
        if self.retry.max < self.retry.initial:
            raise ValueError("retry.max must be >= retry.initial")
        return self

    @model_validator(mode="after")
    def _transport_fits(self) -> ProviderConfig:
        if self.transport != "openai":
            return self
        if not self.model.startswith(OPENAI_PREFIX) or len(self.model) == len(OPENAI_PREFIX):
            raise ValueError(
                f'transport = "openai" needs model = "openai/<name>" (an OpenAI-compatible '
                f"server), got model = {self.model!r}: set the model to openai/<name the server "
                "serves> or remove transport (litellm, the default, reaches any model)"
            )
        if self.api_base is None:
            raise ValueError(
                'transport = "openai" needs api_base (the server\'s URL, e.g. '
                '"http://127.0.0.1:8081/v1"): set api_base or remove transport'
            )
        if urllib.parse.urlsplit(self.api_base).scheme.lower() not in ("http", "https"):
            raise ValueError(
                f'transport = "openai" needs an http:// or https:// api_base, got api_base = '
                f"{self.api_base!r}: write the server's URL with its scheme, e.g. "
                '"http://127.0.0.1:8081/v1", or remove transport'
            )
        return self


def provider_fingerprint(name: str, config: ProviderConfig) -> str:
    """sha256 (hex) of the canonical JSON of the provider's name and behaviour-affecting fields.

    Excluded on purpose: the key's env var name, timeouts, concurrency, rate limits, retry policy,
    the answer cap, the price and context_window — they change how a call is made, not what the
    model answers.
    The `transport` is included when it is not the default litellm: the same server reached another
    way builds its requests in other code (body, parameters, parsing), so a certification earned
    through litellm is not reused by the native transport (absent, it leaves the fingerprints of
    litellm providers as they were, and their certifications and cassettes valid). A waiver
    (`accept_unverified`) is included when present: a certification earned under a waiver goes stale
    when the waiver is withdrawn or changed (absent, it leaves older fingerprints as they were).
    """
    identity: dict[str, Any] = {
        "name": name,
        "model": config.model,
        "api_base": config.api_base,
        "structured_output": config.structured_output,
        "chat_format": config.chat_format,
        "extra_params": config.extra_params,
    }
    if config.transport != "litellm":
        identity["transport"] = config.transport
    if config.accept_unverified:
        identity["accept_unverified"] = {str(k): v for k, v in config.accept_unverified.items()}
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
