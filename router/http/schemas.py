"""The request and response bodies of the HTTP API (what the OpenAPI document shows)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Literal

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobrouter.disclosure import disclose
from jobrouter.models import Attempt, Job
from jobrouter.states import JobState


def _json_problem(value: Any) -> str | None:
    """What keeps a parsed body from being stored and sent back as JSON: NaN or Infinity
    (Python's parser accepts them, JSON has none) and lone surrogates (not UTF-8)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "numbers must be finite: JSON has no NaN or Infinity"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "strings must be valid Unicode (a lone surrogate escape was sent)"
        return None
    items: list[Any] = []
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    for item in items:
        problem = _json_problem(item)
        if problem:
            return problem
    return None


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _storable_json(self) -> _Body:
        problem = _json_problem(self.model_dump())
        if problem:
            raise ValueError(problem)
        return self


class SubmitJob(_Body):
    """One intent. Send it with an `Idempotency-Key` header that is the same on every retry."""

    task: str = Field(min_length=1, max_length=200, description="a task of the router's config")
    input: dict[str, Any] = Field(description="checked against the task contract's input_schema")
    params: dict[str, Any] = Field(default_factory=dict, description="extra parameters")


class CancelJob(_Body):
    reason: str = Field(default="cancelled by the owner", max_length=1000)


class ResolveAttempt(_Body):
    """What became of an `unknown` attempt, found out of band (e.g. the post is online)."""

    outcome: Literal["succeeded", "failed", "cancelled"]
    result: Any = Field(
        default=None,
        description="the attempt's output; required with succeeded (422 `resolution-invalid` "
        "naming `result` without it, or when the task's contract refuses it)",
    )
    note: str = Field(
        default="",
        max_length=1000,
        description="what was checked; kept with who resolved (the token's id) on the attempt "
        "and in the job's events",
    )


ERROR = (
    "why the job (or attempt) did not succeed, in the router's own words: what the "
    "outcome proves (not sent, rejected, unknown), the provider's name, the HTTP status "
    "where one came back. Never the provider's text: that is `error_detail`"
)
ERROR_DETAIL = (
    "the raw detail behind `error` (what the provider said, credentials scrubbed), "
    "for operator tokens only: null for an owner's token, and when `error` is all "
    "there is"
)


class JobResource(BaseModel):
    id: str
    owner: str
    idempotency_key: str
    fingerprint: str = Field(description="sha256 of the canonical task + input + params")
    task: str
    input: dict[str, Any]
    params: dict[str, Any]
    state: JobState
    terminal: bool = Field(description="the state never changes again")
    needs_attention: bool = Field(description="an attempt's outcome is unknown: resolve or cancel")
    version: int
    winner_attempt_id: str | None
    result: Any
    error: str | None = Field(description=ERROR)
    error_detail: str | None = Field(description=ERROR_DETAIL)
    created_at: datetime
    updated_at: datetime
    deadline_at: datetime | None
    url: str

    @staticmethod
    def body(job: Job, url: str, *, operator: bool) -> dict[str, Any]:
        """The resource as JSON-ready data (see `plain`), without a pydantic round trip, as an
        operator or the job's owner may see it (`jobrouter.disclosure`)."""
        return plain(
            disclose(job, operator=operator),
            terminal=job.state.terminal,
            needs_attention=job.state.needs_attention,
            url=url,
        )


# Free-form JSON (a job's input, params and result, an attempt's output, an event's data) is
# serialized by the standard library's encoder, not pydantic's: pydantic-core stops at a fixed
# depth ("Maximum serialization depth exceeded"), below what `json` accepts, and data that was
# accepted and stored must always read back (before issue 14 every answer about a job whose
# input nested ~300 levels was a 500). What the door accepts is decided at submit.
FREE_JSON = frozenset({"input", "params", "result", "output", "data"})


def plain(model: BaseModel, **extra: Any) -> dict[str, Any]:
    """`model.model_dump(mode="json")`, its free-form JSON fields copied as they are."""
    free = FREE_JSON & type(model).model_fields.keys()
    data = model.model_dump(mode="json", exclude=set(free))
    data.update({name: getattr(model, name) for name in free})
    data.update(extra)
    return data


def json_answer(
    content: Any, status_code: int = 200, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An answer whose body is encoded by `json` (see FREE_JSON)."""
    return JSONResponse(content, status_code=status_code, headers=headers)


class AttemptResource(Attempt):
    """An attempt as the HTTP API shows it (`jobrouter.disclosure`)."""

    error: str | None = Field(default=None, description=ERROR)
    error_detail: str | None = Field(default=None, description=ERROR_DETAIL)
    output: Any = Field(
        default=None,
        description="the answer: the winning attempt's result; an "
        "answer that did not win (kept for whoever resolves the attempt) is "
        "shown to operator tokens only",
    )
    resolved_by: str | None = Field(
        default=None,
        description="who resolved this attempt once `unknown`: `token:ID` (HTTP, console) or "
        "`user:NAME` (CLI, Python); null when nobody resolved it",
    )
    resolution_note: str | None = Field(
        default=None, description="what the operator who resolved it checked"
    )
    cost_usd: float | None = Field(
        default=None,
        description="what the call cost, USD; null: unknown (never 0 for unknown), see "
        "`cost_unknown`",
    )
    cost_source: str | None = Field(
        default=None,
        description="where the price came from: `config` (the provider's configured price) or "
        "`litellm_map` (litellm's cost map as shipped)",
    )
    cost_unknown: str | None = Field(
        default=None, description="why the cost is unknown (no price for the model, no usage)"
    )

    @staticmethod
    def body(attempt: Attempt, *, operator: bool) -> dict[str, Any]:
        return plain(disclose(attempt, operator=operator))


class AttemptList(BaseModel):
    items: list[AttemptResource]


class Status(BaseModel):
    status: Literal["ok", "ready"]
    detail: str = ""
    leader: str | None = Field(
        default=None,
        description="worker id of the process that runs "
        "the periodic work (readiness only; null: none at the moment)",
    )
