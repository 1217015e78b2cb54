"""Job commands: submit, show, watch, cancel, resolve."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from router.api import Outcome, Router
from router.cli import ConfigOpt, DatabaseOpt, app, console, parse_json, run, settings
from router.models import Attempt, Job, JobEvent


@app.command()
def submit(
    task: Annotated[str, typer.Option("--task", "-t",
                                      help="task name from the config's \\[tasks.NAME] sections")],
    key: Annotated[str, typer.Option("--key", "-k", help="idempotency key: one per intent, "
                                     "e.g. derived from your order id")],
    input: Annotated[str, typer.Option("--input", "-i", help="the job input as JSON")],
    owner: Annotated[str, typer.Option(help="who the job belongs to")] = "cli",
    params: Annotated[str, typer.Option(help="extra parameters as JSON")] = "{}",
    wait: Annotated[float, typer.Option(
        help="seconds to wait for the outcome; 0: return at once")] = 60.0,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Submit a job (once per --key) and show it with its attempts."""
    payload = parse_json("--input", input)
    extra = parse_json("--params", params)

    async def step() -> None:
        async with Router.open(database, settings(config)) as router:
            job = await router.submit(owner, key, task, payload, extra)
            note = "accepted" if job.created else "already known (same key, same payload)"
            console.print(f"job [bold]{job.id}[/bold] {note}")
            if wait > 0 and not job.state.settled:
                try:
                    job = await router.wait(job.id, wait)
                except TimeoutError:
                    console.print(f"still running after {wait}s; see `jobrouter show {job.id}`")
                    job = await router.get(job.id)
            print_job(job, await router.attempts(job.id))

    run(step)


@app.command()
def show(
    job_id: Annotated[str, typer.Argument(help="the job id")],
    events: Annotated[bool, typer.Option(help="also print the job's event log")] = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Show a job, its attempts (with error kinds) and optionally its events."""

    async def step() -> None:
        async with Router.open(database, settings(config), run_workers=False) as router:
            job = await router.get(job_id)
            print_job(job, await router.attempts(job_id))
            if events:
                print_events(await router.events(job_id))

    run(step)


@app.command()
def find(
    key: Annotated[str, typer.Argument(help="the idempotency key")],
    owner: Annotated[str, typer.Option(help="the key's owner")] = "cli",
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Find a job by its idempotency key."""

    async def step() -> None:
        async with Router.open(database, settings(config), run_workers=False) as router:
            job = await router.find(owner, key)
            if job is None:
                console.print(f"no job with key {key!r} for owner {owner!r}")
                raise SystemExit(1)
            print_job(job, await router.attempts(job.id))

    run(step)


@app.command()
def cancel(
    job_id: Annotated[str, typer.Argument(help="the job id")],
    reason: Annotated[str, typer.Option(help="why, for the job's log")] = "cancelled from the CLI",
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Cancel a job; attempts still open are recorded as cancelled."""

    async def step() -> None:
        async with Router.open(database, settings(config), run_workers=False) as router:
            job = await router.cancel(job_id, reason)
            print_job(job, await router.attempts(job_id))

    run(step)


@app.command()
def resolve(
    attempt_id: Annotated[str, typer.Argument(help="the unknown attempt's id")],
    outcome: Annotated[str, typer.Option(help="succeeded | failed | cancelled")],
    result: Annotated[str | None, typer.Option(help="the result as JSON (with succeeded)")] = None,
    note: Annotated[str, typer.Option(help="what you checked, for the job's log")] = "",
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Say what became of an attempt whose outcome is unknown (after checking the provider)."""
    if outcome not in ("succeeded", "failed", "cancelled"):
        raise typer.BadParameter("--outcome must be succeeded, failed or cancelled")
    if outcome == "succeeded" and result is None:
        raise typer.BadParameter("--outcome succeeded needs --result JSON (what the provider made)")
    value = parse_json("--result", result) if result is not None else None
    chosen: Outcome = outcome  # type: ignore[assignment]

    async def step() -> None:
        async with Router.open(database, settings(config)) as router:
            job = await router.resolve(attempt_id, chosen, value, note)
            print_job(job, await router.attempts(job.id))

    run(step)


def print_job(job: Job, attempts: list[Attempt]) -> None:
    color = {"succeeded": "green", "failed": "red", "unknown": "yellow"}.get(job.state, "cyan")
    console.print(f"[bold]{job.id}[/bold] task={job.task} owner={job.owner} "
                  f"key={job.idempotency_key} state=[{color}]{job.state}[/{color}] "
                  f"version={job.version}")
    if job.result is not None:
        console.print_json(data=job.result)
    if job.error:
        console.print(f"[red]{job.error}[/red]")
    table = Table("seq", "provider", "state", "error kind", "latency ms", "error", title="attempts")
    for a in attempts:
        winner = " (winner)" if a.id == job.winner_attempt_id else ""
        table.add_row(str(a.seq), a.provider, f"{a.state}{winner}", a.error_kind or "",
                      f"{a.latency_ms:.0f}" if a.latency_ms is not None else "",
                      (a.error or "")[:80])
    console.print(table)


def print_events(events: list[JobEvent]) -> None:
    table = Table("seq", "kind", "job state", "data", title="events")
    for e in events:
        table.add_row(str(e.seq), e.kind, e.job_state, str(e.data)[:100])
    console.print(table)
