"""The console's spend page rendered by the server, on every backend, over real attempts (jobs
run by the router on fake providers that report their use; one priced, one not): the chart
of known spend per day, the lines by owner, task and provider, each budget's use; an owner
sees its own spend and budgets only, naming another owner is refused; a bad range is said."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from jobrouter import Router
from jobrouter.http.app import create_app
from jobrouter.ui.session import COOKIE
from tests.store.test_spend_report import COST, config, opened, run

BUDGETS = {
    "shop1_daily": {"owner": "shop-1", "period": "day", "tokens": 10_000},
    "shop2_daily": {"owner": "shop-2", "period": "day", "tokens": 10_000},
}


@asynccontextmanager
async def console(
    router: Router, owner: str, *, operator: bool = False
) -> AsyncIterator[httpx.AsyncClient]:
    token, _ = await router.store.tokens.create_token(owner, operator=operator)
    transport = httpx.ASGITransport(app=create_app(router))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://jobrouter", cookies={COOKIE: token}
    ) as client:
        yield client


async def spent(router: Router) -> None:
    await run(router, "shop-1", "c1")
    await run(router, "shop-1", "r1", task="reply")
    await run(router, "shop-2", "c1")


async def test_an_owner_sees_its_spend_its_chart_and_its_budget_only(db_url: str) -> None:
    """Mutants killed: the page reading the asked owner instead of `scoped_owner`'s (shop-2's
    spend and budget on shop-1's page); the Spend link shown to operators only."""
    async with opened(db_url, config(BUDGETS)) as router:
        await spent(router)
        async with console(router, "shop-1") as client:
            answer = await client.get("/ui/spend")
            refused = await client.get("/ui/spend", params={"owner": "shop-2"})
    assert answer.status_code == 200, answer.text
    html = answer.text
    assert '<a href="/ui/spend">Spend</a>' in html  # in the navigation
    [label] = re.findall(r'<svg [^>]*role="img" aria-label="([^"]*)"', html)
    assert f"${COST:.6f} over 2 attempts" in label
    assert "1 attempts of unknown cost" in label
    assert len(re.findall(r'<rect class="unknown"', html)) == 1
    assert "shop-2" not in html
    assert 'id="budget-shop1_daily"' in html and "shop2_daily" not in html
    assert "<td>reply</td><td>unpriced</td><td>1</td><td>20</td>\n      <td>unknown</td>" in html
    assert refused.status_code == 403


async def test_an_operator_sees_every_owner_and_every_budget(db_url: str) -> None:
    """Mutant killed: the page's budgets read for the viewer's own owner (`owner=who.owner`:
    an operator would see no owner's budget)."""
    async with opened(db_url, config(BUDGETS)) as router:
        await spent(router)
        async with console(router, "ops", operator=True) as client:
            every = (await client.get("/ui/spend")).text
            one = (await client.get("/ui/spend", params={"owner": "shop-2"})).text
    assert "<td>shop-1</td>" in every and "<td>shop-2</td>" in every
    assert 'id="budget-shop1_daily"' in every and 'id="budget-shop2_daily"' in every
    assert "<td>shop-2</td>" in one and "<td>shop-1</td>" not in one


async def test_a_bad_range_is_said_on_the_page(db_url: str) -> None:
    """The page again, its form and the reason, not an API problem. Mutant killed: the page
    without its SpendQueryInvalid answer (the API's problem+json instead of the page)."""
    async with opened(db_url) as router, console(router, "shop-1") as client:
        answer = await client.get(
            "/ui/spend", params={"since": "2026-12-05", "until": "2026-12-01"}
        )
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("text/html")
    assert '<form method="get" action="/ui/spend"' in answer.text
    assert "until: the range is empty" in answer.text
