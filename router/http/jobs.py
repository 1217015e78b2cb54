"""The job routes: submit (idempotent), read, find by key, attempts, cancel, resolve, events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Header, Query, Request, Response
from fastapi.responses import StreamingResponse

from jobrouter.api import Router
from jobrouter.http.auth import Caller, Operator, Principal, RouterDep
from jobrouter.http.feeds import CountedStream, JobFeeds
from jobrouter.http.openapi import SSE_EVENT
from jobrouter.http.problems import (
    KEY_HEADER,
    KEY_INVALID,
    KEY_MAX_LENGTH,
    ProblemError,
    documented,
)
from jobrouter.http.schemas import (
    AttemptList,
    AttemptResource,
    CancelJob,
    JobResource,
    ResolveAttempt,
    SubmitJob,
    json_answer,
)
from jobrouter.http.sse import HEADERS, event_stream
from jobrouter.models import Job
from jobrouter.resolution import by_token

routes = APIRouter(prefix="/v1", tags=["jobs"])

REPLAY_HEADER = "Idempotency-Replayed"
MAX_SEQ = 2**63 - 1  # event seqs are 64-bit database integers
KeyHeader = Annotated[
    str,
    Header(
        alias=KEY_HEADER,
        # Documented, not checked here: the domain checks the key (jobrouter.identity), and
        # its InvalidIdempotencyKey answers the same 400.
        json_schema_extra={"minLength": 1, "maxLength": KEY_MAX_LENGTH},
        description="One key per intent, the same on every retry (e.g. derived from your order "
        "id); scoped to the token's owner. Missing or malformed: 400.",
    ),
]
SUBMIT_HEADERS = {
    "Location": {"description": "the job's URL", "schema": {"type": "string"}},
    REPLAY_HEADER: {
        "description": "`true` when the key was already used with this payload: "
        "the job is the one created then",
        "schema": {"type": "string"},
    },
}
_JOB_ID = {"job_id": "$response.body#/id"}
JOB_LINKS = {  # OpenAPI links: where a client (or a stateful API fuzzer) goes next
    "GetJob": {"operationId": "get_job", "parameters": _JOB_ID},
    "ListAttempts": {"operationId": "list_attempts", "parameters": _JOB_ID},
    "JobEvents": {"operationId": "job_events", "parameters": _JOB_ID},
    "CancelJob": {"operationId": "cancel_job", "parameters": _JOB_ID},
    "FindJob": {
        "operationId": "find_jobs",
        "parameters": {"idempotency_key": "$response.body#/idempotency_key"},
    },
}


@routes.post(
    "/jobs",
    status_code=202,
    response_model=JobResource,
    name="submit_job",
    operation_id="submit_job",
    summary="Submit a job once per Idempotency-Key",
    responses={
        202: {
            "description": "accepted, or the same job again on a replay",
            "headers": SUBMIT_HEADERS,
            "links": JOB_LINKS,
        },
        **documented(400, 401, 413, 422, 503),
    },
)
async def submit_job(
    body: SubmitJob,
    idempotency_key: KeyHeader,
    request: Request,
    router: RouterDep,
    caller: Caller,
) -> Response:
    """Accept a job. The same key with the same payload answers the same job (in flight or
    finished) with `Idempotency-Replayed: true`; the same key with another payload is refused
    (422). The door refuses bad work before a job is created (422 naming the field): input
    against the task's contract, params, nesting depth and size."""
    key = _checked_key(idempotency_key)
    router.check_submit(caller.owner, key, body.task)  # a bad key first, then the task
    job = await router.submit(caller.owner, key, body.task, body.input, body.params)
    url = str(request.url_for("get_job", job_id=job.id))
    headers = {"Location": url} if job.created else {"Location": url, REPLAY_HEADER: "true"}
    return json_answer(JobResource.body(job, url, operator=caller.operator), 202, headers)


@routes.get(
    "/jobs/{job_id}",
    response_model=JobResource,
    name="get_job",
    operation_id="get_job",
    summary="Read a job",
    responses=documented(401, 404, 422, 503),
)
async def get_job(job_id: str, request: Request, router: RouterDep, caller: Caller) -> Response:
    return _resource(request, caller, await _visible_job(router, caller, job_id))


@routes.get(
    "/jobs/{job_id}/attempts",
    response_model=AttemptList,
    name="list_attempts",
    operation_id="list_attempts",
    summary="The attempts of a job, in order",
    responses={
        200: {
            "links": {
                "ResolveAttempt": {
                    "operationId": "resolve_attempt",
                    "parameters": {"attempt_id": "$response.body#/items/0/id"},
                }
            }
        },
        **documented(401, 404, 422, 503),
    },
)
async def list_attempts(job_id: str, router: RouterDep, caller: Caller) -> Response:
    await _visible_job(router, caller, job_id)
    return json_answer(
        {
            "items": [
                AttemptResource.body(attempt, operator=caller.operator)
                for attempt in await router.attempts(job_id)
            ]
        }
    )


@routes.post(
    "/jobs/{job_id}/cancel",
    response_model=JobResource,
    name="cancel_job",
    operation_id="cancel_job",
    summary="Cancel a job",
    responses=documented(400, 401, 404, 409, 413, 422, 503),
)
async def cancel_job(
    job_id: str,
    request: Request,
    router: RouterDep,
    caller: Caller,
    body: Annotated[CancelJob | None, Body()] = None,
) -> Response:
    """Cancel a job that has not finished (cancelling a cancelled job answers it again; a
    succeeded or failed job cannot be cancelled: 409)."""
    await _visible_job(router, caller, job_id)
    job = await router.cancel(job_id, (body or CancelJob()).reason)
    return _resource(request, caller, job)


@routes.post(
    "/attempts/{attempt_id}/resolve",
    response_model=JobResource,
    name="resolve_attempt",
    operation_id="resolve_attempt",
    summary="Say what became of an unknown attempt (operators)",
    responses=documented(400, 401, 403, 404, 409, 413, 422, 503),
)
async def resolve_attempt(
    attempt_id: str, body: ResolveAttempt, request: Request, router: RouterDep, op: Operator
) -> Response:
    job = await router.resolve(  # AttemptNotFound (404) for no such attempt
        attempt_id, body.outcome, body.result, body.note, by=by_token(op.token_id)
    )
    return _resource(request, op, job)


@routes.get(
    "/jobs/{job_id}/events",
    name="job_events",
    operation_id="job_events",
    response_class=StreamingResponse,
    summary="Server-sent events of a job, until it settles",
    responses={
        200: {
            "description": "`text/event-stream`: `id` is the event's seq, `event` its "
            "kind, `data` the event as JSON; ends after the event that settles the job, or "
            "with a last `stream-ended` event (no `id`; `data`: reason `token-revoked` or "
            "`token-expired`, detail) within a heartbeat of the token's revocation or expiry",
            "content": {"text/event-stream": {"schema": SSE_EVENT}},
        },
        **documented(401, 404, 422, 429, 503),
    },
)
async def job_events(
    job_id: str,
    request: Request,
    router: RouterDep,
    caller: Caller,
    last_event_id: Annotated[int | None, Header(alias="Last-Event-ID", ge=0, le=MAX_SEQ)] = None,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ, description="start after this seq")] = 0,
) -> StreamingResponse:
    """Resume with `Last-Event-ID` (or `after`): every later event exactly once, in order."""
    await _visible_job(router, caller, job_id)
    start = last_event_id if last_event_id is not None else after
    heartbeat: float = request.app.state.http.heartbeat
    feeds: JobFeeds = request.app.state.feeds
    release = feeds.admit(caller.token_id)
    if release is None:
        raise ProblemError(
            429,
            "too-many-streams",
            f"this token has "
            f"{feeds.max_streams_per_token} event streams open, the most it may; "
            "close one, or follow jobs with GET /v1/jobs/{id}",
            headers={"Retry-After": "5"},
        )
    return CountedStream(
        event_stream(feeds, job_id, start, heartbeat, router.token_status, caller.token_id),
        release=release,
        media_type="text/event-stream",
        headers=HEADERS,
    )


# ---- helpers ------------------------------------------------------------------------------------


def _checked_key(key: str) -> str:
    """Presence is checked with the request (a 400 from the validation handler), the length
    by the domain; a key of only spaces is refused by HTTP alone: HTTP trims a header's
    surrounding whitespace (RFC 9110), so such a key cannot arrive as it was sent."""
    if not key.strip():
        raise ProblemError(400, "idempotency-key-invalid", KEY_INVALID)
    return key


async def _visible_job(router: Router, caller: Principal, job_id: str) -> Job:
    """The job if the caller may see it; another owner's job is reported missing, not
    forbidden, so ids of other owners cannot be probed."""
    return await router.visible_job(job_id, to=None if caller.operator else caller.owner)


def _resource(request: Request, caller: Principal, job: Job) -> Response:
    url = str(request.url_for("get_job", job_id=job.id))
    return json_answer(JobResource.body(job, url, operator=caller.operator))
