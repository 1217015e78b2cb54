"""Structured output: how a JSON schema is asked for, and how the answer is checked.

Asking, per `ProviderConfig.structured_output`:
    json_schema         response_format={"type": "json_schema", "json_schema":
                        {"name": "output", "schema": S, "strict": True}}   (OpenAI and most hosted)
    json_object_schema  response_format={"type": "json_object", "schema": S}
                        (what llama-cpp-python's server accepts; it refuses json_schema with a 500)
    none                no response_format; the schema is appended to the system message as an
                        instruction (to the last user message when the chat format has no system
                        role, since the server would drop a system message)

Checking: the answer is stripped of a ```json fence, parsed with json.loads and validated with
jsonschema Draft 2020-12. Either failure is `InvalidOutput` (a `Rejected`) naming the check that
failed (``json`` or ``schema``), with what was wrong: the provider did answer, and the answer is
not usable.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from jobrouter.providers.base import Message
from jobrouter.providers.config import StructuredOutput
from jobrouter.providers.errors import InvalidOutput
from jobrouter.providers.simple_schema import Check, compile_simple

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*[ \t]*\r?\n?(.*?)\r?\n?```\s*$", re.DOTALL)
_VALIDATORS: dict[str, Any] = {}
# The same schema object comes with every request of a contract: found by identity first, so
# a job does not pay for encoding its schema as the key (the entry keeps the schema alive,
# so its id is not reused). A schema is a contract's and never changed in place.
_BY_IDENTITY: dict[int, tuple[dict[str, Any], Any]] = {}
_SIMPLE: dict[int, tuple[dict[str, Any], Check | None]] = {}
_MAX_VALIDATORS = 256


def schema_instruction(schema: dict[str, Any]) -> str:
    return (
        "Answer with JSON only, no prose and no code fence: one JSON value that is valid "
        "against this JSON Schema (Draft 2020-12):\n"
        + json.dumps(schema, sort_keys=True, ensure_ascii=False)
    )


def response_format(mode: StructuredOutput, schema: dict[str, Any]) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": schema, "strict": True},
        }
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    return None


def with_instruction(
    messages: tuple[Message, ...], schema: dict[str, Any], system_role: bool
) -> tuple[Message, ...]:
    """`messages` with the schema instruction added (for structured_output="none")."""
    instruction = schema_instruction(schema)
    target_role = "system" if system_role else "user"
    indexes = [i for i, m in enumerate(messages) if m.role == target_role]
    if not indexes:
        if system_role:
            return (Message(role="system", content=instruction), *messages)
        return (*messages, Message(role="user", content=instruction))
    i = indexes[0] if system_role else indexes[-1]
    merged = Message(role=messages[i].role, content=f"{messages[i].content}\n\n{instruction}")
    return (*messages[:i], merged, *messages[i + 1 :])


def strip_fence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text


def _simple(schema: dict[str, Any]) -> Check | None:
    """The plain-keyword check of `schema` (None: it has other keywords), by identity as
    `_validator` finds validators."""
    known = _SIMPLE.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    _validator(schema)  # a broken schema is refused as before, by jsonschema's own check
    check = compile_simple(schema)
    if len(_SIMPLE) >= _MAX_VALIDATORS:
        _SIMPLE.clear()
    _SIMPLE[id(schema)] = (schema, check)
    return check


def _validator(schema: dict[str, Any]) -> Any:
    known = _BY_IDENTITY.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    validator = _validator_by_text(schema)
    if len(_BY_IDENTITY) >= _MAX_VALIDATORS:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(schema)] = (schema, validator)
    return validator


def _validator_by_text(schema: dict[str, Any]) -> Any:
    key = json.dumps(schema, sort_keys=True)
    validator = _VALIDATORS.get(key)
    if validator is None:
        Draft202012Validator.check_schema(schema)  # a broken schema is the caller's bug
        validator = Draft202012Validator(schema)
        if len(_VALIDATORS) >= _MAX_VALIDATORS:
            _VALIDATORS.clear()
        _VALIDATORS[key] = validator
    return validator


def parse_output(
    text: str,
    schema: dict[str, Any],
    *,
    provider: str,
    prompt_tokens: int | None = None,
    finish_reason: str | None = None,
) -> Any:
    """The answer's JSON value, valid against `schema`; `InvalidOutput` saying what is wrong
    (`prompt_tokens`, the answer's reported usage, and `finish_reason` travel with it)."""
    body = strip_fence(text).strip()
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        excerpt = body[:120] if body else "<empty answer>"
        raise InvalidOutput(
            f"answer is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
            f"{excerpt!r}",
            provider=provider,
            check="json",
            text=text,
            prompt_tokens=prompt_tokens,
            finish_reason=finish_reason,
        ) from exc
    quick = _simple(schema)
    if quick is not None and quick(value):
        return value  # a yes of the plain-keyword check is jsonschema's (simple_schema.py)
    error = best_match(_validator(schema).iter_errors(value))
    if error is not None:
        raise InvalidOutput(
            f"answer does not match the output schema at {error.json_path}: {error.message}"[:500],
            provider=provider,
            check="schema",
            text=text,
            prompt_tokens=prompt_tokens,
            finish_reason=finish_reason,
        )
    return value
