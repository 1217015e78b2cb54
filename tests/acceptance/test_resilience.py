"""Resilience at router level, over real HTTP: the public `Router` on a real SQLite file, the real
`LiteLLMProvider`, and fault servers as subprocesses (tests/providers/fault_server.py).

Circuit breaker (opens, skips, one probe fleet-wide, closes or reopens; a second router process
sees it), bulkhead, deadline budget, hedging, waiting for a provider to recover, one winner
through a lossy network, and one retry layer, each proved by what the servers counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobrouter import Attempt, AttemptState, Job, JobEvent, JobState, Router
from jobrouter.config import (
    BreakerConfig,
    CertificationConfig,
    EngineConfig,
    RouterConfig,
    TaskConfig,
)
from jobrouter.providers import _litellm, resilience
from jobrouter.providers.config import ProviderConfig, RetryPolicy, Timeouts
from tests.providers.fault_server import FaultServer, start_fault_server

ROOT = Path(__file__).resolve().parents[2]
OWNER = "shop-1"
SETTLE = 60.0  # a guard only: one job settles in well under a second
COOLDOWN = 1.0


# ---- fault servers and litellm -------------------------------------------------------------


@dataclass
class Servers:
    a: FaultServer
    b: FaultServer
    c: FaultServer


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with start_fault_server() as a, start_fault_server() as b, start_fault_server() as c:
        _warm_litellm(a)
        yield Servers(a, b, c)


def _warm_litellm(server: FaultServer) -> None:
    """Import litellm and make one call, so no deadline in a test pays litellm's first use."""
    litellm = _litellm.load()

    async def one_call() -> None:
        await litellm.acompletion(
            model="openai/warm-up",
            messages=[{"role": "user", "content": "hi"}],
            api_base=server.api_base,
            api_key="k",
            num_retries=0,
            max_retries=0,
        )
        await _litellm.close_clients()

    asyncio.run(one_call())


@pytest.fixture
def fault(servers: Servers) -> Servers:
    """The three servers, counters reset, every one answering at once."""
    for server in (servers.a, servers.b, servers.c):
        server.reset()
    return servers


@pytest.fixture(autouse=True)
def _no_backoff() -> Iterator[None]:
    resilience.set_testing(no_backoff=True)
    yield
    resilience.set_testing(no_backoff=False)


@pytest.fixture(autouse=True)
async def _close_litellm_clients() -> AsyncIterator[None]:
    yield
    await _litellm.close_clients()


# ---- configuration and queries -------------------------------------------------------------


def provider(api_base: str, **fields: Any) -> ProviderConfig:
    fields.setdefault("retry", RetryPolicy(attempts=1))
    return ProviderConfig(
        model="openai/fault-model", api_base=api_base, structured_output="none", **fields
    )


def config(
    providers: Mapping[str, ProviderConfig],
    tasks: Mapping[str, TaskConfig],
    *,
    threshold: int = 3,
    cooldown: float = COOLDOWN,
    probe_timeout: float = 5.0,
    workers: int = 64,
) -> RouterConfig:
    return RouterConfig(
        providers=dict(providers),
        tasks=dict(tasks),
        engine=EngineConfig(workers=workers, poll_interval=0.05, sweep_interval=0.5, lease=5.0),
        breaker=BreakerConfig(
            failure_threshold=threshold, cooldown=cooldown, probe_timeout=probe_timeout
        ),
        certification=CertificationConfig(required=False),
    )


def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


async def run_job(router: Router, task: str, key: str) -> Job:
    job = await router.submit(OWNER, key, task, {"key": key})
    return await router.wait(job.id, timeout=SETTLE)


async def settled_attempts(router: Router, job_id: str, within: float = SETTLE) -> list[Attempt]:
    """The job's attempts once none is still `started` (a hedge loser is stopped and recorded
    just after the winner settles the job)."""
    async with asyncio.timeout(within):
        while True:
            attempts = await router.attempts(job_id)
            if all(a.state is not AttemptState.STARTED for a in attempts):
                return attempts
            await asyncio.sleep(0.02)


def circuit(tmp_path: Path, name: str) -> dict[str, Any] | None:
    """The provider's row in the `circuits` table, read from the file by another connection."""
    path = f"file:{tmp_path / 'jobs.db'}?mode=ro"
    with contextlib.closing(sqlite3.connect(path, uri=True)) as db:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM circuits WHERE provider = ?", (name,)).fetchone()
    return dict(row) if row else None


def skip_reasons(events: list[JobEvent], name: str) -> list[str]:
    return [
        str(e.data["reason"])
        for e in events
        if e.kind == "provider.skipped" and e.data.get("provider") == name
    ]


def states(attempts: list[Attempt]) -> dict[str, AttemptState]:
    return {a.provider: a.state for a in attempts}


def requests(server: FaultServer) -> int:
    return int(server.stats()["total"])


# ---- 1. circuit breaker --------------------------------------------------------------------

FAILOVER = TaskConfig(providers=["bad", "good"], side_effects="none")


def breaker_config(fault: Servers) -> RouterConfig:
    return config(
        {"bad": provider(fault.a.api_base), "good": provider(fault.b.api_base)},
        {"t": FAILOVER},
        threshold=3,
    )


async def open_circuit(router: Router, tmp_path: Path, fault: Servers, *, prefix: str) -> float:
    """Three jobs whose `bad` attempt gets HTTP 500: the third failure opens the circuit."""
    fault.a.control(default={"kind": "status", "status": 500})
    for n in range(3):
        row = circuit(tmp_path, "bad")
        assert row is None or row["state"] == "closed"
        job = await run_job(router, "t", f"{prefix}-{n}")
        assert job.state is JobState.SUCCEEDED
        assert states(await router.attempts(job.id)) == {
            "bad": AttemptState.FAILED,
            "good": AttemptState.SUCCEEDED,
        }
    row = circuit(tmp_path, "bad")
    assert row is not None and (row["state"], row["failures"]) == ("open", 3)
    assert requests(fault.a) == 3
    return float(row["opened_at"])


async def test_breaker_opens_skips_then_one_probe_closes_it(tmp_path: Path, fault: Servers) -> None:
    began = time.time()
    async with Router.open(db_url(tmp_path), breaker_config(fault)) as router:
        opened_at = await open_circuit(router, tmp_path, fault, prefix="fail")

        # Open: jobs skip `bad` with the reason on their log, and `bad` hears nothing.
        for n in range(3):
            job = await run_job(router, "t", f"open-{n}")
            assert job.state is JobState.SUCCEEDED
            assert states(await router.attempts(job.id)) == {"good": AttemptState.SUCCEEDED}
            [reason] = skip_reasons(await router.events(job.id), "bad")
            assert "circuit open" in reason
        assert requests(fault.a) == 3

        # Half-open: several jobs at once after the cooldown; exactly one of them probes.
        fault.a.control(default={"kind": "delay", "seconds": 0.5})
        await asyncio.sleep(max(0.0, opened_at + COOLDOWN - time.time()) + 0.05)
        submitted = await asyncio.gather(
            *(router.submit(OWNER, f"probe-{n}", "t", {"n": n}) for n in range(6))
        )
        jobs = [await router.wait(job.id, timeout=SETTLE) for job in submitted]
        assert all(job.state is JobState.SUCCEEDED for job in jobs)
        assert requests(fault.a) == 4  # exactly one probe reached the server
        probes = [a for job in jobs for a in await router.attempts(job.id) if a.provider == "bad"]
        [probe] = probes
        assert probe.state is AttemptState.SUCCEEDED
        row = circuit(tmp_path, "bad")
        assert row is not None and (row["state"], row["failures"]) == ("closed", 0)
        closed_at = float(row["updated_at"])

        # Closed: `bad` is first choice again.
        fault.a.control(default="answer")
        job = await run_job(router, "t", "after")
        assert states(await router.attempts(job.id)) == {"bad": AttemptState.SUCCEEDED}
        assert requests(fault.a) == 5
    print(
        f"\nbreaker: opened after 3 failures at t={opened_at - began:.2f}s, probe started at "
        f"t={probe.started_at.timestamp() - began:.2f}s (cooldown {COOLDOWN}s), closed at "
        f"t={closed_at - began:.2f}s"
    )
    assert probe.started_at.timestamp() >= opened_at + COOLDOWN


async def test_a_failed_probe_reopens_the_circuit(tmp_path: Path, fault: Servers) -> None:
    began = time.time()
    async with Router.open(db_url(tmp_path), breaker_config(fault)) as router:
        opened_at = await open_circuit(router, tmp_path, fault, prefix="fail")
        await asyncio.sleep(max(0.0, opened_at + COOLDOWN - time.time()) + 0.05)
        submitted = await asyncio.gather(
            *(router.submit(OWNER, f"probe-{n}", "t", {"n": n}) for n in range(6))
        )
        jobs = [await router.wait(job.id, timeout=SETTLE) for job in submitted]
        assert all(job.state is JobState.SUCCEEDED for job in jobs)  # through `good`
        assert requests(fault.a) == 4  # one probe, answered 500
        [probe] = [a for job in jobs for a in await router.attempts(job.id) if a.provider == "bad"]
        assert (probe.state, probe.error_kind) == (AttemptState.FAILED, "rejected")
        row = circuit(tmp_path, "bad")
        assert row is not None and row["state"] == "open"
        reopened_at = float(row["opened_at"])
        assert reopened_at > opened_at  # a new cooldown starts at the failed probe

        job = await run_job(router, "t", "reopened")
        assert states(await router.attempts(job.id)) == {"good": AttemptState.SUCCEEDED}
        assert any("circuit open" in r for r in skip_reasons(await router.events(job.id), "bad"))
        assert requests(fault.a) == 4
    print(
        f"\nbreaker: opened at t={opened_at - began:.2f}s, probe at "
        f"t={probe.started_at.timestamp() - began:.2f}s failed, reopened at "
        f"t={reopened_at - began:.2f}s"
    )


async def test_jobs_waiting_on_the_probe_run_once_it_closes_the_circuit(
    tmp_path: Path, fault: Servers
) -> None:
    """Jobs whose only provider is being probed wait for the probe, not for the probe timeout."""
    probe_timeout = 300.0  # far beyond any wait a loaded machine adds: the two cannot blur
    solo = TaskConfig(providers=["bad"], side_effects="none")
    cfg = config(
        {"bad": provider(fault.a.api_base), "good": provider(fault.b.api_base)},
        {"t": FAILOVER, "solo": solo},
        threshold=3,
        probe_timeout=probe_timeout,
    )
    async with Router.open(db_url(tmp_path), cfg) as router:
        opened_at = await open_circuit(router, tmp_path, fault, prefix="fail")
        fault.a.control(default={"kind": "delay", "seconds": 0.3})
        await asyncio.sleep(max(0.0, opened_at + COOLDOWN - time.time()) + 0.05)
        began = time.time()
        submitted = await asyncio.gather(
            *(router.submit(OWNER, f"solo-{n}", "solo", {"n": n}) for n in range(4))
        )
        jobs = [await router.wait(job.id, timeout=SETTLE) for job in submitted]
        took = time.time() - began
        events = [e for job in jobs for e in await router.events(job.id)]
        attempts = [a for job in jobs for a in await router.attempts(job.id)]
    assert all(job.state is JobState.SUCCEEDED for job in jobs)
    assert requests(fault.a) == 3 + 4  # one probe, then the other three once it closed
    assert len(attempts) == 4
    waited = [e.data["reason"] for e in events if e.kind == "provider.skipped"]
    assert waited and all(r == "circuit half-open: a probe is in flight" for r in waited)
    print(
        f"\nhalf-open: 4 jobs on a probed provider settled in {took:.2f}s "
        f"(probe timeout {probe_timeout}s)"
    )
    assert took < probe_timeout / 5, took  # before: every waiting job idled until probe_until


# ---- 2. a second router process sees the open circuit ---------------------------------------


async def test_a_second_router_process_sees_the_open_circuit(
    tmp_path: Path, fault: Servers
) -> None:
    """Router B (a subprocess on the same file) is given a task whose only provider is `bad`:
    had it not seen the circuit open, it would have called `bad`."""
    solo = TaskConfig(providers=["bad"], side_effects="none", deadline=1.0)
    cfg = config(
        {"bad": provider(fault.a.api_base), "good": provider(fault.b.api_base)},
        {"t": FAILOVER, "solo": solo},
        threshold=3,
        cooldown=3600.0,
    )
    async with Router.open(db_url(tmp_path), cfg) as router:
        await open_circuit(router, tmp_path, fault, prefix="a")
        (tmp_path / "config.json").write_text(cfg.model_dump_json())
        done = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "tests.support.router_once",
                "--db",
                db_url(tmp_path),
                "--config",
                str(tmp_path / "config.json"),
                "--task",
                "solo",
                "--key",
                "from-b",
                "--timeout",
                str(SETTLE),
            ],
            # Guards only: a fresh process imports litellm (seconds of CPU; minutes under heavy
            # load), and the circuit's cooldown above outlasts any such wait.
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=SETTLE * 5,
        )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    skipped = [
        e["data"]["reason"]
        for e in seen["events"]
        if e["kind"] == "provider.skipped" and e["data"]["provider"] == "bad"
    ]
    assert skipped and all("circuit open after 3 failures" in r for r in skipped), skipped
    assert seen["attempts"] == []
    assert seen["job"]["state"] == "failed"
    assert "bad: circuit open" in seen["job"]["error"]
    assert requests(fault.a) == 3  # all three from router A: B never called `bad`


# ---- 3. bulkhead ---------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "expect_max"), [(2, 2), (6, None)])
async def test_bulkhead_caps_calls_in_flight(
    tmp_path: Path, fault: Servers, limit: int, expect_max: int | None
) -> None:
    fault.a.control(default={"kind": "delay", "seconds": 0.3})
    cfg = config(
        {"p": provider(fault.a.api_base, max_concurrency=limit)},
        {"t": TaskConfig(providers=["p"], side_effects="none")},
    )
    async with Router.open(db_url(tmp_path), cfg) as router:
        submitted = await asyncio.gather(
            *(router.submit(OWNER, f"k{n}", "t", {"n": n}) for n in range(10))
        )
        jobs = [await router.wait(job.id, timeout=SETTLE) for job in submitted]
    assert all(job.state is JobState.SUCCEEDED for job in jobs)
    stats = fault.a.stats()
    assert stats["total"] == 10
    if expect_max is not None:
        assert stats["max_in_flight"] == expect_max
    else:
        assert stats["max_in_flight"] > 2  # the stat does see concurrency


# ---- 4. deadline budget --------------------------------------------------------------------


async def test_the_deadline_cuts_the_attempt_as_unknown(tmp_path: Path, fault: Servers) -> None:
    fault.a.control(default="hang")
    # The read timeout is far beyond the deadline: only the deadline can end the attempt early.
    cfg = config(
        {"p": provider(fault.a.api_base, timeout=Timeouts(read=120.0))},
        {"t": TaskConfig(providers=["p"], side_effects="none", deadline=1.5)},
    )
    async with Router.open(db_url(tmp_path), cfg) as router:
        began = time.monotonic()
        job = await run_job(router, "t", "k1")
        took = time.monotonic() - began
        [attempt] = await router.attempts(job.id)
    assert job.state is JobState.UNKNOWN  # needs attention, never failed (I3)
    assert (attempt.state, attempt.error_kind) == (AttemptState.UNKNOWN, "unknown")
    assert attempt.latency_ms is not None and 1200 <= attempt.latency_ms <= 60_000
    assert 1.3 <= took <= 60.0, took  # cut by the 1.5 s deadline, not the 120 s read timeout
    assert requests(fault.a) == 1


# ---- 5. hedging ----------------------------------------------------------------------------


async def test_hedge_wins_and_the_slow_primary_never_succeeds(
    tmp_path: Path, fault: Servers
) -> None:
    fault.a.control(default={"kind": "delay", "seconds": 2.0})
    task = TaskConfig(providers=["slow", "fast"], side_effects="none", hedge_after=0.3)
    cfg = config(
        {"slow": provider(fault.a.api_base), "fast": provider(fault.b.api_base)}, {"t": task}
    )
    async with Router.open(db_url(tmp_path), cfg) as router:
        began = time.monotonic()
        job = await run_job(router, "t", "k1")
        took = time.monotonic() - began
        attempts = await settled_attempts(router, job.id)
        events = await router.events(job.id)
    assert job.state is JobState.SUCCEEDED
    assert took < 1.5, took
    by = {a.provider: a for a in attempts}
    assert by["fast"].state is AttemptState.SUCCEEDED and job.winner_attempt_id == by["fast"].id
    assert by["slow"].state in (AttemptState.CANCELLED, AttemptState.LOST)
    assert [a.state for a in attempts].count(AttemptState.SUCCEEDED) == 1
    assert any(e.kind == "attempt.hedged" for e in events)
    hedge_gap = by["fast"].started_at.timestamp() - by["slow"].started_at.timestamp()
    assert 0.25 <= hedge_gap <= 1.0, hedge_gap
    assert fault.a.stats()["completed"] == 0  # the primary was stopped before it answered


async def test_an_exclusive_task_never_hedges(tmp_path: Path, fault: Servers) -> None:
    fault.a.control(default={"kind": "delay", "seconds": 1.0})
    task = TaskConfig(providers=["slow", "fast"], side_effects="external", hedge_after=0.2)
    cfg = config(
        {"slow": provider(fault.a.api_base), "fast": provider(fault.b.api_base)}, {"t": task}
    )
    async with Router.open(db_url(tmp_path), cfg) as router:
        job = await run_job(router, "t", "k1")
        attempts = await router.attempts(job.id)
    assert job.state is JobState.SUCCEEDED
    assert [(a.provider, a.state) for a in attempts] == [("slow", AttemptState.SUCCEEDED)]
    assert requests(fault.b) == 0


# ---- 6. graceful degradation: every circuit open -------------------------------------------


async def test_all_circuits_open_the_job_waits_or_ends_naming_every_provider(
    tmp_path: Path, fault: Servers
) -> None:
    cooldown = 2.0
    cfg = config(
        {
            "a": provider(fault.a.api_base),
            "b": provider(fault.b.api_base),
            "c": provider(fault.c.api_base),
        },
        {
            "pair": TaskConfig(providers=["a", "b"], side_effects="none"),
            "short": TaskConfig(providers=["a", "b"], side_effects="none", deadline=0.5),
            "other": TaskConfig(providers=["c"]),
        },
        threshold=1,
        cooldown=cooldown,
    )
    for server in (fault.a, fault.b):
        server.control(default={"kind": "status", "status": 500})
    async with Router.open(db_url(tmp_path), cfg) as router:
        first = await run_job(router, "pair", "fails")
        assert first.state is JobState.FAILED
        opened = [circuit(tmp_path, name) for name in ("a", "b")]
        assert all(row is not None and row["state"] == "open" for row in opened)
        reopen_at = min(float(row["opened_at"]) for row in opened if row) + cooldown
        for server in (fault.a, fault.b):
            server.control(default="answer")

        # A deadline shorter than the cooldown: the job ends, naming each provider and why.
        short = await run_job(router, "short", "short")
        assert short.state is JobState.FAILED
        assert time.time() < reopen_at
        for name in ("a", "b"):
            assert f"{name}: circuit open" in (short.error or ""), short.error
        assert {
            *skip_reasons(await router.events(short.id), "a"),
            *skip_reasons(await router.events(short.id), "b"),
        }
        assert await router.attempts(short.id) == []
        print(f"\nall circuits open, deadline first: {short.error}")

        # Time enough: the job waits (with the reason on its log), then runs once one recovers.
        job = await router.submit(OWNER, "waits", "pair", {"n": 1})
        job = await router.wait(job.id, timeout=SETTLE)
        finished = time.time()
        events = await router.events(job.id)
    assert job.state is JobState.SUCCEEDED
    waiting = [e for e in events if e.kind == "job.waiting"]
    assert waiting and "recover" in str(waiting[0].data["reason"])
    assert finished >= reopen_at - 0.01
    assert requests(fault.a) + requests(fault.b) == 3  # two failures, then one probe
    assert requests(fault.c) == 0  # never a provider outside the task's list


# ---- 7. one winner through a lossy network -------------------------------------------------

JOBS = 200
CONCURRENCY = 20


async def test_two_hundred_jobs_through_a_lossy_proxy_each_have_one_winner(
    tmp_path: Path, fault: Servers
) -> None:
    upstream = fault.a
    with start_fault_server(
        "--upstream", upstream.url, "--drop-share", "0.025", "--seed", "11"
    ) as proxy:
        cfg = config(
            {"primary": provider(proxy.api_base), "fallback": provider(upstream.api_base)},
            {"t": TaskConfig(providers=["primary", "fallback"], side_effects="none")},
            threshold=50,
            workers=CONCURRENCY,
        )
        slots = asyncio.Semaphore(CONCURRENCY)
        began = time.monotonic()
        async with Router.open(db_url(tmp_path), cfg) as router:

            async def one(n: int) -> Job:
                async with slots:
                    return await run_job(router, "t", f"k{n}")

            jobs = await asyncio.gather(*(one(n) for n in range(JOBS)))
            took = time.monotonic() - began
            attempts = {job.id: await router.attempts(job.id) for job in jobs}
        proxy_stats = proxy.stats()
    assert all(job.state is JobState.SUCCEEDED for job in jobs)
    for job in jobs:
        won = [a for a in attempts[job.id] if a.state is AttemptState.SUCCEEDED]
        assert len(won) == 1 and job.winner_attempt_id == won[0].id
    every = [a for tried in attempts.values() for a in tried]
    unknown = [a for a in every if a.state is AttemptState.UNKNOWN]
    failed = [a for a in every if a.state is AttemptState.FAILED]
    failovers = sum(len(tried) > 1 for tried in attempts.values())
    assert failed == []  # a lost answer is never a failure
    assert all(a.provider == "primary" and a.error_kind == "unknown" for a in unknown)
    assert len(unknown) == proxy_stats["dropped"] == failovers > 0
    assert proxy_stats["total"] == JOBS and upstream.stats()["total"] == JOBS + failovers
    print(
        f"\nlossy proxy: {JOBS} jobs in {took:.1f}s, succeeded "
        f"{sum(job.state is JobState.SUCCEEDED for job in jobs)}, unknown attempts "
        f"{len(unknown)}, failovers {failovers}, proxy dropped {proxy_stats['dropped']}"
    )


# ---- 8. retries in one layer, counted at the server -----------------------------------------


async def test_an_http_500_is_one_request_and_fails_over(tmp_path: Path, fault: Servers) -> None:
    """Fails over because repeating is harmless here (side_effects none); an exclusive task
    waits for an operator instead (tests/acceptance/test_outcome_table.py)."""
    fault.a.control(default={"kind": "status", "status": 500})
    cfg = config(
        {
            "p": provider(fault.a.api_base, retry=RetryPolicy(attempts=3)),
            "q": provider(fault.b.api_base),
        },
        {"t": TaskConfig(providers=["p", "q"], side_effects="none")},
    )
    async with Router.open(db_url(tmp_path), cfg) as router:
        job = await run_job(router, "t", "k1")
        attempts = await router.attempts(job.id)
    assert job.state is JobState.SUCCEEDED
    assert [(a.provider, a.state, a.error_kind) for a in attempts] == [
        ("p", AttemptState.FAILED, "rejected"),
        ("q", AttemptState.SUCCEEDED, None),
    ]
    assert requests(fault.a) == 1  # 500 is an answer: no retry
    assert requests(fault.b) == 1


async def test_a_refused_connection_is_retried_then_fails_over(
    tmp_path: Path, fault: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = config(
        {
            "p": provider(f"http://127.0.0.1:{port}/v1", retry=RetryPolicy(attempts=3)),
            "q": provider(fault.b.api_base),
        },
        {"t": TaskConfig(providers=["p", "q"])},
    )
    async with Router.open(db_url(tmp_path), cfg) as router:
        refused = router.providers["p"]
        tries: list[float] = []
        real_attempt = refused._attempt  # type: ignore[attr-defined]

        async def counted(*args: Any) -> Any:
            tries.append(time.monotonic())
            return await real_attempt(*args)

        monkeypatch.setattr(refused, "_attempt", counted)
        job = await run_job(router, "t", "k1")
        attempts = await router.attempts(job.id)
    assert job.state is JobState.SUCCEEDED
    assert [(a.provider, a.state, a.error_kind) for a in attempts] == [
        ("p", AttemptState.FAILED, "not_sent"),
        ("q", AttemptState.SUCCEEDED, None),
    ]
    assert len(tries) == 3  # our one retry layer; litellm's own retries are off
    assert requests(fault.b) == 1
