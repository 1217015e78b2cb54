"""The operator's console at `/ui`: server-rendered pages (Jinja2) over the same store reads
and domain calls as the HTTP API, readable without JavaScript; htmx (vendored in static/,
with its licence) only refreshes parts of a page in place.

`install(app)` mounts it on the API's FastAPI app (`jobrouter serve`).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from jobrouter.ui import actions, ops, pages, spend
from jobrouter.ui.counts import CountsCache
from jobrouter.ui.render import PAGE_HEADERS, templates
from jobrouter.ui.session import CsrfRefused, SignInRequired

STATIC = Path(__file__).with_name("static")


def install(app: FastAPI) -> None:
    app.state.console_counts = CountsCache()  # the job list's counts, kept between refreshes
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
    app.include_router(pages.routes)
    app.include_router(actions.routes)
    app.include_router(ops.routes)
    app.include_router(spend.routes)
    app.add_exception_handler(SignInRequired, _sign_in)
    app.add_exception_handler(CsrfRefused, _csrf_refused)


ENDED_WHY = {
    "revoked": "its token was revoked",
    "expired": "its token expired",
    "signed-out": "it is no longer signed in",
}


async def _sign_in(request: Request, exc: Exception) -> Response:
    reason = exc.reason if isinstance(exc, SignInRequired) else "signed-out"
    if request.method == "GET" and request.headers.get("hx-request") == "true":
        # A part refreshing itself (htmx): a redirect would swap the login form into the
        # fragment and keep polling. This final fragment has no hx-trigger, so updates stop,
        # and it says why.
        return HTMLResponse(
            '<section class="error-text" id="live-ended" data-reason="'
            f'{reason}"><p>Live updates stopped: this session ended because '
            f'{ENDED_WHY.get(reason, reason)}. <a href="/ui/login">Sign in again</a>.</p>'
            "</section>",
            headers={"Cache-Control": "no-store"},
        )
    if request.method == "GET":
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/ui/login?next={_quote(target)}", status_code=303)
    return HTMLResponse("sign in again: your session ended", status_code=401)


async def _csrf_refused(request: Request, exc: Exception) -> Response:
    return templates.TemplateResponse(
        request,
        "message.html",
        {
            "title": "Refused",
            "who": None,
            "message": "This form was not sent from this console "
            "(missing or wrong CSRF field). Reload the page and retry.",
        },
        status_code=403,
        headers=PAGE_HEADERS,
    )


def _quote(path: str) -> str:
    from urllib.parse import quote

    return quote(path, safe="/?=&")
