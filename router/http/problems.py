"""Errors as `application/problem+json` (RFC 9457): every error answer says what to fix.

Domain errors are translated once, here, by the `status` and `slug` each carries
(jobrouter.errors): the routes raise them (or `ProblemError` for checks of their own) and never
build error answers by hand, and nothing here asks an error its type.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from jobrouter.errors import (
    AttemptNotFound,
    BudgetExhausted,
    InvalidIdempotencyKey,
    InvalidText,
    JobNotFound,
    JobRouterError,
    StoreError,
    UnknownTask,
)
from jobrouter.identity import MAX_KEY_LENGTH

log = logging.getLogger("jobrouter.http")

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:jobrouter:problem:"
KEY_HEADER = "Idempotency-Key"
KEY_LOCATION = ("header", KEY_HEADER)
KEY_MAX_LENGTH = MAX_KEY_LENGTH  # the domain's rule (jobrouter.identity), documented here
KEY_MISSING = (
    "send an `Idempotency-Key` header: one key per intent (e.g. a UUID, or derived from your "
    "order id), the same on every retry of that intent"
)
KEY_INVALID = (
    f"the `Idempotency-Key` header must be 1 to {KEY_MAX_LENGTH} characters, not only spaces"
)


class Problem(BaseModel):
    """An error answer (RFC 9457). `type` names the kind of problem; `detail` says what to fix.
    Some problems add members: `errors` (what is invalid, where), `job_id`."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=[TYPE_PREFIX + "idempotency-key-missing"])
    title: str
    status: int
    detail: str
    instance: str | None = None


class ProblemError(Exception):
    """Raised by a route to answer with a problem."""

    def __init__(
        self,
        status: int,
        slug: str,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.detail = detail
        self.headers = headers or {}
        self.extensions = extensions


def problem_response(
    request: Request,
    status: int,
    slug: str,
    detail: str,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + slug,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
        **extensions,
    }
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the problems a route can answer with."""
    return {
        status: {
            "description": HTTPStatus(status).phrase,
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }


# ---- handlers -----------------------------------------------------------------------------------


async def _problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ProblemError)
    return problem_response(
        request, exc.status, exc.slug, exc.detail, exc.headers, **exc.extensions
    )


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    raw = list(exc.errors())
    if any(tuple(error.get("loc", ())) == KEY_LOCATION for error in raw):
        return _key_problem(request, raw)
    errors = [
        {"where": ".".join(str(part) for part in error.get("loc", ())), "problem": error["msg"]}
        for error in raw
    ]
    first = errors[0] if errors else {"where": "request", "problem": "invalid"}
    detail = f"{first['where']}: {first['problem']}"
    if len(errors) > 1:
        detail += f" (and {len(errors) - 1} more; see errors)"
    return problem_response(request, 422, "request-invalid", detail, errors=errors)


def _key_problem(request: Request, errors: list[Any]) -> JSONResponse:
    """The Idempotency-Key header is missing or malformed: 400, as the IETF draft says."""
    missing = any(
        error.get("type") == "missing"
        for error in errors
        if tuple(error.get("loc", ())) == KEY_LOCATION
    )
    if missing:
        return problem_response(request, 400, "idempotency-key-missing", KEY_MISSING)
    return problem_response(request, 400, "idempotency-key-invalid", KEY_INVALID)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    slug = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "-")
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
    if exc.status_code == 404:
        detail = f"no route {request.url.path}; see /docs for the API"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        allowed = _allowed_methods(request)
        headers["Allow"] = ", ".join(allowed)
        detail = f"{request.method} is not allowed on {request.url.path}; use {headers['Allow']}"
    return problem_response(request, exc.status_code, slug, detail, headers)


def _allowed_methods(request: Request) -> list[str]:
    """Every method of every route on this path (Starlette names only the first route's)."""
    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, APIRoute) and route.matches(request.scope)[0] is not Match.NONE:
            methods.update(route.methods or ())
    return sorted(methods)


# ---- domain errors: by the status and slug each carries ---------------------------------------

INTERNAL = (
    "the server failed unexpectedly; retry with the same Idempotency-Key, and report it if it "
    "persists"
)

# The details HTTP words itself (the route to call next, no database name), by the slugs the
# errors carry; any other error's detail is its own message.
_DETAILS: dict[str, Callable[[Any], str]] = {
    JobNotFound.slug: lambda exc: f"no job {exc.job_id} for this token's owner; check the id",
    AttemptNotFound.slug: lambda exc: (
        f"no attempt {exc.attempt_id}; list them with GET /v1/jobs/{{id}}/attempts"
    ),
    UnknownTask.slug: lambda exc: (
        f"no task {exc.task!r}; configured tasks: {', '.join(exc.known) or 'none'}"
    ),
    InvalidIdempotencyKey.slug: lambda exc: f"the `{KEY_HEADER}` header {exc.reason}",
    InvalidText.slug: lambda exc: f"{exc.field} {exc.reason}",
    StoreError.broken_slug: lambda _: (
        "the job store cannot be used until an operator repairs it; see the server log"
    ),
    StoreError.slug: lambda _: (
        "the job store is unavailable; retry later with the same Idempotency-Key"
    ),
    JobRouterError.slug: lambda _: INTERNAL,
}
# When the client may try again: a budget's period ends, a store comes back.
_RETRY_AFTER: dict[str, Callable[[Any], str]] = {
    BudgetExhausted.slug: lambda exc: str(math.ceil(exc.retry_after)),
    StoreError.slug: lambda _: "1",  # RouterClosed's too: the same slug
}


@dataclass(frozen=True)
class DomainProblem:
    """What a domain error answers: read from the error's own `status`, `slug` and
    `members`, worded by the tables above."""

    status: int
    slug: str
    detail: str
    headers: dict[str, str]
    members: dict[str, Any]


def domain_problem(exc: JobRouterError) -> DomainProblem:
    retry_after = _RETRY_AFTER.get(exc.slug)
    return DomainProblem(
        status=exc.status,
        slug=exc.slug,
        detail=_DETAILS.get(exc.slug, str)(exc),
        headers={"Retry-After": retry_after(exc)} if retry_after else {},
        members={name: getattr(exc, name) for name in exc.members},
    )


async def _domain_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, JobRouterError)
    answer = domain_problem(exc)
    if answer.slug == JobRouterError.slug:  # an error no caller should meet: the trace is for us
        log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    elif answer.status >= 500:  # the detail is in the log only: it names the database
        log.error("service unavailable: %s", exc)
    return problem_response(
        request, answer.status, answer.slug, answer.detail, answer.headers, **answer.members
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    """Not a domain error: a body nested past Python's recursion limit, or a bug (a 500 that
    says only that)."""
    if isinstance(exc, RecursionError):
        return problem_response(
            request, 422, "request-invalid", "the JSON body is nested too deeply"
        )
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(request, 500, "internal", INTERNAL)


def install(app: FastAPI) -> None:
    app.add_exception_handler(ProblemError, _problem)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(JobRouterError, _domain_error)
    app.add_exception_handler(RecursionError, _unexpected)
    app.add_exception_handler(Exception, _unexpected)
