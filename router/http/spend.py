"""`GET /v1/spend`: the spend report (`Router.spend`, jobrouter.spend_report) and each budget's
use this period (`Router.budget_uses`). An owner's token sees its own owner's spend and
budgets only (naming another owner is refused, as the job listing refuses it); an operator's
sees every owner's, or one owner's with `owner`. A bad query is the domain's
`SpendQueryInvalid`, a 422 naming the parameter (router/http/problems.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from jobrouter.http.auth import Caller, Principal, RouterDep
from jobrouter.http.problems import ProblemError, documented
from jobrouter.models import SpendAnswer

routes = APIRouter(prefix="/v1", tags=["spend"])


def scoped_owner(caller: Principal, owner: str | None) -> str | None:
    """The owner whose spend a caller may read: an owner token its own (another owner is
    refused rather than silently narrowed), an operator anyone's (None: every owner)."""
    if caller.operator:
        return owner or None
    if owner not in (None, "", caller.owner):
        raise ProblemError(
            403,
            "operator-only",
            "only an operator token may read the spend of another owner; leave `owner` out "
            "to read your own",
        )
    return caller.owner


@routes.get(
    "/spend",
    response_model=SpendAnswer,
    name="spend",
    operation_id="spend",
    summary="What attempts used, by owner, task, provider, day or month; budgets' use",
    responses=documented(401, 403, 422, 503),
)
async def spend(
    router: RouterDep,
    caller: Caller,
    by: Annotated[
        list[str] | None,
        Query(
            description="group by owner, task, provider, day or month (UTC): repeat it "
            "(`by=owner&by=day`) or give a comma list (`by=owner,day`); default: owner",
        ),
    ] = None,
    since: Annotated[
        str | None,
        Query(
            max_length=64,
            description="from this ISO 8601 date or time, included (a date: its 00:00 UTC; no "
            "offset: UTC); default: this UTC month's start",
        ),
    ] = None,
    until: Annotated[
        str | None,
        Query(
            max_length=64,
            description="to this ISO 8601 date or time, excluded; default: the next UTC "
            "month's start",
        ),
    ] = None,
    owner: Annotated[
        str | None,
        Query(
            max_length=200,
            description="operator tokens: only this owner's spend and budgets (default: every "
            "owner). An owner token always reads its own only.",
        ),
    ] = None,
) -> SpendAnswer:
    """Sums the tokens and known costs of the attempts started in the range; an attempt whose
    cost is unknown is counted in `cost_unknown`, never added to `cost_usd` as 0."""
    whose = scoped_owner(caller, owner)
    report = await router.spend(by=by, since=since, until=until, owner=whose)
    uses = await router.budget_uses(owner=whose)
    return SpendAnswer(**report.model_dump(), budgets=uses)
