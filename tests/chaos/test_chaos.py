"""Chaos: real worker processes killed with SIGKILL while they run jobs through a proxy that
loses answers after the provider acted on them; a real webhook receiver records what arrives.

One variant per backend (the issue's two runs):
- PostgreSQL: three `python -m router worker` processes, 1,000 jobs, a random worker killed
  every 2-4 s (seeded) and replaced at once, six times.
- SQLite: one worker process on one file, 300 jobs, killed and restarted three times.

A victim is a worker that has been running jobs for 1.5 s at least: a restart costs seconds of
CPU (litellm's import) on a small machine, and killing each replacement as it came up would
leave no worker at all. Six kills (not more) keep the PostgreSQL run near a minute on two
shared cores; each restart is the dearest part of the run.

Both providers of the task sit behind the fault server's proxy mode, which forwards to an
upstream that answers at once and drops 2.5% of the answers after the upstream answered: the
router sees a connection lost after the request was sent, an `unknown` outcome (I3). A killed
worker's claims expire (`[engine] claim`) and its `started` attempts become `unknown` once their
lease runs out (I7); the task has no external side effects, so the job fails over to the next
provider. At the end, checked by queries and by the receiver:

- every accepted job exists (1,000 rows, the submitted keys) and is terminal or needs attention;
- no job has two winners: a succeeded job has exactly one succeeded attempt, its winner, and
  `job.result` is that attempt's output (I2; the task has no contract, so both are null: the
  winner's identity carries the check); a terminal job logged its end once (I6);
- no attempt is `failed` because of a timeout or a lost answer (I3), none is left `started`;
- every terminal job has exactly one outbox row, delivered (I8); the receiver saw exactly the
  outbox's event ids (a re-send after a kill may repeat one: de-duplicated by id, each appears
  once), every request correctly signed, the same body on every repeat.

The figures (jobs, kills, unknown attempts, jobs needing attention, duplicate deliveries, wall
time) are printed (`pytest -rA` shows them) and recorded as junit test-suite properties
(`record_testsuite_property`: `record_property` is refused under junit_family xunit2).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jobrouter.api import Router
from jobrouter.store import SqlStore
from jobrouter.webhook import SIGNATURE_HEADER, verify_signature
from tests.providers.fault_server import FaultServer, start_fault_server
from tests.store.pg import fresh_database
from tests.support.webhook_receiver import WebhookReceiver

ROOT = Path(__file__).resolve().parents[2]
OWNER = "chaos"
TASK = "chaos"
SECRET_ENV = "JOBROUTER_CHAOS_WEBHOOK_SECRET"
SECRET = "chaos-secret-not-a-real-one"
DROP_SHARE = 0.025
# Every wait below is for an event (a banner in a log, a count reaching zero); these ceilings
# are guards against a hang only, sized for a 2-core machine under heavy load (a worker loads
# litellm, seconds of CPU, before it prints its banner). Nothing is decided by how long it took.
STARTUP_S = 300.0
STALL_S = 120.0  # settle and drain: fail only when the count has not gone down for this long
STOP_S = 60.0
VICTIM_MIN_UP_S = 1.5  # a worker is killed only after it has run jobs this long
SUBMIT_CONCURRENCY = 8
BANNER = "Ctrl-C to stop"  # what `jobrouter worker` prints once it runs jobs

CONFIG = """
[database]
url = "{url}"

[engine]
workers = {concurrency}
claim = 3
lease = 2
poll_interval = 0.2
sweep_interval = 0.5

[breaker]
cooldown = 1
probe_timeout = 3

[providers.primary]
model = "openai/chaos-primary"
api_base = "{api_base}"
structured_output = "none"
timeout = {{connect = 1, read = 2}}
retry = {{attempts = 2, initial = 0.05, max = 0.2}}

[providers.fallback]
model = "openai/chaos-fallback"
api_base = "{api_base}"
structured_output = "none"
timeout = {{connect = 1, read = 2}}
retry = {{attempts = 2, initial = 0.05, max = 0.2}}

[tasks.{task}]
providers = ["primary", "fallback"]
side_effects = "none"
certification = "none"
max_attempts = 2
deadline = 300

[webhooks.{owner}]
url = "{hook}"
secret_env = "{secret_env}"

[outbox]
max_tries = 1000
backoff_initial = 0.2
backoff_max = 1
timeout = 2
claim = 3
poll_interval = 0.2
"""


@dataclass(frozen=True)
class Variant:
    backend: str
    workers: int  # processes alive at any time
    jobs: int
    kills: int
    concurrency: int  # jobs driven at once per process
    submit_s: float  # submissions are spread over this long, so the kills land on work
    seed: int


VARIANTS = [
    Variant("postgres", workers=3, jobs=1000, kills=6, concurrency=16, submit_s=20.0, seed=11),
    Variant("sqlite", workers=1, jobs=300, kills=3, concurrency=16, submit_s=8.0, seed=12),
]


# ---- worker processes --------------------------------------------------------------------------


@dataclass
class Worker:
    number: int
    process: subprocess.Popen[bytes]
    log: Path
    ready_at: float | None = None  # time.monotonic() when first seen running jobs

    def started(self) -> bool:
        """Whether it runs jobs: it prints its banner once the router is open (providers
        loaded, engine started)."""
        if self.ready_at is None and BANNER in self.log.read_text(errors="replace"):
            self.ready_at = time.monotonic()
        return self.ready_at is not None

    def up_for(self) -> float:
        """Seconds since it started running jobs (0 while it starts)."""
        if not self.started() or self.ready_at is None:
            return 0.0
        return time.monotonic() - self.ready_at


@dataclass
class Cluster:
    """The worker processes: started, SIGKILLed and replaced, stopped with SIGTERM."""

    config: Path
    folder: Path
    env: dict[str, str]
    alive: list[Worker] = field(default_factory=list)
    killed: list[Worker] = field(default_factory=list)
    _count: int = 0

    def start(self) -> Worker:
        self._count += 1
        log = self.folder / f"worker-{self._count}.log"
        with log.open("wb") as out:  # the child keeps its own descriptor
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "jobrouter",
                    "worker",
                    "--config",
                    str(self.config),
                    "--grace",
                    "2",
                ],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        worker = Worker(self._count, process, log)
        self.alive.append(worker)
        return worker

    async def wait_any_started(self, workers: list[Worker]) -> None:
        """Until one of `workers` runs jobs; a worker that exits meanwhile fails the test."""
        deadline = time.monotonic() + STARTUP_S
        while not any(worker.started() for worker in workers):
            for worker in workers:
                if worker.process.poll() is not None:
                    raise AssertionError(
                        f"worker {worker.number} exited with "
                        f"{worker.process.returncode}: {self.tail(worker)}"
                    )
            if time.monotonic() > deadline:
                raise AssertionError(f"no worker started within {STARTUP_S}s")
            await asyncio.sleep(0.1)

    async def wait_all_started(self) -> None:
        """Until every live worker runs jobs: one still importing has no SIGTERM handler yet
        (it would die of the signal, -15), and the test is about stopping workers that run."""
        for worker in list(self.alive):
            await self.wait_any_started([worker])

    async def kill_and_replace(self, rng: random.Random) -> Worker:
        """SIGKILL a random worker that has been running jobs for a while (a worker still
        starting holds nothing, and killing each replacement as it comes up would leave no
        worker at all), and start its replacement at once."""
        deadline = time.monotonic() + STARTUP_S
        while not (running := [w for w in self.alive if w.up_for() >= VICTIM_MIN_UP_S]):
            if time.monotonic() > deadline:
                raise AssertionError(f"no worker running {VICTIM_MIN_UP_S}s within {STARTUP_S}s")
            await asyncio.sleep(0.1)
        victim = rng.choice(running)
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait()
        self.alive.remove(victim)
        self.killed.append(victim)
        return self.start()

    def stop(self) -> dict[int, int | None]:
        """SIGTERM every live worker; their exit codes (None: had to be killed)."""
        for worker in self.alive:
            worker.process.send_signal(signal.SIGTERM)
        codes: dict[int, int | None] = {}
        for worker in self.alive:
            try:
                codes[worker.number] = worker.process.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
                codes[worker.number] = None
        self.alive.clear()
        return codes

    def tail(self, worker: Worker, lines: int = 30) -> str:
        text = worker.log.read_text(errors="replace") if worker.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def errors_logged(self) -> list[str]:
        """Tracebacks and ERROR lines of every worker, killed ones included."""
        found = []
        for log in sorted(self.folder.glob("worker-*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if " ERROR " in line or line.startswith("Traceback"):
                    found.append(f"{log.name}: {line}")
        return found


# ---- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def proxy() -> Iterator[FaultServer]:
    """An upstream that answers at once, behind a proxy dropping 2.5% of its answers."""
    with (
        start_fault_server() as upstream,
        start_fault_server(
            "--upstream", upstream.url, "--drop-share", str(DROP_SHARE), "--seed", "7"
        ) as lossy,
    ):
        yield lossy


@pytest.fixture(params=VARIANTS, ids=[v.backend for v in VARIANTS])
def variant(request: pytest.FixtureRequest) -> Variant:
    chosen: Variant = request.param
    if chosen.backend == "postgres":
        request.applymarker(pytest.mark.postgres)
    return chosen


@pytest.fixture
async def database(variant: Variant, tmp_path: Path) -> AsyncIterator[str]:
    if variant.backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'chaos.db'}"
        return
    async with fresh_database() as url:
        yield url


# ---- the test ----------------------------------------------------------------------------------


@pytest.mark.timeout(1200)  # a guard against a hang (see STARTUP_S)
async def test_killed_workers_lose_no_job_and_no_event(
    variant: Variant,
    database: str,
    proxy: FaultServer,
    tmp_path: Path,
    record_testsuite_property: Any,
) -> None:
    began = time.monotonic()
    phases: dict[str, float] = {}
    proxy.control(seed=variant.seed)  # the same drops for the same variant on every run
    dropped_before = proxy.stats()["dropped"]
    rng = random.Random(variant.seed)
    async with WebhookReceiver().running() as receiver:
        config = tmp_path / "jobrouter.toml"
        config.write_text(
            CONFIG.format(
                url=database,
                concurrency=variant.concurrency,
                api_base=proxy.api_base,
                task=TASK,
                owner=OWNER,
                hook=receiver.url,
                secret_env=SECRET_ENV,
            )
        )
        env = {**os.environ, SECRET_ENV: SECRET, "PYTHONUNBUFFERED": "1"}
        cluster = Cluster(config, tmp_path, env)
        try:
            first = [cluster.start() for _ in range(variant.workers)]
            async with Router.open(database, config, run_workers=False) as router:
                async with asyncio.TaskGroup() as group:
                    # Jobs are durable: submitting starts at once, while the workers start up.
                    submitting = group.create_task(submit_all(router, variant))
                    await cluster.wait_any_started(first)
                    phases["startup_s"] = time.monotonic() - began
                    kills = await kill_repeatedly(cluster, variant, rng)
                submitted = submitting.result()
                phases["chaos_s"] = time.monotonic() - began - sum(phases.values())
                store = router.store
                open_after_chaos = await count(store, OPEN_SQL)
                await wait_until(store, "every job settled and no attempt open", OPEN_SQL)
                phases["settle_s"] = time.monotonic() - began - sum(phases.values())
                await wait_until(
                    store,
                    "every completion event delivered",
                    "SELECT COUNT(*) AS n FROM outbox WHERE delivered_at IS NULL",
                )
                phases["drain_s"] = time.monotonic() - began - sum(phases.values())
                await cluster.wait_all_started()
                codes = cluster.stop()
                facts = await gather_facts(store)
        finally:
            cluster.stop()
    wall = time.monotonic() - began

    duplicates = len(receiver.requests) - len(receiver.delivered_ids)
    attempts_by_state = Counter(row["state"] for row in facts.attempts)
    summary = {
        "backend": variant.backend,
        "jobs": len(facts.jobs),
        "kills": kills,
        "jobs_by_state": dict(Counter(job["state"] for job in facts.jobs.values())),
        "attempts_by_state": dict(attempts_by_state),
        "unknown_attempts": attempts_by_state["unknown"],
        "needs_attention": sum(job["state"] == "unknown" for job in facts.jobs.values()),
        "duplicate_winners": sum(
            n > 1
            for n in Counter(
                a["job_id"] for a in facts.attempts if a["state"] == "succeeded"
            ).values()
        ),
        "deliveries": len(receiver.requests),
        "duplicate_deliveries": duplicates,
        "open_after_chaos": open_after_chaos,
        "proxy_dropped": proxy.stats()["dropped"] - dropped_before,
        "wall_s": round(wall, 1),
        **{name: round(seconds, 1) for name, seconds in phases.items()},
    }
    print(f"\nchaos summary: {json.dumps(summary, sort_keys=True)}")
    for key, value in summary.items():
        record_testsuite_property(f"chaos_{variant.backend}_{key}", value)

    assert kills == variant.kills
    assert all(code == 0 for code in codes.values()), f"workers did not stop cleanly: {codes}"
    check_jobs(facts, submitted, variant.jobs)
    check_attempts(facts)
    check_outbox(facts, receiver)
    errors = cluster.errors_logged()
    assert not errors, "workers logged errors:\n" + "\n".join(errors[:40])


async def submit_all(router: Router, variant: Variant) -> dict[str, str]:
    """Submit the jobs spread over `submit_s`; key -> job id of every accepted job."""
    accepted: dict[str, str] = {}
    pace = variant.submit_s / variant.jobs
    start = time.monotonic()
    slots = asyncio.Semaphore(SUBMIT_CONCURRENCY)

    async def one(n: int) -> None:
        await asyncio.sleep(max(0.0, start + n * pace - time.monotonic()))
        async with slots:
            job = await router.submit(OWNER, f"chaos-{n}", TASK, {"n": n, "text": f"item {n}"})
        assert job.created
        accepted[job.idempotency_key] = job.id

    await asyncio.gather(*(one(n) for n in range(variant.jobs)))
    return accepted


async def kill_repeatedly(cluster: Cluster, variant: Variant, rng: random.Random) -> int:
    kills = 0
    for _ in range(variant.kills):
        await asyncio.sleep(rng.uniform(2.0, 4.0))
        await cluster.kill_and_replace(rng)
        kills += 1
    return kills


OPEN_SQL = """
    SELECT (SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running'))
         + (SELECT COUNT(*) FROM attempts WHERE state = 'started') AS n"""


async def count(store: SqlStore, count_sql: str) -> int:
    row = await store.connector.fetchone(count_sql, {})
    return int(row["n"]) if row else 0


async def wait_until(store: SqlStore, what: str, count_sql: str) -> None:
    """Until the count is zero; fails only when it has stopped going down for STALL_S (a stuck
    job or event), never because a loaded machine works slowly."""
    best, progress_at = None, time.monotonic()
    while True:
        left = await count(store, count_sql)
        if left == 0:
            return
        if best is None or left < best:
            best, progress_at = left, time.monotonic()
        if time.monotonic() - progress_at > STALL_S:
            raise AssertionError(
                f"not {what}: {left} left, none for {STALL_S}s ({await describe_open(store)})"
            )
        await asyncio.sleep(0.25)


async def describe_open(store: SqlStore) -> str:
    """What is still open, for the failure message: a few jobs with their attempts."""
    jobs = await store.connector.fetchall(
        "SELECT id, state, version, claimed_by, claim_until, next_run_at FROM jobs "
        "WHERE state IN ('queued', 'running') ORDER BY id LIMIT 5",
        {},
    )
    parts = [f"now={time.time():.1f}"]
    for job in jobs:
        attempts = await store.connector.fetchall(
            "SELECT seq, provider, state, worker, lease_until FROM attempts WHERE job_id = :id "
            "ORDER BY seq",
            {"id": job["id"]},
        )
        parts.append(f"{job} {attempts}")
    pending = await store.connector.fetchall(
        "SELECT id, tries, last_error, claimed_by FROM outbox WHERE delivered_at IS NULL LIMIT 5",
        {},
    )
    return "; ".join([*parts, f"outbox pending {pending}"])


# ---- what the database and the receiver say ---------------------------------------------------


@dataclass(frozen=True)
class Facts:
    jobs: dict[str, dict[str, Any]]  # by id
    attempts: list[dict[str, Any]]
    outbox: list[dict[str, Any]]
    dead: int
    terminal_events: Counter[str]  # job id -> how many job.<terminal> events it logged


async def gather_facts(store: SqlStore) -> Facts:
    fetch = store.connector.fetchall
    jobs = {row["id"]: row for row in await fetch("SELECT * FROM jobs", {})}
    attempts = await fetch("SELECT * FROM attempts", {})
    outbox = await fetch("SELECT * FROM outbox", {})
    dead = await fetch("SELECT COUNT(*) AS n FROM outbox_dead", {})
    ends = await fetch(
        "SELECT job_id FROM job_events WHERE kind IN "
        "('job.succeeded', 'job.failed', 'job.cancelled')",
        {},
    )
    return Facts(jobs, attempts, outbox, int(dead[0]["n"]), Counter(r["job_id"] for r in ends))


TERMINAL = {"succeeded", "failed", "cancelled"}


def check_jobs(facts: Facts, submitted: dict[str, str], expected: int) -> None:
    """Every accepted job exists, is terminal or needs attention, and has at most one winner."""
    assert len(submitted) == expected
    assert len(facts.jobs) == expected
    by_key = {job["idempotency_key"]: job for job in facts.jobs.values()}
    assert set(by_key) == {f"chaos-{n}" for n in range(expected)}
    assert {key: job["id"] for key, job in by_key.items()} == submitted
    states = Counter(job["state"] for job in facts.jobs.values())
    assert set(states) <= TERMINAL | {"unknown"}, f"jobs not settled: {states}"

    succeeded: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for attempt in facts.attempts:
        if attempt["state"] == "succeeded":
            succeeded[attempt["job_id"]].append(attempt)
    two_winners = {
        job_id: [a["id"] for a in won] for job_id, won in succeeded.items() if len(won) > 1
    }
    assert not two_winners, f"jobs with two succeeded attempts: {two_winners}"
    for job in facts.jobs.values():
        won = succeeded.get(job["id"], [])
        if job["state"] == "succeeded":
            assert len(won) == 1, f"succeeded job {job['id']} has winners {won}"
            assert job["winner_attempt_id"] == won[0]["id"], job
            assert job["result"] == won[0]["output"], (job, won[0])
        else:
            assert not won and job["winner_attempt_id"] is None, (job, won)
        ends = facts.terminal_events[job["id"]]
        assert ends == (1 if job["state"] in TERMINAL else 0), (job, ends)


def check_attempts(facts: Facts) -> None:
    """No timeout or lost answer became `failed` (I3); nothing is left `started`."""
    by_state = Counter(attempt["state"] for attempt in facts.attempts)
    assert by_state["started"] == 0, f"attempts left started: {by_state}"
    timed_out_failures = [
        attempt
        for attempt in facts.attempts
        if attempt["state"] == "failed"
        and (attempt["error_kind"] == "unknown" or _sounds_like_timeout(attempt["error"]))
    ]
    assert not timed_out_failures, f"timeouts recorded as failed: {timed_out_failures[:5]}"
    for attempt in facts.attempts:
        if attempt["state"] == "unknown":
            assert attempt["error_kind"] == "unknown", attempt


def _sounds_like_timeout(error: str | None) -> bool:
    text = (error or "").lower()
    return any(word in text for word in ("timeout", "timed out", "no answer within", "lease"))


def check_outbox(facts: Facts, receiver: WebhookReceiver) -> None:
    """One delivered event per terminal job (I8); the receiver saw exactly those, signed."""
    terminal = {job_id for job_id, job in facts.jobs.items() if job["state"] in TERMINAL}
    per_job = Counter(row["job_id"] for row in facts.outbox)
    assert set(per_job) == terminal, "outbox rows and terminal jobs differ"
    assert max(per_job.values(), default=1) == 1, f"jobs with two events: {per_job.most_common(3)}"
    assert facts.dead == 0
    undelivered = [row["id"] for row in facts.outbox if row["delivered_at"] is None]
    assert not undelivered, f"undelivered events: {undelivered[:5]}"

    events = {row["id"]: row for row in facts.outbox}
    assert receiver.delivered_ids == set(events), "the receiver's event ids differ from the outbox"
    bodies: dict[str, bytes] = {}
    for request in receiver.requests:
        header = request.headers.get(SIGNATURE_HEADER.lower(), "")
        assert verify_signature(SECRET.encode(), request.body, header), request.headers
        assert bodies.setdefault(request.event_id, request.body) == request.body
        body = request.json
        assert body["id"] == request.event_id
        job = facts.jobs[events[request.event_id]["job_id"]]
        assert body["data"]["job_id"] == job["id"]
        assert body["data"]["state"] == job["state"]
        assert body["kind"] == f"job.{job['state']}"
