"""The console's two actions that cannot be undone: cancel a job, resolve an unknown attempt.
Each asks once: the first POST answers with a confirm page that says what will happen and
carries the same fields; only its button (`confirmed=yes`) acts. The forms' own rules (who
may, a note, JSON) are checked before the question, the domain's by the `Router` call."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from jobrouter.api import Router
from jobrouter.errors import AttemptNotFound, JobNotFound, JobRouterError, ResolutionInvalid
from jobrouter.http.auth import Principal, RouterDep
from jobrouter.models import Attempt, Job
from jobrouter.resolution import by_token
from jobrouter.ui.pages import job_context, page, visible
from jobrouter.ui.session import Poster

routes = APIRouter(prefix="/ui", include_in_schema=False)
CONFIRMED = "yes"  # the confirm page's `confirmed` field: the operator was asked, and agreed
Confirmed = Annotated[str, Form()]

# What each resolution does to the job, said on the confirm page before it happens.
CONSEQUENCE = {
    "succeeded": "The result you give becomes the job's result (if no other attempt won), "
    "and the job succeeds.",
    "failed": "The attempt is recorded as failed: the job may fail over to the next certified "
    "provider (never this one again), or fail when none is left.",
    "cancelled": "The attempt is recorded as cancelled: the job may fail over to the next "
    "certified provider, or fail when none is left.",
}


@routes.post("/jobs/{job_id}/cancel", response_model=None)
async def cancel(
    job_id: str,
    request: Request,
    router: RouterDep,
    who: Poster,
    reason: Annotated[str, Form(max_length=1000)] = "",
    confirmed: Confirmed = "",
) -> Response:
    try:
        job = await visible(router, who, job_id)
    except JobNotFound:
        return _missing(request, who, "No such job", f"There is no job {job_id} that you may see.")
    if confirmed != CONFIRMED:
        return _ask(
            request,
            who,
            title=f"Cancel job {job.id}?",
            consequence="A cancelled job never runs again and cannot be reopened; an attempt "
            "in flight is stopped and its answer, if one comes, is discarded.",
            facts=[
                ("Task", job.task),
                ("Owner", job.owner),
                ("State", job.state.value),
                ("Reason", reason.strip() or "(none given)"),
            ],
            action=f"/ui/jobs/{job.id}/cancel",
            fields={"reason": reason},
            verb="Yes, cancel this job",
            back=f"/ui/jobs/{job.id}",
        )
    why = reason.strip() or f"cancelled in the console by {who.owner}"
    try:
        await router.cancel(job_id, why)
    except JobRouterError as exc:
        return _not_done(request, who, job_id, exc)
    return _done(job_id, "cancelled")


@routes.post("/attempts/{attempt_id}/resolve", response_model=None)
async def resolve(
    attempt_id: str,
    request: Request,
    router: RouterDep,
    who: Poster,
    outcome: Annotated[str, Form()],
    note: Annotated[str, Form(max_length=1000)] = "",
    result: Annotated[str, Form(max_length=1_000_000)] = "",
    confirmed: Confirmed = "",
) -> Response:
    """Operators only, with a note saying what was checked (as `jobrouter resolve` asks)."""
    found = await _visible_attempt(router, who, attempt_id)
    if found is None:
        # another owner's attempt is missing, not forbidden (and names no job of theirs)
        return _missing(request, who, "No such attempt", f"There is no attempt {attempt_id}.")
    attempt, job = found
    problem = _resolve_problem(who, note, result)
    if problem is None and confirmed != CONFIRMED:
        return _ask(
            request,
            who,
            title=f"Resolve attempt #{attempt.seq} of job {job.id} as {outcome}?",
            consequence=CONSEQUENCE.get(outcome, "The router checks this outcome first.")
            + " A resolution cannot be taken back; the note goes into the job's log.",
            facts=[
                ("Provider", attempt.provider),
                ("Outcome", outcome),
                ("Note", note.strip()),
                ("Result", result.strip() or "(none)"),
            ],
            action=f"/ui/attempts/{attempt.id}/resolve",
            fields={"outcome": outcome, "note": note, "result": result},
            verb=f"Yes, resolve #{attempt.seq} as {outcome}",
            back=f"/ui/jobs/{job.id}",
        )
    if problem is None:
        value = json.loads(result) if result.strip() else None
        action = router.resolve(attempt_id, outcome, value, note, by=by_token(who.token_id))  # type: ignore[arg-type]
        try:
            await action
        except ResolutionInvalid as exc:  # the domain's rules (router/resolution.py)
            problem = exc.reason if exc.field == "result" else str(exc)
        except JobRouterError as exc:
            return _not_done(request, who, attempt.job_id, exc)
    if problem:
        return page(
            request,
            "job.html",
            who,
            403 if not who.operator else 422,
            error=problem,
            **await job_context(router, who, job),
        )
    return _done(job.id, f"attempt {attempt.seq} {outcome}")


async def _visible_attempt(
    router: Router, who: Principal, attempt_id: str
) -> tuple[Attempt, Job] | None:
    """The attempt and its job if `who` may see the job; else None, another owner's attempt
    included (missing, not forbidden: it names no job of theirs)."""
    try:
        attempt = await router.attempt(attempt_id)
        return attempt, await visible(router, who, attempt.job_id)
    except (AttemptNotFound, JobNotFound):
        return None


def _resolve_problem(who: Principal, note: str, result: str) -> str | None:
    """The form's own rules: who may, a note, JSON that parses; the outcome and the result's
    rules are the domain's (router/resolution.py)."""
    if not who.operator:
        return "Only an operator may resolve an attempt."
    if not note.strip():
        return "Write what you checked (the note goes into the job's log)."
    if result.strip():
        try:
            json.loads(result)
        except json.JSONDecodeError:
            return "The result must be JSON (what the provider made)."
    return None


def _ask(request: Request, who: Principal, **question: Any) -> HTMLResponse:
    """The confirm page: nothing has happened yet."""
    return page(request, "confirm.html", who, confirmed=CONFIRMED, **question)


def _done(job_id: str, done: str) -> RedirectResponse:
    return RedirectResponse(f"/ui/jobs/{job_id}?{urlencode({'done': done})}", status_code=303)


def _missing(request: Request, who: Principal, title: str, message: str) -> HTMLResponse:
    return page(request, "message.html", who, 404, title=title, message=message)


def _not_done(request: Request, who: Principal, job_id: str, exc: JobRouterError) -> HTMLResponse:
    return page(
        request,
        "message.html",
        who,
        409,
        title="Not done",
        message=str(exc),
        back=f"/ui/jobs/{job_id}",
    )
