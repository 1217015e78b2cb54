"""Dashboard pages of jobs: sign-in, the job list (filters, live refresh), a job (attempts as a
timeline, events, input, result; cancel, and resolve for operators) and the needs-attention
queue. Reads and actions go through the same store reads and `Router` calls as `/v1`."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from jobrouter.disclosure import disclose
from jobrouter.errors import JobNotFound, ListingError
from jobrouter.http.auth import Principal, RouterDep
from jobrouter.http.listing import job_filter
from jobrouter.http.problems import ProblemError
from jobrouter.listing import JobFilter, checked_cursor
from jobrouter.models import Job
from jobrouter.states import AttemptState, JobState
from jobrouter.ui import views
from jobrouter.ui.counts import CountsCache
from jobrouter.ui.render import PAGE_HEADERS, templates
from jobrouter.ui.session import COOKIE, Poster, Viewer, csrf_of, is_https

routes = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = 50
FILTERS = (
    "state",
    "needs_attention",
    "task",
    "provider",
    "owner",
    "created_after",
    "created_before",
    "idempotency_key",
)


def page(
    request: Request, name: str, who: Principal | None, status: int = 200, **context: Any
) -> HTMLResponse:
    csrf = getattr(request.state, "csrf", "")
    return templates.TemplateResponse(
        request,
        name,
        {"who": who, "csrf": csrf, **context},
        status_code=status,
        headers=PAGE_HEADERS,
    )


# ---- sign-in ----------------------------------------------------------------------------------


@routes.get("", response_class=RedirectResponse)
async def home() -> RedirectResponse:
    return RedirectResponse("/ui/jobs", status_code=303)


@routes.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, next: str = "/ui/jobs") -> HTMLResponse:
    return page(request, "login.html", None, next=_local(next), error=None)


@routes.post("/login", response_model=None)
async def login(
    request: Request,
    router: RouterDep,
    token: Annotated[str, Form()],
    next: Annotated[str, Form()] = "/ui/jobs",
) -> Response:
    """Same-origin only: a sign-in form posted from another site could fix a session."""
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.url.netloc:
        return page(request, "login.html", None, 403, next="/ui/jobs", error="wrong origin")
    token = token.strip()
    if not token or await router.live_token(token) is None:
        return page(
            request,
            "login.html",
            None,
            401,
            next=_local(next),
            error="That token is unknown or revoked.",
        )
    answer = RedirectResponse(_local(next), status_code=303)
    answer.set_cookie(
        COOKIE, token, httponly=True, samesite="strict", secure=is_https(request), path="/ui"
    )
    return answer


@routes.post("/logout")
async def logout(_who: Poster) -> RedirectResponse:
    answer = RedirectResponse("/ui/login", status_code=303)
    answer.delete_cookie(COOKIE, path="/ui")
    return answer


def _local(target: str) -> str:
    """Only a path of this console: `next` must not send a signed-in browser elsewhere."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/ui"):
        return "/ui/jobs"
    return target


# ---- the job list -----------------------------------------------------------------------------


def _moment(value: str) -> datetime | None:
    """`datetime-local` inputs send `2026-12-01T10:00` (UTC here, as the page says)."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ListingError(f"{value!r} is not a date and time (2026-12-01T10:00)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _flag(value: str) -> bool:
    """A yes/no query value read as `/v1` reads it (`false`, `0`, `off`, `no` are no)."""
    if value.lower() in ("", "0", "false", "off", "no", "n", "f"):
        return False
    if value.lower() in ("1", "true", "on", "yes", "y", "t"):
        return True
    raise ListingError(f"{value!r} is not yes or no (true, false, 1, 0)")


def _filter(who: Principal, query: dict[str, str]) -> JobFilter:
    state = query.get("state") or None
    if state is not None and state not in {s.value for s in JobState}:
        raise ListingError(f"no state {state!r}")
    try:
        where = job_filter(
            who,
            owner=query.get("owner") or None,
            state=JobState(state) if state else None,
            needs_attention="needs_attention" in query,
            task=query.get("task") or None,
            provider=query.get("provider") or None,
            created_after=_moment(query.get("created_after", "")),
            created_before=_moment(query.get("created_before", "")),
        )
    except ProblemError as exc:
        raise ListingError(exc.detail) from None
    return replace(where, idempotency_key=query.get("idempotency_key") or None)


async def _listing(
    request: Request, router: RouterDep, who: Principal, *, refresh: bool = False
) -> dict[str, Any]:
    """The list's context. A `refresh` (the 2 s poll) may show counts up to
    `COUNTS_MAX_AGE_S` old (router/ui/counts.py); a page load counts anew."""
    query = {k: v for k, v in request.query_params.items() if k in FILTERS and v}
    cursor = request.query_params.get("cursor") or None
    try:
        if not _flag(query.get("needs_attention", "")):
            query.pop("needs_attention", None)  # also unticks the box
        where = _filter(who, query)
        listed = await router.list_jobs(where, limit=PAGE, cursor=checked_cursor(cursor))
        cache: CountsCache = request.app.state.console_counts
        counted = await cache.counts(router, where.any_state(), fresh=not refresh)
    except ListingError as exc:
        return {
            "query": query,
            "jobs": [],
            "counts": None,
            "error": str(exc),
            "older": None,
            "live": False,
            "states": list(JobState),
            "query_string": urlencode(query),
        }
    older = None
    if listed.next_cursor:
        older = "/ui/jobs?" + urlencode({**query, "cursor": listed.next_cursor})
    return {
        "query": query,
        "jobs": listed.items,
        "counts": counted.counts,
        "counted_at": counted.at,
        "counts_max_age": int(cache.max_age_s),
        "error": None,
        "older": older,
        "live": cursor is None,
        "states": list(JobState),
        "query_string": urlencode(query),
        "tasks": router.task_names(),
    }


@routes.get("/jobs", response_class=HTMLResponse)
async def jobs(request: Request, router: RouterDep, who: Viewer) -> HTMLResponse:
    context = await _listing(request, router, who)
    return page(request, "jobs.html", who, 422 if context["error"] else 200, **context)


@routes.get("/jobs/rows", response_class=HTMLResponse)
async def job_rows(request: Request, router: RouterDep, who: Viewer) -> HTMLResponse:
    """The list's live part (htmx polls it while the first page is shown)."""
    return page(
        request, "_job_rows.html", who, **await _listing(request, router, who, refresh=True)
    )


@routes.get("/attention", response_class=HTMLResponse)
async def attention(request: Request, router: RouterDep, who: Viewer) -> HTMLResponse:
    """Jobs that wait for a person, each with the attempts whose outcome is unknown."""
    where = job_filter(
        who,
        owner=None,
        state=None,
        needs_attention=True,
        task=None,
        provider=None,
        created_after=None,
        created_before=None,
    )
    listed = await router.list_jobs(where, limit=PAGE)
    now = time.time()
    queue = []
    for job in listed.items:
        attempts = await router.attempts(job.id)
        unknown = [a for a in attempts if a.state is AttemptState.UNKNOWN]
        queue.append(
            {
                "job": job,
                "unknown": unknown,
                "providers": sorted({a.provider for a in unknown}),
                "reason": views.reason(job, attempts),
                "age": views.age(job.created_at, now),
                "waiting": views.age(job.updated_at, now),
                "deadline": views.deadline(job, now),
            }
        )
    return page(request, "attention.html", who, queue=queue, more=listed.next_cursor)


@routes.get("/find", response_model=None)
async def find(request: Request, router: RouterDep, who: Viewer, q: str = "") -> Response:
    """The header's search box, on every page: a job id opens that job; an idempotency key
    opens its job in the signed-in owner's scope (an operator's: every owner), or lists the
    jobs of that key when several owners used it, or says that none matches."""
    wanted = q.strip()
    if not wanted:
        return RedirectResponse("/ui/jobs", status_code=303)
    try:
        return _open(await visible(router, who, wanted))
    except JobNotFound:
        pass
    if who.operator:
        found = await router.find_everywhere(wanted, limit=2)
    else:
        mine = await router.find(who.owner, wanted)
        found = [mine] if mine else []
    if len(found) == 1:
        return _open(found[0])
    return RedirectResponse("/ui/jobs?" + urlencode({"idempotency_key": wanted}), 303)


def _open(job: Job) -> RedirectResponse:
    return RedirectResponse(f"/ui/jobs/{job.id}", status_code=303)


# ---- one job ----------------------------------------------------------------------------------


async def visible(router: RouterDep, who: Principal, job_id: str) -> Job:
    # JobNotFound when there is none, and for another owner's: missing, not forbidden
    return await router.visible_job(job_id, to=None if who.operator else who.owner)


async def job_context(router: RouterDep, who: Principal, job: Job) -> dict[str, Any]:
    """The job as `who` may see it (router/disclosure.py: an owner is not shown what a
    provider said), its attempts on a time axis, and why it waits, if it does."""
    attempts = [disclose(a, operator=who.operator) for a in await router.attempts(job.id)]
    events = await router.events(job.id)
    return {
        "job": disclose(job, operator=who.operator),
        "attempts": attempts,
        "events": events,
        "axis": views.timeline(job, attempts, events, time.time()),
        "reason": views.reason(job, attempts),
    }


@routes.get("/jobs/{job_id}", response_class=HTMLResponse)
async def job_page(
    job_id: str,
    request: Request,
    router: RouterDep,
    who: Viewer,
    done: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    try:
        job = await visible(router, who, job_id)
    except JobNotFound:
        return page(
            request,
            "message.html",
            who,
            404,
            title="No such job",
            message=f"There is no job {job_id} that you may see.",
        )
    return page(request, "job.html", who, done=done, **await job_context(router, who, job))


@routes.get("/jobs/{job_id}/live", response_class=HTMLResponse)
async def job_live(job_id: str, request: Request, router: RouterDep, who: Viewer) -> HTMLResponse:
    job = await visible(router, who, job_id)
    return page(request, "_job_live.html", who, **await job_context(router, who, job))


__all__ = ["csrf_of", "job_context", "page", "routes", "visible"]
