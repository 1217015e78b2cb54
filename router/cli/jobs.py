"""Job commands: submit, show, find, cancel, resolve. Each prints the job for people, or one
JSON document with `--json`; `submit` exits with the code of the job's state (router/exits.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from jobrouter.cli.common import (
    ConfigOpt,
    DatabaseOpt,
    JsonOpt,
    operating,
    parse_json,
    reading,
    run,
    settings,
)
from jobrouter.errors import JobNotFound, ResolutionInvalid
from jobrouter.exits import exit_code_of_state
from jobrouter.models import Attempt, Job, JobEvent
from jobrouter.printing import console, job_document, print_events, print_job, print_json
from jobrouter.resolution import Outcome, by_os_user, resolution
from jobrouter.states import JobState

if TYPE_CHECKING:
    from jobrouter.api import Router
    from jobrouter.store import SqlStore


def read_json_argument(option: str, value: str) -> Any:
    """JSON given inline, as `@path` (read from the file) or as `-` (read from stdin)."""
    if value == "-":
        return parse_json(option, sys.stdin.read())
    if value.startswith("@"):
        try:
            return parse_json(option, Path(value[1:]).read_text("utf-8"))
        except OSError as exc:
            raise typer.BadParameter(
                f"{option} {value}: cannot read the file ({exc.strerror})", param_hint=option
            ) from None
    return parse_json(option, value)


async def emit(router: Router, job: Job, as_json: bool) -> None:
    """Print a job a command changed, with its attempts, read through the router."""
    print_whole(job, await router.attempts(job.id), None, as_json)


async def emit_stored(store: SqlStore, job: Job, as_json: bool, *, events: bool = False) -> None:
    """Print a job read from the store alone (`reading`: no contract loaded, no provider)."""
    attempts = await store.jobs.list_attempts(job.id)
    logged = await store.jobs.list_events(job.id) if events else None
    print_whole(job, attempts, logged, as_json)


def print_whole(
    job: Job, attempts: list[Attempt], logged: list[JobEvent] | None, as_json: bool
) -> None:
    if as_json:
        document = job_document(job, attempts, logged)
        print_json({**document, "created": job.created} if job.created else document)
        return
    print_job(console, job, attempts)
    if logged is not None:
        print_events(console, logged)


def submit(
    task: Annotated[
        str,
        typer.Option("--task", "-t", help="task name from the config's \\[tasks.NAME] sections"),
    ],
    key: Annotated[
        str,
        typer.Option(
            "--key", "-k", help="idempotency key: one per intent, e.g. derived from your order id"
        ),
    ],
    input: Annotated[
        str,
        typer.Option(
            "--input",
            "-i",
            help="the job input as JSON, @FILE to read it from a file, or - for stdin",
        ),
    ],
    owner: Annotated[str, typer.Option(help="who the job belongs to")] = "cli",
    params: Annotated[str, typer.Option(help="extra parameters as JSON")] = "{}",
    wait: Annotated[
        float, typer.Option(help="seconds to wait for the outcome; 0: return at once")
    ] = 60.0,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Submit a job (once per --key) and show it with its attempts. The job is run by a
    `jobrouter worker` or `jobrouter serve` on the same database, never by this command (it
    calls no provider); --wait waits for that. Exit code: 0 succeeded, 3 failed, 4 unknown
    (needs attention), 5 refused, 6 still queued or running, 7 cancelled."""
    payload = read_json_argument("--input", input)
    extra = read_json_argument("--params", params)
    cfg = settings(config)

    async def step() -> Job:
        async with operating(cfg, database) as router:
            job = await router.submit(owner, key, task, payload, extra)
            created = job.created
            if not as_json:
                note = "accepted" if job.created else "already known (same key, same payload)"
                console.print(Text.assemble("job ", (job.id, "bold"), f" {note}"))
            if wait > 0 and not job.state.settled:
                job = await _waited(router, job, wait, as_json)
            await emit(router, job.model_copy(update={"created": created}), as_json)
            return job

    job = run(step)
    raise typer.Exit(exit_code_of_state(job.state))


async def _waited(router: Router, job: Job, wait: float, as_json: bool) -> Job:
    """The job once settled, or as it is when `wait` ends: a queued one then says what it
    waits for (no worker has claimed it), since this command runs nothing itself."""
    try:
        return await router.wait(job.id, wait)
    except TimeoutError:
        job = await router.get(job.id)
    if not as_json:
        why = (
            " (no worker took it: is a `jobrouter worker` or `jobrouter serve` running on "
            "this database?)"
            if job.state is JobState.QUEUED
            else ""
        )
        console.print(
            f"still {job.state} after {wait}s{why}; see `jobrouter show {job.id}`", markup=False
        )
    return job


def show(
    job_id: Annotated[str, typer.Argument(help="the job id")],
    events: Annotated[bool, typer.Option(help="also print the job's event log")] = False,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Show a job, its attempts (ids, providers, error kinds) and optionally its events."""

    cfg = settings(config)

    async def step() -> None:  # the store alone: no contracts, no providers to build
        async with reading(cfg, database) as store:
            job = await store.jobs.get_job(job_id)
            if job is None:
                raise JobNotFound(job_id)
            await emit_stored(store, job, as_json, events=events)

    run(step)


def find(
    key: Annotated[str, typer.Argument(help="the idempotency key")],
    owner: Annotated[str, typer.Option(help="the key's owner")] = "cli",
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Find a job by its idempotency key (exit code 1 when there is none)."""

    cfg = settings(config)

    async def step() -> None:
        async with reading(cfg, database) as store:
            job = await store.jobs.find_job(owner, key)
            if job is None:
                if as_json:
                    print_json(None)
                else:
                    console.print(f"no job with key {key!r} for owner {owner!r}", markup=False)
                raise SystemExit(1)
            await emit_stored(store, job, as_json)

    run(step)


def cancel(
    job_id: Annotated[str, typer.Argument(help="the job id")],
    reason: Annotated[str, typer.Option(help="why, for the job's log")] = "cancelled from the CLI",
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Cancel a job; attempts still open are recorded as cancelled."""

    async def step() -> None:
        async with operating(settings(config), database) as router:
            await emit(router, await router.cancel(job_id, reason), as_json)

    run(step)


def resolve(
    attempt_id: Annotated[str, typer.Argument(help="the unknown attempt's id")],
    outcome: Annotated[str, typer.Option(help="succeeded | failed | cancelled")],
    result: Annotated[
        str | None, typer.Option(help="the result as JSON, @FILE or - (with succeeded)")
    ] = None,
    note: Annotated[str, typer.Option(help="what you checked, for the job's log")] = "",
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Say what became of an attempt whose outcome is unknown (after checking the provider)."""
    value = read_json_argument("--result", result) if result is not None else None
    try:  # the domain's rules (router/resolution.py), before a router is opened
        resolution(attempt_id, outcome, value, note, by_os_user())
    except ResolutionInvalid as exc:
        raise typer.BadParameter(exc.reason, param_hint=f"--{exc.field}") from None
    chosen: Outcome = outcome  # type: ignore[assignment]

    async def step() -> None:
        async with operating(settings(config), database) as router:
            job = await router.resolve(attempt_id, chosen, value, note, by=by_os_user())
            await emit(router, job, as_json)

    run(step)
