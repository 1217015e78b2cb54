"""Liveness, readiness and Prometheus metrics (no token needed: they hold no job data)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from jobrouter import metrics
from jobrouter.api import Router
from jobrouter.http.auth import RouterDep
from jobrouter.http.problems import ProblemError, documented
from jobrouter.http.schemas import Status

log = logging.getLogger("jobrouter.http")
routes = APIRouter(tags=["operations"])


@routes.get(
    "/health/live", response_model=Status, operation_id="health_live", summary="The process answers"
)
async def live() -> Status:
    return Status(status="ok")


@routes.get(
    "/health/ready",
    response_model=Status,
    responses=documented(503),
    operation_id="health_ready",
    summary="An attempt can start: the database takes a write, its migrations are current "
    "and the workers run",
)
async def ready(router: RouterDep) -> Status:
    """No token is needed, so the answer names nothing of the deployment (no database URL,
    no driver message): the reason is in the server's log.

    `serve` listens before its providers warm up (litellm's import: seconds, tens of seconds
    on a busy machine) and starts its workers after: until then a job is accepted but waits
    queued, so the process is not ready."""
    try:
        pending = await router.pending_migrations()
        await router.prove_write()
    except Exception as exc:  # any failure to write means "not ready"
        log.warning("readiness: the database takes no write: %s", exc)
        raise ProblemError(
            503,
            "not-ready",
            "the database does not take writes now (the reason is in the server log)",
            headers={"Retry-After": "1"},
        ) from exc
    if pending:
        raise ProblemError(
            503,
            "not-ready",
            f"migrations {pending} are not applied; restart the service to apply them",
            headers={"Retry-After": "5"},
        )
    if router.warming_up:
        raise ProblemError(
            503,
            "not-ready",
            "the providers are warming up; the workers start after (jobs wait queued until then)",
            headers={"Retry-After": "1"},
        )
    return Status(
        status="ready",
        detail="database takes writes, migrations current, workers running",
        leader=await _leader(router),
    )


async def _leader(router: Router) -> str | None:
    """Who runs the periodic work, as the database sees it (router/leader.py)."""
    try:  # None: a router without workers takes no part in the election
        return await router.leader_holder()
    except Exception:  # readiness is about this process; the leader is extra information
        log.exception("readiness: reading the leader failed")
        return None


@routes.get(
    "/metrics",
    response_class=Response,
    summary="Prometheus metrics",
    operation_id="metrics",
    responses={
        200: {
            "content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
            "description": "text exposition format",
        }
    },
)
async def metrics_text(request: Request, router: RouterDep) -> Response:
    try:
        await router.refresh_gauges()
    except Exception:  # stale gauges are better than no metrics at all
        log.exception("refreshing gauges for /metrics failed")
    return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
