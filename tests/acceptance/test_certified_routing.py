"""I5 over real HTTP: a job fails over only to providers certified for its task's contract.

Three fault servers (tests/providers/fault_server.py) act as OpenAI-compatible providers reached
through litellm: A (primary), C and B (fallback); the task routes [A, C, B]. A and B answer a title
that passes the contract's golden cases; C answers schema-valid JSON that misses them, so its
certification fails. The request counts at the servers prove who was called and who never was.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobrouter import Router
from jobrouter.certifier import Cell, certify_pair, matrix, pairs_to_certify
from jobrouter.config import DatabaseConfig, EngineConfig, RouterConfig, TaskConfig, load_config
from jobrouter.models import Job, JobEvent
from jobrouter.providers import _litellm
from jobrouter.providers.config import ProviderConfig
from jobrouter.states import JobState
from tests.providers.fault_server import FaultServer, start_fault_server

CONTRACT = """\
name: titles
version: 1
side_effects: none
prompt:
  user: "Write a short shop title for: {{ product }}"
output_schema:
  type: object
  required: [title]
  properties: {title: {type: string}}
sampling: {temperature: 0, max_tokens: 40, repeats: 2}
cases:
  - name: mug
    input: {product: Blue ceramic mug}
    expect: [{type: contains, path: title, value: mug}]
  - name: tea
    input: {product: Saffron tea}
    expect: [{type: contains, path: title, value: tea}]
"""
GOOD = '{"title": "Blue mug and saffron tea"}'  # passes both golden cases
OFF_TOPIC = '{"title": "A lovely gift"}'  # schema-valid, misses every expectation
ROUTE = ("A", "C", "B")
RUNS = 2 * 2  # cases x repeats: requests one certification makes
SETTLE_S = 30.0


def how(provider: str) -> str:
    return f"jobrouter contracts run --provider {provider} --contract titles"


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, FaultServer]]:
    with ExitStack() as stack:
        yield {name: stack.enter_context(start_fault_server()) for name in ROUTE}


@pytest.fixture
def fleet(servers: dict[str, FaultServer]) -> dict[str, FaultServer]:
    """Every server reset: A and B answer correctly, C answers off-topic."""
    for name, server in servers.items():
        server.reset(content=OFF_TOPIC if name == "C" else GOOD)
    return servers


@pytest.fixture(autouse=True)
async def _close_litellm_clients() -> AsyncIterator[None]:
    yield
    await _litellm.close_clients()


@dataclass
class Setup:
    contract: Path
    db: str
    servers: dict[str, FaultServer]

    def config(self, models: dict[str, str] | None = None) -> RouterConfig:
        models = models or {}
        providers = {
            name: ProviderConfig(
                model=models.get(name, "openai/fault-model"),
                api_base=server.api_base,
                context_window=2048,
            )
            for name, server in self.servers.items()
        }
        task = TaskConfig(contract=str(self.contract), providers=list(ROUTE), deadline=SETTLE_S)
        return RouterConfig(
            database=DatabaseConfig(url=self.db),
            providers=providers,
            tasks={"title": task},
            engine=EngineConfig(poll_interval=0.05, sweep_interval=0.2),
        )

    def requests(self) -> dict[str, int]:
        return {name: int(server.stats()["total"]) for name, server in self.servers.items()}

    def fail(self, name: str) -> None:
        self.servers[name].control(default={"kind": "status", "status": 500})


@pytest.fixture
def setup(tmp_path: Path, fleet: dict[str, FaultServer]) -> Setup:
    contract = tmp_path / "titles.yaml"
    contract.write_text(CONTRACT)
    return Setup(contract, f"sqlite:///{tmp_path / 'jobs.db'}", fleet)


async def certify(
    config: RouterConfig,
    only: str | None = None,
    *,
    now: datetime | None = None,
    ttl_days: float = 7.0,
) -> list[Cell]:
    """Certify every routed pair (or `only` one provider's) and return the stored matrix."""
    async with Router.open(config=config, run_workers=False) as router:
        for pair in pairs_to_certify(config, router.tasks, provider=only):
            await certify_pair(
                router.store.certifications,
                router.providers[pair.provider],
                pair,
                ttl_days=ttl_days,
                now=now,
            )
    return await stored_matrix(config)


async def stored_matrix(config: RouterConfig) -> list[Cell]:
    """The matrix as stored, without calling any provider."""
    async with Router.open(config=config, run_workers=False) as router:
        return await matrix(
            router.store.certifications, router.providers, pairs_to_certify(config, router.tasks)
        )


async def run_job(config: RouterConfig, key: str) -> tuple[Job, list[str], list[JobEvent]]:
    """Submit one title job, wait for it to settle: the job, its attempts' providers, events."""
    async with Router.open(config=config) as router:
        job = await router.submit("shop", key, "title", {"product": "Blue ceramic mug"})
        job = await router.wait(job.id, timeout=SETTLE_S)
        attempts = [attempt.provider for attempt in await router.attempts(job.id)]
        return job, attempts, await router.events(job.id)


def skipped(events: list[JobEvent]) -> dict[str, str]:
    return {
        str(e.data["provider"]): str(e.data["reason"])
        for e in events
        if e.kind == "provider.skipped"
    }


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: after[name] - before[name] for name in before}


async def test_certification_passes_the_good_providers_and_fails_the_off_topic_one(
    setup: Setup,
) -> None:
    before = setup.requests()
    cells = {cell.provider: cell for cell in await certify(setup.config())}
    assert {name: cell.status for name, cell in cells.items()} == {
        "A": "pass",
        "C": "fail",
        "B": "pass",
    }
    assert delta(before, setup.requests()) == {"A": RUNS, "C": RUNS, "B": RUNS}
    failed = cells["C"].certification
    assert failed is not None and not failed.passed
    assert failed.first_failure is not None
    assert failed.first_failure.startswith(
        "mug: behaviour: contains: run 1/2: case expectation at title"
    )


async def test_failover_skips_the_uncertified_provider_and_reaches_the_certified_one(
    setup: Setup,
) -> None:
    config = setup.config()
    await certify(config)
    setup.fail("A")
    before = setup.requests()
    for key in ("job-1", "job-2"):
        job, attempts, events = await run_job(config, key)
        assert job.state is JobState.SUCCEEDED, job.error
        assert job.result == {"title": "Blue mug and saffron tea"}
        assert attempts == ["A", "B"]
        reasons = skipped(events)
        assert set(reasons) == {"C"}
        assert reasons["C"].startswith(
            "certification for 'titles' failed: mug: behaviour: contains: run 1/2:"
        )
        assert how("C") in reasons["C"]
        # re-running is no fix for a failed one: the reason names the check to fix first
        assert (
            "; failing checks: behaviour: contains; certifying again will not pass"
            in (reasons["C"])
        )
        assert "certify it:" not in reasons["C"]
    assert delta(before, setup.requests()) == {"A": 2, "C": 0, "B": 2}


async def test_editing_the_contract_makes_every_certification_stale(setup: Setup) -> None:
    config = setup.config()
    await certify(config)
    setup.contract.write_text(CONTRACT.replace("value: tea", "value: saffron"))
    cells = await stored_matrix(config)
    assert {(c.provider, c.status, c.detail) for c in cells} == {
        (name, "stale", "stale: contract changed") for name in ROUTE
    }
    await _fails_fast_naming_every_provider(setup, config, "stale: contract changed")


async def test_a_job_with_no_certified_candidate_fails_fast(setup: Setup) -> None:
    await _fails_fast_naming_every_provider(setup, setup.config(), "not certified")


async def _fails_fast_naming_every_provider(
    setup: Setup, config: RouterConfig, reason: str
) -> None:
    before = setup.requests()
    job, attempts, events = await run_job(config, "doomed")
    assert job.state is JobState.FAILED
    assert attempts == []
    assert delta(before, setup.requests()) == {"A": 0, "C": 0, "B": 0}
    assert job.error is not None and job.error.startswith("no provider left to try")
    for name in ROUTE:
        assert f"{name}: " in job.error and how(name) in job.error
    assert job.error.count(reason) == len(ROUTE)
    assert set(skipped(events)) == set(ROUTE)
    assert "job.waiting" not in {event.kind for event in events}  # refused at once, no waiting


async def test_changing_a_providers_model_makes_its_certification_stale(setup: Setup) -> None:
    await certify(setup.config())
    changed = setup.config(models={"B": "openai/fault-model-v2"})
    cells = await stored_matrix(changed)
    assert {c.provider: (c.status, c.detail) for c in cells}["B"] == (
        "stale",
        "stale: provider changed",
    )
    setup.fail("A")
    before = setup.requests()
    job, attempts, events = await run_job(changed, "model-changed")
    assert job.state is JobState.FAILED and attempts == ["A"]
    assert delta(before, setup.requests()) == {"A": 1, "C": 0, "B": 0}
    reason = skipped(events)["B"]
    assert reason == f"certification for 'titles' stale: provider changed; certify it: {how('B')}"


async def test_an_expired_certification_is_refused(setup: Setup) -> None:
    config = setup.config()
    await certify(config, now=datetime.now(UTC) - timedelta(days=2), ttl_days=1)
    cells = await certify(config, only="A")  # A fresh; C and B expired a day ago
    assert {c.provider: c.status for c in cells} == {"A": "pass", "C": "expired", "B": "expired"}
    setup.fail("A")
    before = setup.requests()
    job, attempts, events = await run_job(config, "expired")
    assert job.state is JobState.FAILED and attempts == ["A"]
    assert delta(before, setup.requests()) == {"A": 1, "C": 0, "B": 0}
    reasons = skipped(events)
    assert set(reasons) == {"C", "B"}
    assert reasons["B"].startswith("certification for 'titles' expired at ")
    assert how("B") in reasons["B"]


def _config_file(setup: Setup, path: Path) -> Path:
    """`setup.config()` as a TOML file (what an operator has)."""
    parts = [f'[database]\nurl = "{setup.db}"\n', "[engine]\npoll_interval = 0.05\n"]
    for name, server in setup.servers.items():
        parts.append(
            f'[providers.{name}]\nmodel = "openai/fault-model"\n'
            f'api_base = "{server.api_base}"\ncontext_window = 2048\n'
        )
    parts.append(
        f'[tasks.title]\ncontract = "{setup.contract}"\nproviders = {list(ROUTE)!r}\n'
        f"deadline = {SETTLE_S}\n".replace("'", '"')
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts))
    return path


async def test_the_printed_command_runs_as_printed_from_another_folder(
    setup: Setup, tmp_path: Path
) -> None:
    """Issue 32 item 4: the refusal printed `jobrouter contracts run --provider A --contract
    titles` without the --config it needs; run from another folder it found nothing to certify.
    mutant: certify_command without its --config, seen failing (built-in defaults, nothing to
    certify)."""
    config = load_config(_config_file(setup, tmp_path / "conf" / "jobrouter.toml"))
    job, attempts, events = await run_job(config, "printed")
    assert (job.state, attempts) == (JobState.FAILED, [])
    command = skipped(events)["A"].split("; certify it: ", 1)[1]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "JOBROUTER_CONFIG"} | {"COLUMNS": "200"}
    argv = shlex.split(command)
    assert argv[0] == "jobrouter"
    done = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "jobrouter",
        *argv[1:],
        cwd=elsewhere,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(done.communicate(), timeout=300)
    assert done.returncode == 0, output.decode()
    assert command.startswith(how("A") + " --config ")
    assert {c.provider: c.status for c in await stored_matrix(config)}["A"] == "pass"
