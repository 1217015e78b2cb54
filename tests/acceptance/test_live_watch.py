"""Certification that keeps watching (issue 27), over real HTTP through litellm and a real
SQLite store: two fault servers (tests/providers/fault_server.py), A (primary) and B (backup),
both certified for the task's contract. Then A drifts (broken JSON on a share of its answers,
seeded), and the router's own leader, from live answers alone, suspends A for the contract:
after that A gets no request at all and B takes every job. A healthy A is never suspended.
A whose answers hold every live check but miss a golden case is suspended by the leader's
next golden probe instead.

The counts are the servers' (who was called) and the suspension's own evidence (how many
answers it took), never the clock: each wait ends on an event and has a guard against a hang.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from jobrouter import Router
from jobrouter.certifier import certify_pair, pairs_to_certify
from jobrouter.config import (
    CertificationConfig,
    DatabaseConfig,
    EngineConfig,
    RouterConfig,
    TaskConfig,
    WatchConfig,
    WebhookConfig,
)
from jobrouter.metrics import REGISTRY
from jobrouter.providers import _litellm
from jobrouter.providers.config import ProviderConfig, Transport
from jobrouter.states import JobState
from jobrouter.store.live_watch import Suspension
from tests.providers.fault_server import FaultServer, start_fault_server
from tests.support.waiting import until
from tests.support.webhook_receiver import WebhookReceiver

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
"""
SYSTEM = (
    "You write product titles for a small shop that sells kitchenware, tea and gifts. "
    "Keep every title under eight words, name the product plainly, never invent a brand, "
    "never use exclamation marks, and answer with the JSON object the schema asks for only."
)
SYSTEM_CONTRACT = CONTRACT.replace("prompt:\n", f'prompt:\n  system: "{SYSTEM}"\n')
GOOD = '{"title": "Blue mug"}'
BROKEN = '{"title": "Blue mug"'  # cut short: not JSON
SETTLE_S = 30.0
BOUND = 50  # answers within which a rise to +20 points is caught (docs/certification.md)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, FaultServer]]:
    with ExitStack() as stack:
        yield {name: stack.enter_context(start_fault_server()) for name in ("A", "B")}


@pytest.fixture(autouse=True)
async def _close_litellm_clients() -> AsyncIterator[None]:
    yield
    await _litellm.close_clients()


@pytest.fixture
def config(tmp_path: Path, servers: dict[str, FaultServer]) -> RouterConfig:
    return make_config(tmp_path, servers, CONTRACT)


def make_config(
    tmp_path: Path,
    servers: dict[str, FaultServer],
    text: str,
    transport: Transport = "litellm",
    fold_every: float = 0.05,
) -> RouterConfig:
    """A and B on their fault servers (reset to answer well), the task routing [A, B]."""
    for server in servers.values():
        server.reset(content=GOOD)
    contract = tmp_path / "titles.yaml"
    contract.write_text(text)
    providers = {
        name: ProviderConfig(
            model="openai/fault-model",
            api_base=server.api_base,
            context_window=2048,
            transport=transport,
        )
        for name, server in servers.items()
    }
    return RouterConfig(
        database=DatabaseConfig(url=f"sqlite:///{tmp_path / 'jobs.db'}"),
        providers=providers,
        tasks={"title": TaskConfig(contract=str(contract), providers=["A", "B"])},
        engine=EngineConfig(poll_interval=0.05, sweep_interval=0.2),
        certification=CertificationConfig(watch=WatchConfig(interval=fold_every)),
    )


async def certify_all(config: RouterConfig) -> None:
    async with Router.open(config=config, run_workers=False) as router:
        for pair in pairs_to_certify(config, router.tasks):
            await certify_pair(
                router.store.certifications, router.providers[pair.provider], pair, ttl_days=1
            )


def drifting(share: float, count: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    return [
        {"kind": "answer", "content": BROKEN if rng.random() < share else GOOD}
        for _ in range(count)
    ]


async def run_jobs(router: Router, prefix: str, count: int) -> list[str]:
    """Submit `count` jobs one after the other, each waited for: the providers that won."""
    winners = []
    for i in range(count):
        job = await router.submit("shop", f"{prefix}-{i}", "title", {"product": "Blue mug"})
        job = await router.wait(job.id, timeout=SETTLE_S)
        assert job.state is JobState.SUCCEEDED, job.error
        attempts = {a.id: a.provider for a in await router.attempts(job.id)}
        assert job.winner_attempt_id is not None
        winners.append(attempts[job.winner_attempt_id])
    return winners


async def suspension_of(router: Router, provider: str) -> Suspension | None:
    return (await router.store.certifications.list_suspensions()).get((provider, "titles"))


async def test_a_provider_whose_json_breaks_is_suspended_and_gets_no_more_requests(
    config: RouterConfig, servers: dict[str, FaultServer]
) -> None:
    await certify_all(config)
    servers["A"].control(reset=True, content=GOOD, sequence=drifting(0.22, 400, seed=7))
    async with Router.open(config=config) as router:
        suspension = None
        jobs = 0
        while suspension is None:
            assert jobs < 300, "A was never suspended"
            await run_jobs(router, f"drift-{jobs}", 1)
            jobs += 1
            suspension = await suspension_of(router, "A")
        assert suspension.rule == "failure rate"
        assert suspension.answered <= BOUND, suspension
        assert suspension.failed >= 1 and suspension.sample_attempts
        # The fold that suspended A made this process's gate forget its copy right after
        # its commit (other processes: within their refresh); three jobs leave that instant
        # behind before the count starts.
        await run_jobs(router, "settle", 3)
        before = {name: int(s.stats()["total"]) for name, s in servers.items()}
        winners = await run_jobs(router, "after", 20)
        after = {name: int(s.stats()["total"]) for name, s in servers.items()}
    assert winners == ["B"] * 20
    assert after["A"] - before["A"] == 0
    assert after["B"] - before["B"] == 20


async def test_a_healthy_provider_is_not_suspended(
    config: RouterConfig, servers: dict[str, FaultServer]
) -> None:
    await certify_all(config)
    servers["A"].control(reset=True, content=GOOD, sequence=drifting(0.02, 300, seed=11))
    async with Router.open(config=config) as router:
        winners = await run_jobs(router, "healthy", 200)
        assert await suspension_of(router, "A") is None
        await until(lambda: all_folded(router), "the fold of every verdict")
        watch = (await router.store.live_watch.watches())[("A", "titles")]
    assert watch.answered == 200 and 0 < watch.failed < 20  # the fold ran, and counted them
    assert winners.count("A") >= 190  # the 2% broken answers failed over to B


async def test_a_server_that_drops_the_system_prompt_is_suspended_within_5_answers(
    tmp_path: Path, servers: dict[str, FaultServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted with a chat template that drops the system text: every answer still holds
    the contract, only its prompt count (the provider's usage) shows the model read less. The
    shop's webhook hears of the suspension.
    mutant: the fold does not compare the counts (rendering_off left None): never suspended."""
    monkeypatch.setenv("JR_TEST_HOOK_SECRET", "s3cret")
    async with WebhookReceiver().running() as receiver:
        hook = WebhookConfig(url=receiver.url, secret_env="JR_TEST_HOOK_SECRET")
        config = make_config(tmp_path, servers, SYSTEM_CONTRACT)
        config = config.model_copy(update={"webhooks": {"shop": hook}})
        event = await dropped_system_prompt(config, servers, receiver)
    assert event["data"]["provider"] == "A" and event["data"]["contract"] == "titles"
    assert event["data"]["rule"] == "rendering"


async def announced(receiver: WebhookReceiver) -> dict[str, Any]:
    """The first `provider.suspended` event the receiver gets (a guard against a hang only)."""
    seen = 0
    while True:
        for request in (await receiver.wait_for(seen + 1, within=SETTLE_S))[seen:]:
            if request.headers.get("x-jobrouter-event") == "provider.suspended":
                found: dict[str, Any] = request.json
                return found
            seen += 1


async def dropped_system_prompt(
    config: RouterConfig, servers: dict[str, FaultServer], receiver: WebhookReceiver
) -> dict[str, Any]:
    """Run jobs until A is suspended, check it then gets nothing; the event the hook got."""
    await certify_all(config)
    servers["A"].control(reset=True, content=GOOD, default={"kind": "answer", "system_read": False})
    async with Router.open(config=config) as router:
        suspension = None
        jobs = 0
        while suspension is None:
            assert jobs < 50, "A was never suspended"
            assert await run_jobs(router, f"template-{jobs}", 1) == ["A"]  # the answers hold
            jobs += 1
            suspension = await suspension_of(router, "A")
        assert suspension.rule == "rendering", suspension
        assert suspension.answered <= 5, suspension
        await run_jobs(router, "settle", 3)
        before = int(servers["A"].stats()["total"])
        assert await run_jobs(router, "after", 10) == ["B"] * 10
        assert int(servers["A"].stats()["total"]) == before
        return await announced(receiver)  # delivered by this router's outbox


async def all_folded(router: Router) -> bool:
    return await router.store.live_watch.pending(1) == []


WRONG = '{"title": "Blue cup"}'  # schema-valid, every live check passes; the golden case fails


def probes_sent(provider: str, outcome: str) -> float:
    """The process's `jobrouter_probes_total` for one provider of `titles` (0 before any)."""
    labels = {"provider": provider, "contract": "titles", "outcome": outcome}
    return REGISTRY.get_sample_value("jobrouter_probes_total", labels) or 0.0


def probes_an_hour(config: RouterConfig, per_hour: float) -> RouterConfig:
    watch = config.certification.watch.model_copy(update={"probes_per_hour": per_hour})
    certification = config.certification.model_copy(update={"watch": watch})
    return config.model_copy(update={"certification": certification})


async def test_a_provider_whose_golden_answers_go_wrong_is_suspended_by_the_next_probe(
    tmp_path: Path, servers: dict[str, FaultServer]
) -> None:
    """A answers every live job with a valid JSON of the wrong value: live answers cannot show
    it, the leader's golden probe does. After the suspension, A gets no request at all (no job,
    no probe) while B takes the jobs and goes on being probed.
    mutant: `probed` (router/watch.py) returns the row unsuspended: never suspended.
    mutant: Prober._targets keeps a suspended pair (`key in suspended` dropped): A is probed
    on after its suspension, its request count rises."""
    config = make_config(tmp_path, servers, CONTRACT)
    await certify_all(config)
    servers["A"].control(reset=True, content=WRONG)
    # Live traffic alone (no probes): every answer holds the contract, nothing to see.
    async with Router.open(config=probes_an_hour(config, 0)) as router:
        assert await run_jobs(router, "live", 3) == ["A"] * 3
        await until(lambda: all_folded(router), "the fold of every verdict")
        assert await suspension_of(router, "A") is None
    # One probe a provider every 0.1 s.
    async with Router.open(config=probes_an_hour(config, 36000)) as router:
        await until(lambda: suspension_of(router, "A"), "a suspension of A", within=SETTLE_S)
        suspension = await suspension_of(router, "A")
        assert suspension is not None and suspension.rule == "golden probe", suspension
        assert "mug" in suspension.reason and suspension.sample_attempts == ("probe:mug",)
        # Rounds go through the providers sorted by name: a round that sent B's probe after
        # the one that was in flight at the suspension began after it, and left A out.
        seen = probes_sent("B", "pass")
        await until(lambda: probes_sent("B", "pass") >= seen + 2, "two probes of B")
        before = {name: int(s.stats()["total"]) for name, s in servers.items()}
        winners = await run_jobs(router, "after", 10)
        await until(lambda: probes_sent("B", "pass") >= seen + 4, "two more probes of B")
        after = {name: int(s.stats()["total"]) for name, s in servers.items()}
    assert winners == ["B"] * 10
    assert after["A"] - before["A"] == 0
    assert after["B"] - before["B"] >= 10 + 2  # the jobs, and the probes meanwhile
