"""The reference of every `jobrouter.toml` key, generated from the pydantic models so that it
cannot drift from what is validated: `jobrouter config reference > docs/config-reference.md`
(a test fails when the checked-in page is stale).

A key's text is its `Field(description=...)`; keys whose models carry none are described in
`NOTES` here (a test fails when a key has neither).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from jobrouter.config import RouterConfig
from jobrouter.config_check import unwrap

NOTES: dict[str, str] = {
    "database.url": "where jobs live: `sqlite:///relative.db`, `sqlite:////absolute.db` or "
    "`postgresql://user@host:port/db` (then `pip install 'jobrouter[postgres]'`)",
    "providers": "the providers, by name (`[providers.NAME]`); tasks name them",
    "providers.NAME.api_base": "the server's base URL, e.g. `http://127.0.0.1:8081/v1`",
    "providers.NAME.timeout.connect": "seconds to connect",
    "providers.NAME.timeout.read": "seconds of silence while reading (an inactivity timeout: "
    "the deadline is enforced by the router)",
    "providers.NAME.timeout": "connect and read timeouts of one request",
    "providers.NAME.rate_limit": "local rate limits (a request over them waits, never sent)",
    "providers.NAME.retry": "retries of one attempt (`[providers.NAME.retry]`)",
    "providers.NAME.context_window": "tokens the model takes; certification checks each "
    "rendered prompt fits (default: what litellm knows of the model)",
    "providers.NAME.rate_limit.requests_per_minute": "requests per minute, counted locally",
    "providers.NAME.rate_limit.tokens_per_minute": "tokens per minute, estimated locally",
    "providers.NAME.retry.attempts": "tries inside one attempt, the first included (the one "
    "retry layer: litellm's and the SDK's own retries are off)",
    "providers.NAME.retry.initial": "seconds before the first retry (full-jitter exponential)",
    "providers.NAME.retry.max": "cap of one wait, seconds",
    "providers.NAME.max_concurrency": "calls in flight at once (bulkhead)",
    "providers.NAME.structured_output": "how the output schema is asked for: `json_schema` "
    "(hosted providers), `json_object_schema` (llama.cpp's server, which refuses "
    "`json_schema`) or `none`",
    "providers.NAME.extra_params": "more request parameters (litellm keyword arguments; "
    'with `transport = "openai"` keys of the request\'s JSON body), an allow-list: top_p, '
    "top_k, min_p, seed, frequency_penalty, presence_penalty, repetition_penalty, stop, user, "
    "reasoning_effort, flat values; anything else (fallbacks, mock_response, keys, headers, "
    "retries, ...) is refused with the reason (docs/failures.md)",
    "tasks": "the tasks, by name (`[tasks.NAME]`): what a job asks for",
    "tasks.NAME.max_attempts": "attempts of a job at most, over all its providers",
    "tasks.NAME.attempt_timeout": "seconds one attempt may take; after it the attempt is "
    "`unknown`, never failed",
    "tasks.NAME.side_effects": "`none` (harmless to repeat: failover and hedging allowed) or "
    "`external` (exclusive: nothing new starts while an attempt is started or unknown); "
    "default: the contract's, or `external` without a contract; a task may tighten its "
    "contract's, never loosen it",
    "tasks.NAME.certification": "`none`: the task has no contract and runs uncertified on "
    "purpose (needed when `[certification] required = true`; `contracts status` lists it)",
    "certification.watch": "live answers re-check each certified provider; a drifting one is "
    "suspended for the contract until certified again (docs/certification.md)",
    "submit": "what `submit` refuses before anything is written, on every path (docs/failures.md)",
    "engine": "the workers of a process (`jobrouter serve`, `jobrouter worker`)",
    "engine.workers": "jobs run at once by this process",
    "engine.claim": "seconds a claimed job stays this worker's without a heartbeat",
    "engine.lease": "seconds an attempt stays `started` without a heartbeat; then `unknown`",
    "engine.poll_interval": "seconds between looks for runnable jobs (PostgreSQL: an idle "
    "worker's claim waits on the server up to this long, at most half of "
    "`database.command_timeout`, and takes a job as soon as one is free)",
    "engine.sweep_interval": "seconds between sweeps of expired attempt leases",
    "certification.ttl_days": "days a certification stays valid",
    "http.host": "address `jobrouter serve` listens on",
    "http.port": "port `jobrouter serve` listens on",
    "webhooks": "where each owner's completion events go (`[webhooks.OWNER]`)",
    "outbox.poll_interval": "seconds between looks for due events (an event committed in this "
    "process is sent at once)",
    "breaker": "the circuit breaker of every provider (state kept in the store)",
    "certification": "failover only to certified providers",
    "http": "the HTTP API and the console at /ui",
    "outbox": "delivery of completion events to webhooks",
    "retention": "how long finished jobs are kept (`jobrouter purge`)",
    "database": "the job store",
}


def _type_name(annotation: Any) -> str:
    annotation = unwrap(annotation)
    origin = get_origin(annotation)
    if origin is dict:
        return f"table of {_type_name(get_args(annotation)[1])}"
    if origin is list:
        return f"list of {_type_name(get_args(annotation)[0])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    if origin is not None and str(origin).endswith("Literal"):
        return " \\| ".join(json.dumps(arg) for arg in get_args(annotation))
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _default(info: FieldInfo) -> str:
    if info.default is PydanticUndefined:
        return "required" if info.default_factory is None else ""
    return "" if info.default is None else f"`{json.dumps(info.default)}`"


def _limits(info: FieldInfo) -> str:
    words = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "min_length": "min length"}
    found = []
    for meta in info.metadata:
        for attr, word in words.items():
            value = getattr(meta, attr, None)
            if value is not None:
                found.append(f"{word} {value}")
    return ", ".join(found)


def keys(
    model: type[BaseModel] = RouterConfig, prefix: str = ""
) -> Iterator[tuple[str, FieldInfo]]:
    """Every key, depth first, with named tables as `NAME`."""
    for name, info in model.model_fields.items():
        if info.exclude:
            continue
        key = f"{prefix}{name}"
        yield key, info
        inner = unwrap(info.annotation)
        if get_origin(inner) is dict:
            inner = unwrap(get_args(inner)[1])
            key = f"{key}.NAME"
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            yield from keys(inner, f"{key}.")


def description(key: str, info: FieldInfo) -> str:
    return info.description or NOTES.get(key, "")


def render_reference() -> str:
    lines = [
        "# Configuration reference (`jobrouter.toml`)",
        "",
        "Generated from the pydantic models by `jobrouter config reference > "
        "docs/config-reference.md`; a test fails when this page is stale. Check a file with "
        "`jobrouter config check` (every problem at once, with did-you-mean suggestions). "
        "`NAME` stands for a name you choose (a provider, a task, an owner).",
        "",
        "| key | type | default | limits | what it does |",
        "|---|---|---|---|---|",
    ]
    for key, info in keys():
        text = description(key, info).replace("|", "\\|")
        lines.append(
            f"| `{key}` | {_type_name(info.annotation)} | {_default(info)} | "
            f"{_limits(info)} | {text} |"
        )
    return "\n".join(lines) + "\n"
