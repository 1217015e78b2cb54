"""Configuration: `jobrouter.toml`, validated by pydantic, with errors that name the file, the
key and the problem. See README.md for a complete example.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from jobrouter.config_budgets import BUDGET_NAME, BudgetConfig
from jobrouter.config_fleet import NATS_URL_ENV, DeliveryConfig, LeaderConfig, TelemetryConfig
from jobrouter.errors import ConfigError
from jobrouter.providers.config import ProviderConfig

DEFAULT_CONFIG = "jobrouter.toml"
CONFIG_ENV = "JOBROUTER_CONFIG"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatabaseConfig(_Strict):
    url: str = "sqlite:///jobrouter.db"
    # PostgreSQL only (SQLite's waits are bounded by its busy timeout): a stalled server fails
    # a request with 503 after this long instead of holding it (and readiness) indefinitely.
    command_timeout: float = Field(
        default=30.0,
        gt=0,
        description="seconds one statement may take (PostgreSQL); a session idle inside a "
        "transaction this long is ended by the server (docs/operations.md)",
    )
    acquire_timeout: float = Field(
        default=10.0, gt=0, description="seconds to wait for a pooled connection (PostgreSQL)"
    )


class TaskConfig(_Strict):
    contract: str | None = Field(
        default=None, description="contracts/library/<name>.yaml, or a path relative to the config"
    )
    providers: list[str] = Field(min_length=1, description="candidates, in order of preference")
    order: Literal["config", "cost"] = Field(
        default="config",
        description="the order its providers are tried in: `config` (as `providers` lists them) "
        "or `cost` (cheapest first by input + output USD per million tokens, the highest "
        "prompt-size tier's; a provider without a known price last; equal prices as listed)",
    )
    max_attempts: int = Field(default=3, ge=1, le=20)
    hedge_after: float | None = Field(default=None, gt=0, description="seconds of silence")
    deadline: float = Field(default=120.0, gt=0, description="seconds from submit to give up")
    attempt_timeout: float | None = Field(default=None, gt=0)
    # Without a contract nothing says the task is harmless to repeat: exclusive by default.
    # With one, a task may only tighten it (external over none), never loosen it.
    side_effects: Literal["none", "external"] | None = None
    # "none": this task runs without a contract, knowingly, even where [certification]
    # required = true (which otherwise refuses a task without a contract at load).
    certification: Literal["none"] | None = None
    on_budget: Literal["fail", "wait"] = Field(
        default="fail",
        description="when the next attempt would cross a budget (docs/spend.md): `fail` ends "
        "the job (nothing was sent) unless another certified provider is within its budgets; "
        "`wait` looks again as room frees, until the budget's period ends or the job's deadline",
    )


class EngineConfig(_Strict):
    workers: int = Field(default=64, ge=1)
    claim: float = Field(default=60.0, gt=0)
    lease: float = Field(default=30.0, gt=0)
    poll_interval: float = Field(default=0.5, gt=0)
    sweep_interval: float = Field(default=5.0, gt=0)
    freeze_startup_heap: bool = True


class BreakerConfig(_Strict):
    failure_threshold: int = Field(default=5, ge=1, description="consecutive failures to open")
    cooldown: float = Field(default=30.0, gt=0, description="seconds open before one probe")
    probe_timeout: float = Field(default=60.0, gt=0, description="a silent probe counts as lost")


class WatchConfig(_Strict):
    """How live answers re-check certified providers (router/watch.py, docs/certification.md)."""

    enabled: bool = Field(
        default=True,
        description="the leader folds live verdicts and suspends a pair whose answers drift",
    )
    interval: float = Field(
        default=2.0, gt=0, description="seconds between the leader's folds of live verdicts"
    )
    batch: int = Field(default=1000, ge=1, le=100_000, description="verdicts folded at a time")
    baseline_floor: float = Field(
        default=0.02,
        gt=0,
        le=0.5,
        description="the lowest failure rate a certified provider is assumed to have, whatever "
        "its golden runs showed",
    )
    large_rise: float = Field(
        default=0.20, gt=0, lt=1, description="the rise (absolute) the fast CUSUM is designed for"
    )
    large_threshold: float = Field(
        default=14.0, gt=0, description="the fast CUSUM's threshold, in nats"
    )
    small_rise: float = Field(
        default=0.05, gt=0, lt=1, description="the rise (absolute) the slow CUSUM is designed for"
    )
    small_threshold: float = Field(
        default=13.5, gt=0, description="the slow CUSUM's threshold, in nats"
    )
    rendering_run: int = Field(
        default=5, ge=1, description="answers in a row with the prompt count out of tolerance"
    )
    probes_per_hour: float = Field(
        default=2.0,
        ge=0,
        description="golden cases the leader sends each certified provider an hour, fleet-wide "
        "(0: no probes); each is judged as certification did, and a wrong answer suspends",
    )


class CertificationConfig(_Strict):
    required: bool = Field(default=True, description="fail over only to certified providers")
    ttl_days: float = Field(default=7.0, gt=0)
    warn_before_days: float = Field(
        default=2.0, gt=0, description="the leader warns this long before a certification expires"
    )
    watch: WatchConfig = Field(default_factory=WatchConfig)


class SubmitConfig(_Strict):
    """What `submit` accepts (the door, router/door.py), on every path: API, CLI, HTTP."""

    max_input_depth: int = Field(
        default=32, ge=2, le=1000, description="levels of nesting in input or params"
    )
    max_input_bytes: int = Field(
        default=262_144, ge=1024, description="canonical JSON of input + params"
    )


class HttpConfig(_Strict):
    """`jobrouter serve`: where it listens and what it accepts. Tokens live in the database."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    max_body_bytes: int = Field(default=1_048_576, ge=1024, description="larger bodies get 413")
    heartbeat: float = Field(
        default=15.0, gt=0, description="seconds between SSE comment lines and token checks"
    )
    max_streams_per_token: int = Field(
        default=100, ge=1, description="event streams one token may hold open at once; more get 429"
    )


class WebhookConfig(_Strict):
    """Where an owner's completion events go. Only the operator configures URLs (callers never
    supply one: no request forgery); the HMAC secret is read from the named environment variable
    when the deliverer starts, so it never sits in the config file."""

    url: str = Field(description="http(s) URL that receives POSTed completion events")
    secret_env: str = Field(description="NAME of the environment variable holding the secret")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"must be an http:// or https:// URL with a host, got {value!r}")
        return value

    @field_validator("secret_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            raise ValueError(f"must name an environment variable (LIKE_THIS), got {value!r}")
        return value


class OutboxConfig(_Strict):
    """Delivery of completion events to `[webhooks.<owner>]` (docs/operations.md)."""

    max_tries: int = Field(default=8, ge=1, description="failed tries before a dead letter")
    backoff_initial: float = Field(default=30.0, gt=0, description="seconds; doubles per try")
    backoff_max: float = Field(default=3600.0, gt=0, description="cap of one wait, seconds")
    timeout: float = Field(default=10.0, gt=0, description="seconds for one delivery request")
    claim: float = Field(default=60.0, gt=0, description="seconds a claimed batch stays ours")
    poll_interval: float = Field(default=1.0, gt=0)
    batch: int = Field(default=16, ge=1, description="events sent at once")
    max_response_bytes: int = Field(
        default=4096,
        ge=0,
        le=1_048_576,
        description="bytes of a webhook's answer read, at most (an error's excerpt); the rest "
        "is never read: the connection is dropped",
    )

    @model_validator(mode="after")
    def _claim_outlives_a_send(self) -> OutboxConfig:
        if self.claim <= self.timeout:
            raise ValueError(
                f"claim ({self.claim}s) must be longer than timeout "
                f"({self.timeout}s), or a slow send is taken over and sent twice"
            )
        return self


class RetentionConfig(_Strict):
    """How long finished jobs (and so their idempotency keys) are kept; `jobrouter purge`."""

    days: float = Field(default=7.0, ge=1.0, description="at least one day")
    purge_interval: float | None = Field(
        default=None,
        gt=0,
        description="hours between purges run by the leader; unset: only `jobrouter purge`",
    )
    drop_parked: bool = Field(
        default=False,
        description="the leader's purge also deletes jobs whose event is parked (an owner "
        "without a webhook, never tried), as `jobrouter purge --drop-parked`",
    )


class RouterConfig(_Strict):
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    tasks: dict[str, TaskConfig] = Field(default_factory=dict)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    certification: CertificationConfig = Field(default_factory=CertificationConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)
    submit: SubmitConfig = Field(default_factory=SubmitConfig)
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    webhooks: dict[str, WebhookConfig] = Field(default_factory=dict, description="by owner")
    outbox: OutboxConfig = Field(default_factory=OutboxConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    delivery: DeliveryConfig = Field(
        default_factory=DeliveryConfig,
        description="optional: completion events through NATS JetStream",
    )
    leader: LeaderConfig = Field(
        default_factory=LeaderConfig,
        description="the one process that runs the periodic work (PostgreSQL: a leased lock)",
    )
    telemetry: TelemetryConfig = Field(
        default_factory=TelemetryConfig, description="optional: OTLP export of traces and metrics"
    )
    budgets: dict[str, BudgetConfig] = Field(
        default_factory=dict,
        description="caps on spend, by name (`[budgets.NAME]`, docs/spend.md): every attempt "
        "reserves its worst case against each budget that covers it before its provider is called",
    )
    # Where relative contract paths resolve; set from the file's folder when loaded from a file.
    base_dir: Path | None = Field(default=None, exclude=True)
    # The file to name with --config in a command printed for the operator (absolute, so the
    # command runs from any folder); None when the config was found by default or built in code.
    config_file: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _tasks_name_known_providers(self) -> RouterConfig:
        for task_name, task in self.tasks.items():
            for provider in task.providers:
                if self.providers and provider not in self.providers:
                    known = ", ".join(sorted(self.providers)) or "none"
                    raise ValueError(
                        f"tasks.{task_name}.providers names {provider!r}, which is not a "
                        f"[providers.{provider}] section (configured: {known})"
                    )
        return self

    @model_validator(mode="after")
    def _budgets_name_known_tasks_and_providers(self) -> RouterConfig:
        for name, budget in self.budgets.items():
            if not re.fullmatch(BUDGET_NAME, name):
                raise ValueError(
                    f"budgets.{name}: a budget's name is lowercase letters, digits, _ and - "
                    "(it names the budget in refusals and metrics)"
                )
            for key, known in (("task", self.tasks), ("provider", self.providers)):
                named = getattr(budget, key)
                if named is not None and known and named not in known:
                    raise ValueError(
                        f"budgets.{name}.{key} names {named!r}, which is not a "
                        f"[{key}s.{named}] section (configured: {', '.join(sorted(known))})"
                    )
        return self

    @model_validator(mode="after")
    def _tasks_certified_or_say_so(self) -> RouterConfig:
        if not self.certification.required:
            return self
        for task_name, task in self.tasks.items():
            if task.contract is None and task.certification != "none":
                raise ValueError(
                    f"tasks.{task_name} has no contract, but [certification] required = true: "
                    f'give it a contract, or say `certification = "none"` in [tasks.{task_name}]'
                    " to run it uncertified on purpose"
                )
            if task.contract is not None and task.certification == "none":
                raise ValueError(
                    f'tasks.{task_name}: certification = "none" is for a task '
                    "without a contract; remove one of the two"
                )
        return self

    @model_validator(mode="after")
    def _bus_claim_within_the_dedupe_window(self) -> RouterConfig:
        # Only where events go through NATS: webhooks to deliver and a URL, the environment's
        # included (it wins over the file, as the router reads it when it builds the delivery).
        on_bus = bool(os.environ.get(NATS_URL_ENV) or self.delivery.nats_url)
        claim, window = self.outbox.claim, self.delivery.dedupe_window
        if self.webhooks and on_bus and claim >= window:
            raise cross_field_error(
                "delivery.dedupe_window",
                f"[outbox] claim ({claim}s) must be shorter than [delivery] dedupe_window "
                f"({window}s), or an event whose relay died before marking it published could "
                "reach the receiver twice: raise dedupe_window above the claim, or shorten "
                "[outbox] claim",
            )
        return self


def cross_field_error(key: str, message: str) -> PydanticCustomError:
    """A rule over several keys, refused at `key`, the one to change. Pydantic places a
    model validator's error at the model itself (the file's top level for `RouterConfig`), so
    the key travels in the error's context, where `error_key` finds it."""
    return PydanticCustomError("cross_field", message, {"key": key})


def error_key(error: ErrorDetails) -> str | None:
    """The key a validation error is at: its location, or a cross-field rule's own key."""
    key = ".".join(str(part) for part in error["loc"])
    if not key and isinstance(error.get("ctx"), dict):
        key = str(error["ctx"].get("key") or "")
    return key or None


def config_path(given: str | Path | None) -> Path:
    """The config file to use: the one given, else $JOBROUTER_CONFIG, else ./jobrouter.toml."""
    return Path(given or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG)


def load_config(path: str | Path) -> RouterConfig:
    file = Path(path)
    try:
        raw = tomllib.loads(file.read_text("utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            "no such file; create one (see README.md) or pass --config PATH", file=str(file)
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=str(file)) from exc
    try:
        config = RouterConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = error_key(first)
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise ConfigError(first["msg"] + more, file=str(file), key=key) from exc
    return config.model_copy(
        update={"base_dir": file.resolve().parent, "config_file": file.resolve()}
    )


def unset_secrets(
    webhooks: Mapping[str, WebhookConfig], environ: Mapping[str, str] | None = None
) -> list[ConfigError]:
    """One error per webhook whose secret variable is unset or empty: the rule `serve` and
    `worker` refuse to start by, and `jobrouter config check` reports."""
    env = os.environ if environ is None else environ
    return [
        ConfigError(
            f"environment variable {hook.secret_env} (the webhook's HMAC "
            "secret) is not set or empty",
            key=f"webhooks.{owner}.secret_env",
        )
        for owner, hook in webhooks.items()
        if not env.get(hook.secret_env, "")
    ]
