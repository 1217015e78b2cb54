"""The door: what `Router.submit` refuses before any row is written, for every caller (Python
API, CLI, HTTP, client). A job that passes can be sent: its input fits the contract, its
params cannot override what certification fixed, and its provider request has been built.

Checked in this order, each failure a `JobRefused` naming the field, the value and what to do:

1. shape: the input is a JSON object; input and params nest at most `max_depth` levels and
   hold only JSON values (string keys, finite numbers); their canonical JSON is at most
   `max_bytes` (the walk is iterative, so a hostile depth cannot exhaust the stack);
2. params: only the keys of `ALLOWED_PARAMS`. Sampling that certification fixed (temperature,
   seed, response format, ...) is refused, and `max_tokens` may only lower the contract's;
3. input: valid against the contract's `input_schema` (Draft 2020-12);
4. the request: the contract's prompt renders for this input. The built request is returned,
   so the first attempt calls exactly what was checked here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobrouter.errors import JobRefused
from jobrouter.models import JsonObject, canonical_json
from jobrouter.providers import CompletionRequest
from jobrouter.tasks import ALLOWED_PARAMS, TaskRuntime

if TYPE_CHECKING:
    from jobrouter.models import Job
    from jobrouter.store.jobstore import JobStore
    from jobrouter.store.starts import AttemptStart

# Keys a caller may not put in `params` because certification fixed them (others: not known).
FIXED_BY_CERTIFICATION = frozenset(
    {
        "temperature",
        "seed",
        "top_p",
        "top_k",
        "min_p",
        "response_format",
        "frequency_penalty",
        "presence_penalty",
        "repetition_penalty",
        "logit_bias",
        "stop",
        "n",
    }
)
_VALUE_CHARS = 80


@dataclass(frozen=True)
class DoorLimits:
    """Defaults match `[submit]` in the config (docs/configuration.md)."""

    max_depth: int = 32
    max_bytes: int = 262_144


@dataclass(frozen=True)
class NewJob:
    """A job the door accepted, to create: its fields and the provider `request` built for it."""

    owner: str
    idempotency_key: str
    task: TaskRuntime
    input: JsonObject
    params: JsonObject
    request: CompletionRequest

    async def create_in(
        self,
        jobs: JobStore,
        *,
        claimed_by: str | None,
        claim_s: float,
        first: AttemptStart | None = None,
    ) -> Job:
        """Written to `jobs` (router/store/jobs.py `create_and_start`: the job, or the one
        already under its key), claimed by `claimed_by`, with `first` when given."""
        job, _ = await jobs.create_and_start(
            owner=self.owner,
            idempotency_key=self.idempotency_key,
            task=self.task.name,
            input=self.input,
            params=self.params,
            deadline_s=self.task.deadline_s,
            claimed_by=claimed_by,
            claim_s=claim_s,
            first=first,
        )
        return job


def admit(
    runtime: TaskRuntime, input: Any, params: Mapping[str, Any] | None, limits: DoorLimits
) -> CompletionRequest:
    """The provider request for this job, or `JobRefused` saying what to fix."""
    if not isinstance(input, Mapping):
        raise JobRefused(
            field="input",
            value=_show(input),
            slug="input-invalid",
            reason="the input must be a JSON object",
            hint='send an object such as {"product": {"name": "tea"}}',
        )
    params = params if params is not None else {}
    if not isinstance(params, Mapping):
        raise JobRefused(
            field="params",
            value=_show(params),
            slug="params-refused",
            reason="params must be a JSON object",
            hint="send {} or leave it out",
        )
    _check_shape("input", input, limits)
    _check_shape("params", params, limits)
    _check_size(input, params, limits)
    _check_params(runtime, params)
    _check_input(runtime, input)
    try:
        return runtime.build_request(input, params)
    except Exception as exc:  # RenderError and friends: the prompt cannot be made from it
        raise JobRefused(
            field="input",
            value=_show(input),
            slug="input-invalid",
            reason=f"the provider request cannot be built: {exc}",
            hint="send the fields the task's prompt uses",
        ) from exc


def _check_shape(name: str, root: Any, limits: DoorLimits) -> None:
    stack: list[tuple[str, Any, int]] = [(name, root, 1)]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, Mapping | list):
            if depth > limits.max_depth:
                raise JobRefused(
                    field=path,
                    value="<nested deeper>",
                    slug="input-too-deep",
                    reason=f"nested more than {limits.max_depth} levels",
                    hint="flatten the value, or raise [submit] max_input_depth",
                )
            children = value.items() if isinstance(value, Mapping) else enumerate(value)
            for key, child in children:
                if isinstance(value, Mapping) and not isinstance(key, str):
                    raise JobRefused(
                        field=path,
                        value=_show(key),
                        slug=f"{name}-invalid",
                        reason="object keys must be strings",
                        hint="use JSON objects only",
                    )
                stack.append(
                    (
                        f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]",
                        child,
                        depth + 1,
                    )
                )
        else:
            _check_scalar(name, path, value)


def _check_scalar(name: str, path: str, value: Any) -> None:
    if value is None or isinstance(value, bool | int | str):
        if isinstance(value, str) and not _encodable(value):
            raise JobRefused(
                field=path,
                value="<lone surrogate>",
                slug=f"{name}-invalid",
                reason="strings must be valid Unicode",
                hint="send UTF-8 text",
            )
        return
    if isinstance(value, float):
        if math.isfinite(value):
            return
        reason = "numbers must be finite: JSON has no NaN or Infinity"
    else:
        reason = f"{type(value).__name__} is not a JSON value"
    raise JobRefused(
        field=path,
        value=_show(value),
        slug=f"{name}-invalid",
        reason=reason,
        hint="send only JSON values (objects, arrays, strings, numbers, booleans, null)",
    )


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_size(input: Mapping[str, Any], params: Mapping[str, Any], limits: DoorLimits) -> None:
    size = len(canonical_json({"input": input, "params": params}).encode("utf-8"))
    if size > limits.max_bytes:
        raise JobRefused(
            field="input",
            value=f"{size} bytes of JSON",
            slug="input-too-large",
            reason=f"input and params exceed {limits.max_bytes} bytes",
            hint="send less (a reference instead of the content), or raise "
            "[submit] max_input_bytes",
        )


def _check_params(runtime: TaskRuntime, params: Mapping[str, Any]) -> None:
    for key, value in sorted(params.items()):
        field = f"params.{key}"
        if key in FIXED_BY_CERTIFICATION:
            raise JobRefused(
                field=field,
                value=_show(value),
                slug="params-refused",
                reason="fixed by the contract's certification; a job may not "
                "change how a certified provider samples",
                hint="remove it (change the contract and certify it again instead)",
            )
        if key not in ALLOWED_PARAMS:
            raise JobRefused(
                field=field,
                value=_show(value),
                slug="params-refused",
                reason="not an accepted parameter",
                hint=f"params may hold only: {', '.join(sorted(ALLOWED_PARAMS))}",
            )
    if "max_tokens" in params:
        _check_max_tokens(runtime, params["max_tokens"])


def _check_max_tokens(runtime: TaskRuntime, value: Any) -> None:
    ceiling = runtime.contract.sampling.max_tokens if runtime.contract is not None else None
    valid = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    if valid and (ceiling is None or value <= ceiling):
        return
    limit = f"1 to {ceiling} (the contract's sampling.max_tokens)" if ceiling else "at least 1"
    raise JobRefused(
        field="params.max_tokens",
        value=_show(value),
        slug="params-refused",
        reason=f"must be a whole number from {limit}",
        hint="lower it or leave it out; more than the contract's is not certified",
    )


def _check_input(runtime: TaskRuntime, input: Mapping[str, Any]) -> None:
    if runtime.contract is None:
        return
    from jobrouter.contracts import validate_input

    problems = validate_input(runtime.contract, input)
    if problems:
        where, _, what = problems[0].partition(": ")
        field = "input" if where in ("$", "") else f"input.{where}"
        raise JobRefused(
            field=field,
            value=_show(_at(input, where)),
            slug="input-invalid",
            reason=f"does not match the input_schema of contract {runtime.contract.name!r}: {what}",
            hint="fix the input to fit the contract's input_schema",
            errors=problems,
        )


def _at(root: Any, dotted: str) -> Any:
    value = root
    for part in [p for p in dotted.split(".") if p and p != "$"]:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return "<missing>"
    return value


def _show(value: Any) -> str:
    try:
        text = canonical_json(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 3] + "..."
