"""`jobrouter jobs list`: the job listing of `GET /v1/jobs` for people and scripts (the same
filter, router/listing.py). The CLI reads the database itself, so it may list every owner."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from jobrouter.cli.common import ConfigOpt, DatabaseOpt, JsonOpt, run, settings
from jobrouter.listing import DEFAULT_PAGE, MAX_PAGE, JobFilter, checked_cursor
from jobrouter.printing import console, page_document, print_json, print_page
from jobrouter.states import JobState
from jobrouter.store import open_store  # no Router: a read needs no contract or provider

jobs_app = typer.Typer(help="Jobs in bulk: list them with filters.", no_args_is_help=True)


def _moment(option: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is not an ISO 8601 time (2026-12-01T10:00:00Z)", param_hint=option
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


@jobs_app.command("list")
def list_jobs(
    state: Annotated[
        JobState | None,
        typer.Option(
            metavar="STATE",  # the choices go in the help, which wraps between words
            help=f"only jobs in this state: {', '.join(JobState)}",
        ),
    ] = None,
    needs_attention: Annotated[
        bool, typer.Option("--needs-attention", help="only jobs that wait for a person (unknown)")
    ] = False,
    task: Annotated[str | None, typer.Option(help="only jobs of this task")] = None,
    provider: Annotated[
        str | None, typer.Option(help="only jobs with an attempt on this provider")
    ] = None,
    owner: Annotated[str | None, typer.Option(help="only this owner's jobs")] = None,
    created_after: Annotated[
        str | None,
        typer.Option(help="created at or after this ISO 8601 time (UTC without an offset)"),
    ] = None,
    created_before: Annotated[
        str | None, typer.Option(help="created before this ISO 8601 time")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_PAGE, help="jobs per page")] = DEFAULT_PAGE,
    cursor: Annotated[
        str | None,
        typer.Option(help="continue after this job: the cursor the previous page printed"),
    ] = None,
    counts: Annotated[
        bool,
        typer.Option(
            "--counts", help="also count the jobs in each state (same filters but the state)"
        ),
    ] = False,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """List jobs, newest first, one page at a time."""
    where = JobFilter.of(
        owner=owner,
        state=state,
        needs_attention=needs_attention,
        task=task,
        provider=provider,
        created_after=_moment("--created-after", created_after),
        created_before=_moment("--created-before", created_before),
    )
    cfg = settings(config)

    async def step() -> None:
        store = await open_store(database or cfg.database.url)
        try:
            page = await store.jobs.list_jobs(where, limit=limit, cursor=checked_cursor(cursor))
            tally = await store.jobs.count_jobs_by_state(where.any_state()) if counts else None
        finally:
            await store.close()
        if as_json:
            print_json(page_document(page, tally))
            return
        print_page(console, page)
        if tally is not None:
            console.print("  ".join(f"{s}={n}" for s, n in tally.items()), markup=False)

    run(step)
