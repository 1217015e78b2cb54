"""`GET /v1/jobs`: list jobs with filters and keyset pages (or find the job of one idempotency
key), and `GET /v1/jobs/counts`: how many jobs are in each state. The dashboard reads the same
filters through `job_filter`, so an owner token can never widen its view on either edge."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field

from jobrouter.errors import ListingError
from jobrouter.http.auth import Caller, Principal, RouterDep
from jobrouter.http.problems import KEY_MAX_LENGTH, ProblemError, documented
from jobrouter.http.schemas import JobResource, json_answer
from jobrouter.listing import DEFAULT_PAGE, MAX_PAGE, JobFilter, checked_cursor
from jobrouter.models import Job
from jobrouter.states import JobState

routes = APIRouter(prefix="/v1", tags=["jobs"])

StateQ = Annotated[JobState | None, Query(description="only jobs in this state")]
AttentionQ = Annotated[bool, Query(description="only jobs that wait for a person (`unknown`)")]
TaskQ = Annotated[str | None, Query(max_length=200, description="only jobs of this task")]
ProviderQ = Annotated[
    str | None, Query(max_length=200, description="only jobs with an attempt on this provider")
]
AfterQ = Annotated[
    datetime | None,
    Query(description="created at or after (ISO 8601; UTC when no offset is given)"),
]
BeforeQ = Annotated[datetime | None, Query(description="created before (ISO 8601)")]
OwnerQ = Annotated[
    str | None,
    Query(
        max_length=200,
        description="operator tokens: only this owner's jobs (default: every "
        "owner). An owner token always sees its own jobs only.",
    ),
]


class JobPageResource(BaseModel):
    items: list[JobResource]
    next_cursor: str | None = Field(
        default=None, description="pass as `cursor` for the next page; absent on the last page"
    )
    next: str | None = Field(default=None, description="the next page's URL")


class JobCounts(BaseModel):
    counts: dict[JobState, int] = Field(description="jobs in each state (every state listed)")
    total: int


def _epoch(moment: datetime | None) -> float | None:
    if moment is None:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def job_filter(
    caller: Principal,
    *,
    owner: str | None,
    state: JobState | None,
    needs_attention: bool,
    task: str | None,
    provider: str | None,
    created_after: datetime | None,
    created_before: datetime | None,
) -> JobFilter:
    """The filter a caller may ask for: an owner token is held to its own jobs, and naming
    another owner is refused rather than silently narrowed."""
    if not caller.operator:
        if owner not in (None, caller.owner):
            raise ProblemError(
                403,
                "operator-only",
                "only an operator token may list the jobs "
                "of another owner; leave `owner` out to list your own",
            )
        owner = caller.owner
    return JobFilter.of(
        owner=owner or None,
        state=state,
        needs_attention=needs_attention,
        task=task or None,
        provider=provider or None,
        created_after=_epoch(created_after),
        created_before=_epoch(created_before),
    )


@routes.get(
    "/jobs",
    response_model=JobPageResource,
    name="find_jobs",
    operation_id="find_jobs",
    summary="List jobs (newest first, filtered, paged) or find the job of a key",
    responses=documented(401, 403, 422, 503),
)
async def list_jobs(
    request: Request,
    router: RouterDep,
    caller: Caller,
    idempotency_key: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=KEY_MAX_LENGTH,
            description="the caller's job for this key (a list of one, or empty): how to learn "
            "what became of a submit whose answer never arrived; no other filter goes with it",
        ),
    ] = None,
    state: StateQ = None,
    needs_attention: AttentionQ = False,
    task: TaskQ = None,
    provider: ProviderQ = None,
    created_after: AfterQ = None,
    created_before: BeforeQ = None,
    owner: OwnerQ = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="jobs per page")] = DEFAULT_PAGE,
    cursor: Annotated[
        str | None, Query(max_length=64, description="`next_cursor` of the previous page")
    ] = None,
) -> Response:
    """Pages are keyset pages on the time-ordered job id: as fast deep in a million jobs as on
    the first page, and a job created meanwhile never shifts a page."""
    if idempotency_key is not None:
        if request.query_params.keys() - {"idempotency_key"}:
            raise ProblemError(
                422,
                "listing-invalid",
                "`idempotency_key` finds one job; send it alone, without other filters",
            )
        job = await router.find(caller.owner, idempotency_key)
        return _page([_body(request, caller, job)] if job else [], None, None)
    where = job_filter(
        caller,
        owner=owner,
        state=state,
        needs_attention=needs_attention,
        task=task,
        provider=provider,
        created_after=created_after,
        created_before=created_before,
    )
    try:
        page = await router.list_jobs(where, limit=limit, cursor=checked_cursor(cursor))
    except ListingError as exc:
        raise ProblemError(422, "listing-invalid", str(exc)) from None
    following = None
    if page.next_cursor is not None:
        following = str(request.url.include_query_params(cursor=page.next_cursor))
    return _page([_body(request, caller, job) for job in page.items], page.next_cursor, following)


@routes.get(
    "/jobs/counts",
    response_model=JobCounts,
    name="count_jobs",
    operation_id="count_jobs",
    summary="How many jobs are in each state",
    responses=documented(401, 403, 422, 503),
)
async def count_jobs(
    router: RouterDep,
    caller: Caller,
    task: TaskQ = None,
    provider: ProviderQ = None,
    created_after: AfterQ = None,
    created_before: BeforeQ = None,
    owner: OwnerQ = None,
) -> JobCounts:
    """The same filters as the list (but the state ones): an owner counts its own jobs."""
    where = job_filter(
        caller,
        owner=owner,
        state=None,
        needs_attention=False,
        task=task,
        provider=provider,
        created_after=created_after,
        created_before=created_before,
    )
    counts = await router.count_jobs_by_state(where)
    return JobCounts(counts=counts, total=sum(counts.values()))


def _body(request: Request, caller: Principal, job: Job) -> dict[str, Any]:
    url = str(request.url_for("get_job", job_id=job.id))
    return JobResource.body(job, url, operator=caller.operator)


def _page(items: list[dict[str, Any]], next_cursor: str | None, following: str | None) -> Response:
    """A JobPageResource, encoded by `json` (deeply nested input reads back: schemas.plain)."""
    return json_answer({"items": items, "next_cursor": next_cursor, "next": following})
