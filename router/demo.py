"""`jobrouter demo`: the whole story on the embedded SQLite default, offline, in seconds.

Every provider answer comes from cassettes recorded from real local llama.cpp servers (see
cassettes/jobrouter.toml; the cassettes ship inside the wheel as `jobrouter.cassettes`,
router/recordings.py finds them); nothing reaches a network and no model runs. Two things a
cassette cannot do are injected on top, and said so on screen: a primary that stays silent,
and one that is slow. `jobrouter demo --record` runs the job calls against the live servers
and records them; the certifications still replay their own cassettes (re-record those with
`jobrouter contracts run --record`), and the screen says which part is which. The conclusion
printed after the matrix is derived from the matrix itself, never written in advance.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.panel import Panel
from rich.text import Text

from jobrouter.api import Router
from jobrouter.build import build_providers
from jobrouter.certifier import Cell, certify_pair, matrix, pairs_to_certify
from jobrouter.config import RouterConfig, load_config
from jobrouter.errors import IdempotencyConflict
from jobrouter.models import Job
from jobrouter.printing import Col, console, matrix_width, print_fitted, print_job, render_matrix
from jobrouter.providers import Completion, CompletionRequest, Message, PromptInspection, Provider
from jobrouter.recordings import LIVE_RECORD, recording, shipped_cassettes
from jobrouter.states import EventKind

CASSETTES = shipped_cassettes()
CONFIG = CASSETTES / "jobrouter.toml"
DEMO_GROUP = "demo"  # cassettes/demo/<contract>/: the demo's job calls, all providers in one
JOBS_CASSETTE = CASSETTES / DEMO_GROUP / "product_title" / "jobs.yaml"
OWNER = "shop-42"


class InjectedFault:
    """A real provider with a fault injected in front: wait `delay` seconds (or forever, with
    `hang`) before the call goes out. Same name and fingerprint: it is the same provider on a
    bad day, not another one."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.delay = 0.0
        self.hang = False

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    @property
    def model(self) -> str | None:
        return self.inner.model

    async def warm_up(self) -> None:
        await self.inner.warm_up()

    async def complete(self, request: CompletionRequest) -> Completion:
        if self.hang:
            await asyncio.Event().wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        return await self.inner.complete(request)

    async def inspect_prompt(
        self, messages: tuple[Message, ...], output_schema: dict[str, Any] | None = None
    ) -> PromptInspection:
        return await self.inner.inspect_prompt(messages, output_schema)  # type: ignore[attr-defined, no-any-return]

    async def close(self) -> None:
        await self.inner.close()


# How long an attempt may stay silent before it is unknown. Replayed answers come at once, so
# the silent primary of scene 5 costs the demo only this long; live (recording) answers of a
# CPU-bound 270M model on 2 cores take seconds, so recording allows more.
REPLAY_ATTEMPT_TIMEOUT_S = 2.0
LIVE_ATTEMPT_TIMEOUT_S = 60.0


async def story(url: str, record: bool) -> None:
    """The demo on the database at `url`: replayed, or (`record`) live and recorded."""
    config = _with_attempt_timeout(
        load_config(CONFIG), LIVE_ATTEMPT_TIMEOUT_S if record else REPLAY_ATTEMPT_TIMEOUT_S
    )
    providers = build_providers(config, None)
    primary = InjectedFault(providers["primary"])
    providers["primary"] = primary
    console.print(Panel(f"database {url}\n{what_runs(record)}", title="jobrouter demo"))
    async with Router.open(url, config, providers=providers) as router:
        await _certify(router, record)
        from jobrouter.providers.cassettes import cassette, write_meta

        with cassette(JOBS_CASSETTE, record=record):
            jobs = await _jobs(router, primary)
        if record:
            write_meta(
                JOBS_CASSETTE.parent,
                provider=DEMO_GROUP,
                provider_fingerprint=demo_fingerprint(router.providers),
                contract_fingerprint=router.tasks["title"].contract_fingerprint,
            )
        jobs = [await router.get(job.id) for job in jobs]
        _final_table(jobs, {j.id: await router.attempts(j.id) for j in jobs})


async def _certify(router: Router, record: bool) -> None:
    _scene(1, "Certify every provider for every contract it is routed to (golden cases)")
    pairs = pairs_to_certify(router.config, router.tasks)
    for pair in pairs:
        provider = router.providers[pair.provider]
        with recording(CASSETTES, False, provider, pair):  # certifications replay even here
            await certify_pair(
                router.store.certifications,
                provider,
                pair,
                ttl_days=router.config.certification.ttl_days,
            )
    router.gate.forget()
    cells = await matrix(router.store.certifications, router.providers, pairs)
    print(render_matrix(cells, width=matrix_width()))
    for line in conclusion(cells):
        console.print(line, markup=False, highlight=False)


async def _jobs(router: Router, primary: InjectedFault) -> list[Job]:
    tea = {"listing": "Saffron tea, 20 bags, organic, from Iran"}
    _scene(2, "Submit a job; the primary answers")
    first = await _submit_and_show(router, "order-1001-title", "title", tea)

    _scene(3, "The same submit again (a double click): the same job comes back")
    again = await router.submit(OWNER, "order-1001-title", "title", tea)
    console.print(f"job {again.id} (same id: {again.id == first.id}, created: {again.created})")

    _scene(4, "The same key with a different payload is refused")
    try:
        await router.submit(OWNER, "order-1001-title", "title", {"listing": "Green tea"})
    except IdempotencyConflict as exc:
        console.print(f"[yellow]IdempotencyConflict[/yellow]: {exc}")

    _scene(
        5,
        "The primary goes silent (injected): after the attempt timeout its attempt is "
        "UNKNOWN, not failed; failover skips the uncertified gemma_chatml, lands on backup",
    )
    primary.hang = True
    silent = await _submit_and_show(
        router,
        "order-1002-title",
        "title",
        {"listing": "Blue ceramic mug, 350 ml, dishwasher safe"},
    )
    primary.hang = False
    for event in await router.events(silent.id):
        if event.kind is EventKind.PROVIDER_SKIPPED:
            console.print(f"event {event.seq} provider.skipped: {event.data}")

    _scene(
        6,
        "Hedging: the primary is slow (injected); after 0.5 s of silence the backup "
        "starts, answers first and wins; the primary's attempt is cancelled",
    )
    primary.delay = 30.0
    hedged = await _submit_and_show(
        router,
        "order-1003-title",
        "title_hedged",
        {"listing": "Wollsocken aus Merino, Größe 39-42, grau"},
    )
    primary.delay = 0.0

    _scene(
        7,
        "The silent primary's answer turns up after all: an operator reports it, and it "
        "loses the compare-and-swap (recorded lost; the job's result does not change)",
    )
    unknown = next(a for a in await router.attempts(silent.id) if a.state == "unknown")
    after = await router.resolve(
        unknown.id,
        "succeeded",
        {"title": "Blue ceramic mug 350 ml"},
        note="the primary's log shows it answered at last",
    )
    print_job(console, after, await router.attempts(silent.id))
    return [first, silent, hedged]


async def _submit_and_show(router: Router, key: str, task: str, input: dict[str, Any]) -> Job:
    job = await router.submit(OWNER, key, task, input)
    job = await router.wait(job.id, timeout=300)
    print_job(console, job, await _recorded_attempts(router, job.id))
    return job


async def _recorded_attempts(router: Router, job_id: str) -> list[Any]:
    """The job's attempts once a hedge loser's end is recorded too (it is written just after
    the winner's), so the screen shows what the database keeps."""
    for _ in range(50):
        attempts = await router.attempts(job_id)
        if all(a.state != "started" for a in attempts):
            break
        await asyncio.sleep(0.02)
    return attempts


def what_runs(record: bool) -> str:
    """What the screen shows, said truthfully: which calls are live and which are replayed."""
    certs = (
        f"certifications: REPLAYED from {_shown(CASSETTES)}/<provider>/<contract>/"
        f"certify.yaml (recorded live with their {LIVE_RECORD}; re-record: jobrouter "
        "contracts run --record)"
    )
    if record:
        jobs = (
            f"job calls: LIVE against the local llama.cpp servers (Gemma 3 270M), recorded "
            f"to {_shown(JOBS_CASSETTE)}"
        )
    else:
        jobs = f"job calls: REPLAYED from {_shown(JOBS_CASSETTE)}; no model runs"
    return f"{certs}\n{jobs}\ninjected on top (said so at each scene): a silent and a slow primary"


def _shown(path: Path) -> str:
    """A shipped file as cassettes/..., wherever it is installed: the top-level folder of a
    source checkout, shipped inside the wheel as the package `jobrouter.cassettes`."""
    return str(path.relative_to(CASSETTES.parent))


def conclusion(cells: list[Cell]) -> list[str]:
    """What the matrix says, per contract: who is certified, who is refused and at which
    checks, and which tasks have nobody to run them. Derived from `cells`, nothing else."""
    lines = []
    for contract in sorted({c.contract for c in cells}):
        row = [c for c in cells if c.contract == contract]
        passed = [c.provider for c in row if c.status.valid]
        refused = [f"{c.provider} ({_why(c)})" for c in row if not c.status.valid]
        head = (
            f"{contract}: certified {', '.join(passed)}"
            if passed
            else f"{contract}: NO certified provider, its jobs would not run"
        )
        lines.append(head + (f"; refused {', '.join(refused)}" if refused else ""))
    return lines


def _why(cell: Cell) -> str:
    from jobrouter.contracts import Validity  # loaded already: the cell came from `matrix`

    cert = cell.certification
    if cell.status is Validity.FAIL and cert is not None:
        return f"failed {', '.join(cert.failed_checks)}"
    if cell.status is Validity.UNVERIFIED and cert is not None:
        return f"unverified {', '.join(cert.unverified_checks)}"
    return cell.status


def _with_attempt_timeout(config: RouterConfig, seconds: float) -> RouterConfig:
    tasks = {
        name: task.model_copy(update={"attempt_timeout": seconds})
        for name, task in config.tasks.items()
    }
    return config.model_copy(update={"tasks": tasks})


def _scene(number: int, title: str) -> None:
    heading = f"{number}. {title}"
    if len(heading) + 6 <= console.width:
        console.rule(Text(heading, style="bold"))
        return
    console.rule()  # a rule cuts a title too long for it to `…`: the title goes below, wrapped
    console.print(Text(heading, style="bold"))


def _final_table(jobs: list[Job], attempts: dict[str, list[Any]]) -> None:
    _scene(8, "Jobs and their attempts")
    columns = (
        Col("job", whole=True),
        Col("key"),
        Col("state", whole=True),
        Col("v"),
        Col("attempts (seq provider state)", whole=True),
        Col("result"),
    )
    rows = [
        (
            job.id[-8:],
            job.idempotency_key,
            str(job.state),
            str(job.version),
            "\n".join(
                f"{a.seq} {a.provider} {a.state}"
                + (" (winner)" if a.id == job.winner_attempt_id else "")
                for a in attempts[job.id]
            ),
            str(job.result),
        )
        for job in jobs
    ]
    print_fitted(console, columns, rows)


def demo_fingerprint(providers: Mapping[str, Provider]) -> str:
    """What the demo's job cassette depends on: every provider's fingerprint."""
    import hashlib

    joined = ",".join(f"{name}={providers[name].fingerprint}" for name in sorted(providers))
    return "sha256:" + hashlib.sha256(joined.encode()).hexdigest()
