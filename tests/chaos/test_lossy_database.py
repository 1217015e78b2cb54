"""Chaos: exclusive jobs while the network to PostgreSQL loses traffic (tests/support/
flaky_proxy.py between the router and the database: statements cut before they reach the
server, answers and COMMIT acknowledgements cut after the server acted).

The issue's measurement (f4844b9, 15% of COMMITs cut): 44 of 100 exclusive jobs ended
`unknown`, 66 of their 92 unknown attempts had been answered, their answers thrown away. Here,
checked by queries and by what the provider recorded:

- every job settles; no attempt is left `started`;
- no exclusive job has two attempts that may have acted (I4);
- every `unknown` attempt's provider received the request;
- no answer is thrown away: every request a provider answered is its job's result, or is kept
  on its attempt for an operator ("answered; result could not be recorded").

The figures are printed (`pytest -rA -s` shows them).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from jobrouter import AttemptState, JobState, Router
from jobrouter import persist as persist_module
from jobrouter.config import CertificationConfig, EngineConfig, RouterConfig, TaskConfig
from tests.store.pg import fresh_database
from tests.support.fakes import FakeProvider, Step
from tests.support.flaky_proxy import FlakyProxy

JOBS = 100
CONCURRENCY = 16
SETTLE_S = 120.0


def config() -> RouterConfig:
    task = TaskConfig(
        providers=["a", "b"], side_effects="external", certification="none", attempt_timeout=10.0
    )
    return RouterConfig(
        tasks={"post": task},
        certification=CertificationConfig(required=False),
        engine=EngineConfig(poll_interval=0.1, sweep_interval=0.5, lease=10.0, claim=10.0),
    )


class Echo(FakeProvider):
    """Answers every request with its own input (the job's key), and remembers which."""

    async def complete(self, request):  # type: ignore[no-untyped-def]
        key = request.messages[-1].content
        self.default = Step(output={"text": key})
        return await super().complete(request)


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_exclusive_jobs_through_a_lossy_database_network() -> None:
    persist_module.set_testing(no_backoff=False)
    a, b = Echo("a"), Echo("b")
    async with fresh_database() as url:
        host, _, rest = url.partition("@")[2].partition(":")
        port = int(rest.split("/", 1)[0])
        proxy = FlakyProxy(port, cut_before=0.0, drop_after=0.0, seed=12)
        await proxy.start()
        lossy = url.replace(f"{host}:{port}", f"127.0.0.1:{proxy.port}")
        try:
            router = await Router.open(lossy, config(), providers={"a": a, "b": b})
            proxy.cut_before, proxy.drop_after = 0.01, 0.03  # once migrated and listening
            jobs = await submit_all(router)
            await settle(router, [job_id for job_id in jobs.values() if job_id])
            proxy.cut_before = proxy.drop_after = 0.0
            facts = await gather(router, jobs)
            await router.close()
        finally:
            await proxy.close()
    answered = {str(call.messages[-1].content) for call in (*a.calls, *b.calls)}
    sent = {
        (p.name, json.loads(call.messages[-1].content)["key"]) for p in (a, b) for call in p.calls
    }
    never_sent = [at for at in facts["unknown_at"] if at not in sent]  # type: ignore[attr-defined]
    print(
        f"\nproxy: {proxy.stats}; submits refused by the store: {facts['refused']}; "
        f"jobs by state: {dict(facts['states'])}; unknown attempts: {facts['unknown']}; "
        f"answers kept unrecorded: {facts['kept']}; provider calls: {len(a.calls)}"
        f"+{len(b.calls)}"
    )
    assert proxy.stats.cut_before + proxy.stats.dropped_after > 0
    assert facts["open"] == [], "attempts left started"
    assert facts["twice"] == [], "exclusive jobs with two attempts that may have acted"
    assert never_sent == [], "unknown attempts whose provider never received the request"
    lost = sorted(answered - facts["recorded"])
    assert lost == [], f"answers thrown away: {lost[:5]}"


async def submit_all(router: Router) -> dict[str, str | None]:
    slots = asyncio.Semaphore(CONCURRENCY)

    async def one(key: str) -> str | None:
        async with slots:
            for _ in range(20):  # a caller retries its submit with the same key
                try:
                    return (await router.submit("chaos", key, "post", {"key": key})).id
                except Exception:
                    await asyncio.sleep(0.05)
            return None

    keys = [f"k{n:03}" for n in range(JOBS)]
    return dict(zip(keys, await asyncio.gather(*(one(k) for k in keys)), strict=True))


async def settle(router: Router, job_ids: list[str]) -> None:
    async with asyncio.timeout(SETTLE_S):
        for job_id in job_ids:
            while True:
                try:
                    await router.wait(job_id, 5.0)
                    break
                except Exception:  # the store refused the read: ask again
                    await asyncio.sleep(0.1)


async def gather(router: Router, jobs: dict[str, str | None]) -> dict[str, object]:
    states: Counter[str] = Counter()
    facts: dict[str, object] = {
        "refused": sum(v is None for v in jobs.values()),
        "open": [],
        "twice": [],
        "unknown_at": [],
    }
    recorded: set[str] = set()
    unknown = kept = 0
    for key, job_id in jobs.items():
        if job_id is None:
            continue
        job = await router.get(job_id)
        states[str(job.state)] += 1
        if job.state is JobState.SUCCEEDED:
            recorded.add(job.result["text"])
        attempts = await router.attempts(job_id)
        if any(x.state is AttemptState.STARTED for x in attempts):
            facts["open"].append(key)  # type: ignore[attr-defined]
        if sum(x.error_kind != "not_sent" for x in attempts) > 1:
            facts["twice"].append(key)  # type: ignore[attr-defined]
        for x in attempts:
            if x.state is AttemptState.UNKNOWN:
                unknown += 1
                facts["unknown_at"].append((x.provider, key))  # type: ignore[attr-defined]
                if isinstance(x.output, dict):
                    kept += 1
                    recorded.add(x.output["text"])
    facts.update(states=states, recorded=recorded, unknown=unknown, kept=kept)
    return facts
