"""The contract model: what a task needs from any provider.

A contract is a frozen pydantic value, loaded from YAML (`jobrouter.contracts.loader`) or built in
code::

    Contract(
        name="caption", version=1, side_effects="none",
        prompt=Prompt(system="Answer with JSON only.", user="Product: {{ product.name }}"),
        output_schema={"type": "object", "required": ["text"]},
        checks=[MaxLengthCheck(path="text", value=280)],
        cases=[Case(name="tea", input={"product": {"name": "tea"}},
                    expect=[ContainsCheck(path="text", value="tea")])],
    )

Everything is validated when the value is built: unknown keys are refused, both schemas must be
valid Draft 2020-12 schemas, templates must parse, regexes must compile, case inputs must match
`input_schema`. Check specs are a union discriminated on `type` (see `CheckSpec`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import jinja2
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationInfo, field_validator

from jobrouter.contracts.paths import split_path

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _check_path(path: str) -> str:
    if any(not segment for segment in split_path(path)):
        raise ValueError(f"invalid dotted path {path!r} (empty segment)")
    return path


class _Check(_Frozen):
    """Common fields: `path` into the output (``$`` or ``""`` = whole output), a cosmetic `note`."""

    path: str = "$"
    note: str = ""

    @field_validator("path")
    @classmethod
    def _valid_path(cls, path: str) -> str:
        return _check_path(path)


class EqualsCheck(_Check):
    """The value at `path` equals `value` (JSON equality: 1 == 1.0, but true != 1)."""

    type: Literal["equals"] = "equals"
    value: JsonValue


class ContainsCheck(_Check):
    """A string contains `value` as a substring, or a list has `value` as an element."""

    type: Literal["contains"] = "contains"
    value: JsonValue
    ignore_case: bool = True


class OneOfCheck(_Check):
    """The value at `path` equals one of `values`."""

    type: Literal["one_of"] = "one_of"
    values: tuple[JsonValue, ...] = Field(min_length=1)
    ignore_case: bool = False


class MaxLengthCheck(_Check):
    """A string has at most `value` characters, or a list at most `value` items."""

    type: Literal["max_length"] = "max_length"
    value: int = Field(ge=0)


class NumberCheck(_Check):
    """A number (not a bool) within `tolerance` (absolute) of `value`."""

    type: Literal["number"] = "number"
    value: float
    tolerance: float = Field(default=0.0, ge=0)


class RegexCheck(_Check):
    """A string in which `pattern` is found (`re.search`; anchor with ^ and $ for a full match)."""

    type: Literal["regex"] = "regex"
    pattern: str
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from exc
        return pattern


class CallableCheck(_Check):
    """`function` (``pkg.mod:func``) called with the value; passes only if it returns True."""

    type: Literal["callable"] = "callable"
    function: str

    @field_validator("function")
    @classmethod
    def _import_path(cls, function: str) -> str:
        if not _CALLABLE.match(function):
            raise ValueError(f"expected an import path like 'pkg.mod:func', got {function!r}")
        return function


class IsNullCheck(_Check):
    """The value at `path` exists and is JSON null."""

    type: Literal["is_null"] = "is_null"


class NotNullCheck(_Check):
    """The value at `path` exists and is not JSON null."""

    type: Literal["not_null"] = "not_null"


CheckSpec = Annotated[
    EqualsCheck
    | ContainsCheck
    | OneOfCheck
    | MaxLengthCheck
    | NumberCheck
    | RegexCheck
    | CallableCheck
    | IsNullCheck
    | NotNullCheck,
    Field(discriminator="type"),
]


def _parse_template(source: str) -> str:
    try:
        jinja2.Environment(autoescape=False).parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"template syntax error at line {exc.lineno}: {exc.message}") from exc
    return source


class ExampleMessage(_Frozen):
    """A few-shot message placed between the system prompt and the user prompt (a template too)."""

    role: Literal["user", "assistant"]
    content: str

    @field_validator("content")
    @classmethod
    def _parses(cls, content: str) -> str:
        return _parse_template(content)


class Prompt(_Frozen):
    """Jinja2 templates rendered with the job input as variables."""

    system: str | None = None
    user: str = Field(min_length=1)
    examples: tuple[ExampleMessage, ...] = ()

    @field_validator("system", "user")
    @classmethod
    def _parses(cls, source: str | None) -> str | None:
        return None if source is None else _parse_template(source)


class Sampling(_Frozen):
    """How the provider is called, and how many runs must agree during certification.

    A case passes agreement when the share of `repeats` runs that agree with the most common
    value of `agree_on` (all paths together; empty = the whole output) reaches `min_agreement`,
    compared in whole percent, so 0.67 accepts two runs out of three.
    """

    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int = Field(default=256, gt=0)
    repeats: int = Field(default=3, ge=1, le=50)
    min_agreement: float = Field(default=0.67, ge=0, le=1)
    agree_on: tuple[str, ...] = ()

    @field_validator("agree_on")
    @classmethod
    def _valid_paths(cls, paths: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_check_path(path) for path in paths)


class Case(_Frozen):
    """A golden input and what any certified provider's output must satisfy for it."""

    name: str = Field(pattern=_NAME)
    input: dict[str, JsonValue]
    expect: tuple[CheckSpec, ...] = ()
    note: str = ""


def _check_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    if schema is None:
        return None
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = ".".join(str(part) for part in exc.path) or "(root)"
        raise ValueError(f"not a valid Draft 2020-12 schema at {where}: {exc.message}") from exc
    return schema


class Contract(_Frozen):
    """What a task needs from any provider; see the module docstring."""

    name: str = Field(pattern=_NAME)
    version: int = Field(ge=1)
    description: str = ""
    side_effects: Literal["none", "external"]
    prompt: Prompt
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any]
    sampling: Sampling = Sampling()
    checks: tuple[CheckSpec, ...] = ()
    cases: tuple[Case, ...] = ()

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        return _check_schema(schema)

    @field_validator("cases")
    @classmethod
    def _valid_cases(cls, cases: tuple[Case, ...], info: ValidationInfo) -> tuple[Case, ...]:
        seen: set[str] = set()
        for case in cases:
            if case.name in seen:
                raise ValueError(f"duplicate case name {case.name!r}")
            seen.add(case.name)
        schema = info.data.get("input_schema")
        if schema is not None:
            validator = Draft202012Validator(schema)
            for case in cases:
                error = next(iter(validator.iter_errors(case.input)), None)
                if error is not None:
                    raise ValueError(
                        f"case {case.name!r}: input does not match input_schema: {error.message}"
                    )
        return cases

    def case(self, name: str) -> Case:
        """The case called `name` (KeyError if there is none)."""
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(name)
