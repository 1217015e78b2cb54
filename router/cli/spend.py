"""`jobrouter spend`: the spend report of `Router.spend` (jobrouter.spend_report) for people
and scripts, and each budget's use this period below it. The CLI holds the database, so it
may read every owner's spend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer

from jobrouter.cli.common import ConfigOpt, DatabaseOpt, JsonOpt, operating, run, settings
from jobrouter.models import BudgetUse, SpendLine, SpendReport
from jobrouter.printing import Col, console, print_fitted, print_json


def spend(
    by: Annotated[
        list[str] | None,
        typer.Option(
            "--by",
            metavar="GROUP",
            help="group by owner, task, provider, day or month (UTC); repeat it or give a "
            "comma list (owner,day); default: owner",
            show_default=False,
        ),
    ] = None,
    owner: Annotated[str | None, typer.Option(help="only this owner's jobs and budgets")] = None,
    since: Annotated[
        str | None,
        typer.Option(
            help="from this ISO 8601 date or time, included (default: this UTC month's start)"
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            help="to this ISO 8601 date or time, excluded (default: the next month's start)"
        ),
    ] = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Spend per owner, task, provider, day or month, and each budget's use this period.

    Sums what the attempts started in a range used: their tokens (prompt + completion, as the
    providers reported them) and their cost in USD. An attempt whose cost is unknown (no price
    for its model, no usage reported, no answer) is counted in "cost unknown" and never added
    to the cost as 0: with any, the real spend is more than the cost says.

    The range is --since (included) to --until (excluded), this UTC month by default; a date
    alone is its 00:00 UTC, a time without an offset is UTC. Below the table: each configured
    budget's charge in its current period (reservations in flight plus what settled attempts
    cost, as the budget holds it against its cap) and what is left.

    Examples:

      jobrouter spend                                  # this month, by owner

      jobrouter spend --by owner,day --owner shop-1    # one owner, day by day

      jobrouter spend --by provider --by month --since 2026-01-01 --json

    A bad --by, --since or --until exits with 2 (usage), naming it and what to send.
    """
    cfg = settings(config)

    async def step() -> None:
        async with operating(cfg, database) as router:
            report = await router.spend(by=by, since=since, until=until, owner=owner)
            uses = await router.budget_uses(owner=owner)
        if as_json:
            print_json(
                {
                    **report.model_dump(mode="json"),
                    "budgets": [use.model_dump(mode="json") for use in uses],
                }
            )
            return
        print_report(report)
        print_budgets(uses)

    run(step)


def _cost(line: SpendLine) -> str:
    return "unknown" if line.cost_usd is None else f"{line.cost_usd:.6f}"


def print_report(report: SpendReport) -> None:
    since, until = (f"{t:%Y-%m-%d %H:%M}" for t in (report.since, report.until))
    who = f" of {report.owner}" if report.owner else ""
    keys = [key for key in report.by if key not in ("day", "month")]
    period = [key for key in report.by if key in ("day", "month")]
    columns = [Col(key, whole=True) for key in (*keys, *period)] + [
        Col("attempts"),
        Col("tokens"),
        Col("cost USD"),
        Col("cost unknown"),
    ]
    rows = [_row(line, keys, bool(period)) for line in (*report.lines, report.total)]
    rows[-1][0] = "total"
    title = f"Spend{who}, attempts started {since} to {until} UTC"
    print_fitted(console, columns, rows, title=title)


def _row(line: SpendLine, keys: Sequence[str], period: bool) -> list[str]:
    named = [getattr(line, key) or "" for key in keys] + ([line.period or ""] if period else [])
    return [*named, str(line.attempts), str(line.tokens), _cost(line), str(line.cost_unknown)]


def print_budgets(uses: Sequence[BudgetUse]) -> None:
    if not uses:
        console.print("No budget configured ([budgets] in the configuration).", markup=False)
        return
    columns = [
        Col("budget", whole=True),
        Col("caps", whole=True),
        Col("period (UTC)"),
        Col("charged"),
        Col("cap"),
        Col("left"),
    ]
    rows = []
    for use in uses:
        caps = use.scope if use.covers is None else f"{use.scope} {use.covers}"
        period = (
            f"{use.period}: {use.period_start:%Y-%m-%d %H:%M} to {use.period_end:%Y-%m-%d %H:%M}"
        )
        for unit, charged, cap, left in (
            ("USD", f"{use.charged_usd:.6f}", use.limit_usd, use.remaining_usd),
            ("tokens", str(use.charged_tokens), use.limit_tokens, use.remaining_tokens),
        ):
            if cap is not None:
                rows.append(
                    [use.budget, caps, period, f"{charged} {unit}", f"{cap:g}", f"{left:g}"]
                )
    print_fitted(console, columns, rows, title="Budgets this period (reserved + actual)")
