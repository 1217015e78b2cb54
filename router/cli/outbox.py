"""Outbox and retention commands: `jobrouter outbox [replay]` and `jobrouter purge`."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from jobrouter.cli.common import ConfigOpt, DatabaseOpt, run, settings
from jobrouter.config import RouterConfig, config_path
from jobrouter.printing import Col, console, err, iso_utc, print_fitted, print_json
from jobrouter.retention import DEFAULT_BATCH, MIN_DAYS, cutoff_for, plan_purge, purge
from jobrouter.store import open_store  # no Router: maintenance on the database itself
from jobrouter.store.outbox import OutboxCounts, OutboxEvent, OutboxStore

outbox_app = typer.Typer(
    help="Completion events waiting for their owner's webhook, and dead letters.",
    no_args_is_help=False,
)


@asynccontextmanager
async def _outbox(cfg: RouterConfig, database: str | None) -> AsyncIterator[OutboxStore]:
    """The outbox store of the configured database, closed after use."""
    store = await open_store(database or cfg.database.url)
    try:
        yield store.outbox
    finally:
        await store.close()


@outbox_app.callback(invoke_without_command=True)
def outbox(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=0, help="dead letters to list (newest first)")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Show the outbox depth by owner (parked owners marked) and the dead letters."""
    if ctx.invoked_subcommand is not None:
        return
    cfg = settings(config)

    async def step() -> None:
        async with _outbox(cfg, database) as store:
            counts = await store.outbox_counts()
            dead = await store.dead_letters(limit) if limit else []
        if as_json:
            print_json(
                {
                    "pending": [_timed(asdict(d)) for d in counts.pending],
                    "dead": counts.dead,
                    "parked": sorted({d.owner for d in counts.pending} - set(cfg.webhooks)),
                    "dead_letters": [_timed(asdict(e)) for e in dead],
                }
            )
            return
        print_depth(cfg, counts)
        if dead:
            print_dead(dead, sum(counts.dead.values()))

    run(step)


# The outbox keeps its times as epoch seconds; scripts get them as jobs have them (ISO 8601, UTC).
_TIMES = frozenset({"created_at", "next_attempt_at", "delivered_at", "dead_at", "oldest"})


def _timed(record: dict[str, Any]) -> dict[str, Any]:
    return {k: iso_utc(v) if k in _TIMES and v is not None else v for k, v in record.items()}


@outbox_app.command()
def replay(
    event_id: Annotated[str | None, typer.Option("--id", help="the dead letter's event id")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every dead letter")] = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Move dead letters back to pending: due now, tries reset, same event id."""
    if (event_id is None) == (not all_):
        raise typer.BadParameter("give exactly one of --id ID or --all")
    cfg = settings(config)

    async def step() -> int:
        async with _outbox(cfg, database) as store:
            if event_id is not None:
                return 1 if await store.replay_dead(event_id) else 0
            return await store.replay_all_dead()

    moved = run(step)
    if event_id is not None and not moved:
        err.print(f"[red]error:[/red] no dead letter {event_id} (see `jobrouter outbox`)")
        raise typer.Exit(1)
    console.print(f"moved {moved} dead letter{'s' if moved != 1 else ''} back to pending")


def purge_command(
    older_than: Annotated[
        float | None,
        typer.Option(
            min=MIN_DAYS,
            help="days since a job finished (default: the config's \\[retention] days)",
            show_default=False,
        ),
    ] = None,
    batch: Annotated[int, typer.Option(min=1, help="jobs per transaction")] = DEFAULT_BATCH,
    dry_run: Annotated[bool, typer.Option(help="count what would go, delete nothing")] = False,
    drop_parked: Annotated[
        bool,
        typer.Option(
            "--drop-parked",
            help="also delete jobs whose event is parked (never tried, owner "
            "without a webhook), with that event",
        ),
    ] = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Delete finished jobs older than the retention, in batches. Needs a configuration file:
    which events are owed depends on its webhooks.

    Their attempts, events, outbox rows, and so their idempotency keys go with them. Kept: jobs
    not finished (`unknown` included), jobs whose completion event is owed to a configured
    webhook (pending, or a dead letter), jobs whose event was tried and never delivered, and,
    unless --drop-parked, jobs whose event is parked for an owner without a webhook."""
    if not config_path(config).is_file():  # built-in defaults have no webhooks: every event
        err.print(
            f"error: no configuration file {config_path(config)}; purge deletes by what "
            "it says (webhooks, retention): pass --config PATH",
            markup=False,
        )
        raise typer.Exit(2)
    cfg = settings(config)
    days = cfg.retention.days if older_than is None else older_than
    cutoff = cutoff_for(days)
    owners = sorted(cfg.webhooks)  # a [webhooks.<owner>] section: that owner's events are owed

    async def step() -> None:
        async with _outbox(cfg, database) as store:
            plan = await plan_purge(store, cutoff, owners=owners, drop_parked=drop_parked)
            before = _when(cutoff)
            console.print(
                f"{plan.purgeable} finished jobs older than {days:g} days (before "
                f"{before}) can be purged; {plan.kept_undelivered} are kept because "
                "their completion event is not delivered yet (pending, tried, a dead letter"
                + ("" if drop_parked else ", or parked: see --drop-parked")
                + "; see `jobrouter outbox`)"
            )
            if plan.parked:
                console.print(
                    f"{plan.parked} of the purgeable jobs have a parked event of an owner "
                    "without a webhook: it goes with its job (--drop-parked)"
                )
            if dry_run or not plan.purgeable:
                return
            end = "\r" if console.is_terminal else "\n"

            def progress(n: int) -> None:
                console.print(f"purged {n} of {plan.purgeable}", end=end)

            total = await purge(
                store,
                cutoff,
                owners=owners,
                batch=batch,
                progress=progress,
                drop_parked=drop_parked,
            )
            console.print(f"purged {total.jobs} jobs" + (" " * 20 if end == "\r" else ""))
            if total.parked:
                console.print(
                    f"{total.parked} parked events of owners without a webhook were dropped "
                    "with their jobs"
                )

    run(step)


DEPTH_COLUMNS = (
    Col("owner", whole=True),
    Col("pending"),
    Col("retrying"),
    Col("oldest"),
    Col("next try"),
    Col("dead"),
    Col("delivery"),  # a URL: folded, never cut
)
DEAD_COLUMNS = (
    Col("event id", whole=True),  # what `outbox replay --id` takes
    Col("job", whole=True, drop=2),
    Col("owner", whole=True),
    Col("tries", drop=3),
    Col("dead since", drop=1),
    Col("last error"),
)


def print_depth(cfg: RouterConfig, counts: OutboxCounts) -> None:
    pending = sum(depth.pending for depth in counts.pending)
    console.print(f"outbox: {pending} pending, {sum(counts.dead.values())} dead letters")
    if not cfg.webhooks:
        console.print("no \\[webhooks.<owner>] sections are configured: every event is parked")
    owners = sorted({d.owner for d in counts.pending} | counts.dead.keys())
    by_owner = {depth.owner: depth for depth in counts.pending}
    now = time.time()
    rows = []
    for owner in owners:
        depth = by_owner.get(owner)
        hook = cfg.webhooks.get(owner)
        rows.append(
            (
                owner,
                str(depth.pending if depth else 0),
                str(depth.retrying if depth else 0),
                _ago(now - depth.oldest) if depth else "",
                _next(depth.next_attempt_at - now) if depth and hook else "",
                str(counts.dead.get(owner, 0)),
                hook.url if hook else f"PARKED: no [webhooks.{owner}] configured",
            )
        )
    if owners:
        print_fitted(console, DEPTH_COLUMNS, rows)


def print_dead(dead: list[OutboxEvent], total: int) -> None:
    rows = [
        (
            event.id,
            event.job_id,
            event.owner,
            str(event.tries),
            _when(event.dead_at or 0.0),
            (event.last_error or "")[:80],
        )
        for event in dead
    ]
    replay = "`jobrouter outbox replay --id ID | --all`"
    print_fitted(
        console, DEAD_COLUMNS, rows, f"dead letters ({len(dead)} newest of {total}; {replay})"
    )


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(seconds: float) -> str:
    return f"{_span(seconds)} ago"


def _next(seconds: float) -> str:
    return "now" if seconds <= 0 else f"in {_span(seconds)}"


def _span(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{max(seconds, 0):.0f}s"
