"""The FastAPI application over a `Router`: `create_app(router)`.

The app does not own the router: whoever opened it closes it (see `jobrouter.http.server`).
"""

from __future__ import annotations

import time

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobrouter import metrics
from jobrouter.api import Router
from jobrouter.config import HttpConfig
from jobrouter.http import health, jobs, listing, openapi, problems, spend
from jobrouter.http.feeds import JobFeeds
from jobrouter.http.limits import BodyLimit, NoNul

DESCRIPTION = """Durable AI jobs on several LLM providers.

Submit a job with `POST /v1/jobs` and an `Idempotency-Key` header: one key per intent, the same
on every retry. Follow it with `GET /v1/jobs/{id}/events` (server-sent events) or read it with
`GET /v1/jobs/{id}`. Errors are `application/problem+json`; their `detail` says what to fix.
Authenticate with `Authorization: Bearer <token>` (`jobrouter token create OWNER`).
"""


def create_app(router: Router, settings: HttpConfig | None = None) -> FastAPI:
    settings = settings or router.config.http
    app = FastAPI(title="jobrouter", version="1", description=DESCRIPTION)
    app.state.router = router
    app.state.http = settings
    app.state.feeds = JobFeeds(router, settings.max_streams_per_token)  # SSE: one watcher a job
    problems.install(app)
    app.include_router(listing.routes)  # before jobs: /v1/jobs/counts is not a job id
    app.include_router(jobs.routes)
    app.include_router(spend.routes)
    app.include_router(health.routes)
    app.add_middleware(NoNul)  # inside BodyLimit: the body has been read when it answers
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(Timing)
    # The one reach into the router's parts an edge keeps: the OpenAPI document is a function
    # of the configured tasks (and the config) alone, and is built so, from a namespace holding
    # just those two, where no Router can be opened (tests/acceptance/test_openapi.py).
    openapi.install(app, router.tasks)  # edge-boundary: allowed
    from jobrouter import ui  # the console at /ui (Jinja2 templates: loaded with the app only)

    ui.install(app)
    return app


class Timing:
    """Request latency into `jobrouter_http_request_duration_seconds`, by route template."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            metrics.HTTP_LATENCY.labels(
                method=metrics.http_method_label(scope["method"]),
                route=template,
                status=str(status),
            ).observe(time.perf_counter() - began)
