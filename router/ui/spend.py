"""The console's spend page: known spend per UTC day as a chart, the spend by owner, task and
provider over the same range, and each budget's use this period. Everything through
`Router.spend` and `Router.budget_uses`, scoped as `GET /v1/spend` scopes it: an owner sees
its own owner's spend and budgets, an operator every owner's (or one owner's)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from jobrouter.errors import SpendQueryInvalid
from jobrouter.http.auth import RouterDep
from jobrouter.http.problems import ProblemError
from jobrouter.http.spend import scoped_owner
from jobrouter.ui.chart import spend_chart
from jobrouter.ui.pages import page
from jobrouter.ui.session import Viewer

routes = APIRouter(prefix="/ui", include_in_schema=False)


@routes.get("/spend", response_class=HTMLResponse)
async def spend(
    request: Request,
    router: RouterDep,
    who: Viewer,
    since: str = "",
    until: str = "",
    owner: str = "",
) -> HTMLResponse:
    query = {"since": since, "until": until, "owner": owner}
    try:
        whose = scoped_owner(who, owner or None)
    except ProblemError as exc:
        return page(request, "message.html", who, 403, title="Operators only", message=exc.detail)
    span = {"since": since or None, "until": until or None, "owner": whose}
    try:
        daily = await router.spend(by="day", **span)
        grouped = await router.spend(by="owner,task,provider", **span)
    except SpendQueryInvalid as exc:
        return page(request, "spend.html", who, 422, query=query, error=str(exc), report=None)
    return page(
        request,
        "spend.html",
        who,
        query=query,
        error=None,
        report=grouped,
        chart=spend_chart(daily.lines, daily.since, daily.until),
        uses=await router.budget_uses(owner=whose),
    )
