"""Render a contract's prompt for one input, in a sandbox, and build the provider request.

Templates are Jinja2 run in `ImmutableSandboxedEnvironment` (no attribute tricks, no mutation of
the input) with `StrictUndefined`: a variable missing from the input is a `RenderError` naming
the template and the variable, never an empty string in the prompt. Autoescape is off (this is
not HTML). Each contract's templates are compiled once and kept for the life of the contract
value, since rendering is on the router's hot path.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import jinja2
from jinja2.exceptions import SecurityError, TemplateRuntimeError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import missing

from jobrouter.contracts.errors import RenderError
from jobrouter.contracts.memo import derived
from jobrouter.contracts.model import Contract
from jobrouter.providers.base import CompletionRequest, Message, Role


class _MissingVariable(jinja2.UndefinedError):
    def __init__(self, message: str | None = None, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


class _StrictUndefined(jinja2.StrictUndefined):
    """StrictUndefined whose error also carries the undefined name.

    Only plain undefined errors are replaced; the sandbox passes its own `SecurityError` as `exc`.
    """

    __slots__ = ()

    def __init__(
        self,
        hint: str | None = None,
        obj: Any = missing,
        name: str | None = None,
        exc: type[TemplateRuntimeError] = jinja2.UndefinedError,
    ) -> None:
        if exc is jinja2.UndefinedError:
            exc = cast(type[TemplateRuntimeError], functools.partial(_MissingVariable, name=name))
        super().__init__(hint, obj, name, exc)


_ENV = ImmutableSandboxedEnvironment(
    undefined=_StrictUndefined, autoescape=False, keep_trailing_newline=False
)

# What a template may raise at render time besides undefined variables.
_RENDER_FAILURES = (jinja2.TemplateError, TypeError, ValueError, ArithmeticError, LookupError)


@dataclass(frozen=True)
class _Part:
    role: Role
    label: str  # "system", "user", "examples[0]"
    template: jinja2.Template
    fixed: str | None  # the text of a template without Jinja syntax, rendered once


def _part(role: Role, label: str, source: str) -> _Part:
    """A compiled template. One without any Jinja syntax (a system prompt, most examples)
    renders the same for every input: its text is kept, and no job renders it again."""
    template = _ENV.from_string(source)
    delimiters = (
        _ENV.block_start_string,
        _ENV.variable_start_string,
        _ENV.comment_start_string,
        *(p for p in (_ENV.line_statement_prefix, _ENV.line_comment_prefix) if p),
    )
    fixed = None if any(d in source for d in delimiters) else template.render({})
    return _Part(role, label, template, fixed)


def _compile(contract: Contract) -> tuple[_Part, ...]:
    prompt = contract.prompt
    parts: list[_Part] = []
    if prompt.system is not None:
        parts.append(_part("system", "system", prompt.system))
    for index, example in enumerate(prompt.examples):
        parts.append(_part(example.role, f"examples[{index}]", example.content))
    parts.append(_part("user", "user", prompt.user))
    return tuple(parts)


def _render_part(contract: Contract, part: _Part, variables: Mapping[str, Any]) -> str:
    if part.fixed is not None:
        return part.fixed
    try:
        return part.template.render(variables)
    except _MissingVariable as exc:
        raise RenderError(
            f"undefined variable {exc.name!r} ({exc.message})",
            contract=contract.name,
            template=part.label,
            variable=exc.name,
        ) from exc
    except SecurityError as exc:
        raise RenderError(
            f"refused by the sandbox: {exc}", contract=contract.name, template=part.label
        ) from exc
    except _RENDER_FAILURES as exc:
        raise RenderError(
            f"{type(exc).__name__}: {exc}", contract=contract.name, template=part.label
        ) from exc


def render_messages(contract: Contract, input: Mapping[str, Any]) -> tuple[Message, ...]:
    """The chat messages for `input`: system (if any), few-shot examples, then user.

    Raises `RenderError` when a template needs a variable that `input` lacks, or fails otherwise.
    """
    parts = derived(contract, "render.parts", lambda: _compile(contract))
    return tuple(
        Message(role=part.role, content=_render_part(contract, part, input)) for part in parts
    )


def build_request(
    contract: Contract,
    input: Mapping[str, Any],
    *,
    params: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    labels: Mapping[str, str] | None = None,
) -> CompletionRequest:
    """A `CompletionRequest` for `input`: rendered messages, the output schema, and sampling.

    `temperature` and `max_tokens` come from the contract's sampling unless `params` sets them;
    other keys of `params` are not read here. `labels` are added to the contract's own labels.
    """
    params = params or {}
    sampling = contract.sampling
    return CompletionRequest(
        messages=render_messages(contract, input),
        output_schema=contract.output_schema,
        temperature=params.get("temperature", sampling.temperature),
        max_tokens=params.get("max_tokens", sampling.max_tokens),
        timeout=timeout,
        labels={
            "contract": contract.name,
            "contract_version": str(contract.version),
            **(labels or {}),
        },
    )
