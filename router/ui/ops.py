"""Dashboard pages of the system: the provider x contract certification matrix with each
cell's evidence, the circuits, and the outbox (depth by owner, dead letters, replay)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from jobrouter.http.auth import RouterDep
from jobrouter.ui import views
from jobrouter.ui.chart import live_chart
from jobrouter.ui.pages import page
from jobrouter.ui.session import Poster, Viewer

routes = APIRouter(prefix="/ui", include_in_schema=False)


@routes.get("/matrix", response_class=HTMLResponse)
async def certification_matrix(request: Request, router: RouterDep, who: Viewer) -> HTMLResponse:
    """What `jobrouter contracts status` prints, from the store, calling nobody."""
    cells = await router.certification_matrix()
    providers = sorted({cell.provider for cell in cells})
    contracts = sorted({cell.contract for cell in cells})
    grid = {(cell.provider, cell.contract): cell for cell in cells}
    return page(
        request,
        "matrix.html",
        who,
        cells=cells,
        grid=grid,
        providers=providers,
        contracts=contracts,
        case_line=views.case_line,
        points=await router.live_watch_points(),
        live_chart=live_chart,
    )


@routes.get("/circuits", response_class=HTMLResponse)
async def circuits(request: Request, router: RouterDep, who: Viewer) -> HTMLResponse:
    configured = sorted(router.config.providers)
    stored = {row.provider: row for row in await router.circuits()}
    return page(
        request,
        "circuits.html",
        who,
        configured=configured,
        stored=stored,
        threshold=router.config.breaker.failure_threshold,
    )


@routes.get("/outbox", response_class=HTMLResponse)
async def outbox(
    request: Request, router: RouterDep, who: Viewer, done: str | None = None
) -> HTMLResponse:
    """Operators only: the depth names every owner."""
    if not who.operator:
        return page(
            request,
            "message.html",
            who,
            403,
            title="Operators only",
            message="The outbox lists every owner's events: it needs an operator token.",
        )
    counts = await router.outbox_counts()
    dead = await router.dead_letters(50)
    hooked = set(router.config.webhooks)
    return page(request, "outbox.html", who, counts=counts, dead=dead, hooked=hooked, done=done)


@routes.post("/outbox/replay", response_model=None)
async def replay(
    request: Request, router: RouterDep, who: Poster, event_id: Annotated[str, Form()] = ""
) -> Response:
    if not who.operator:
        return page(
            request,
            "message.html",
            who,
            403,
            title="Operators only",
            message="Replaying dead letters needs an operator token.",
        )
    moved = await router.replay_dead(event_id or None)  # none named: every dead letter
    note: dict[str, Any] = {"done": f"moved {moved} dead letter(s) back to pending"}
    return RedirectResponse(f"/ui/outbox?{urlencode(note)}", status_code=303)
