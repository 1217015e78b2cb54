"""The state gauge of issue 27 as operators scrape it: `jobrouter_certification_suspended`
per provider x contract on the real `/metrics` route reads 1 once the router's own leader
has suspended a pair from its live answers, and 0 again after an operator's reinstatement
(real SQLite file; the providers are in-process fakes, the gauge is the router's own)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from jobrouter import Router
from jobrouter.config import (
    CertificationConfig,
    DatabaseConfig,
    EngineConfig,
    RouterConfig,
    TaskConfig,
    WatchConfig,
)
from jobrouter.http.app import create_app
from jobrouter.states import JobState
from jobrouter.watch import reinstate
from tests.store.test_gate_forget import certify
from tests.support.fakes import FakeProvider, Step

SETTLE_S = 30.0
# Names of this test's own: the registry is the process's, other tests' pairs stay in it.
WATCHED, BACKUP = "gauge-a", "gauge-b"
INPUT = {"product": {"name": "t"}, "tone": "warm"}


def config(tmp_path: Path) -> RouterConfig:
    return RouterConfig(
        database=DatabaseConfig(url=f"sqlite:///{tmp_path / 'jobs.db'}"),
        tasks={"caption": TaskConfig(contract="caption", providers=[WATCHED, BACKUP])},
        engine=EngineConfig(poll_interval=0.05, sweep_interval=0.2),
        certification=CertificationConfig(watch=WatchConfig(interval=0.05)),
    )


async def gauge(router: Router) -> float | None:
    """The pair's sample on /metrics, None when the route shows none."""
    transport = httpx.ASGITransport(app=create_app(router))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        text = (await http.get("/metrics")).text
    sample = re.search(
        r'^jobrouter_certification_suspended\{contract="caption",provider="gauge-a"\} (\S+)$',
        text,
        re.MULTILINE,
    )
    return float(sample[1]) if sample else None


async def one_job(router: Router, key: str) -> None:
    job = await router.submit("shop", key, "caption", INPUT)
    job = await router.wait(job.id, timeout=SETTLE_S)
    assert job.state is JobState.SUCCEEDED, job.error


async def test_the_state_gauge_reads_suspended_then_reinstated(tmp_path: Path) -> None:
    """mutant: the gate sets the gauge only for the pairs it reads suspended (not the union
    with those it read before): it stays 1 after the reinstatement.
    mutant: the gate sets the gauge to 0 for every pair it reads: never 1."""
    broken = FakeProvider(name=WATCHED, default=Step(output={"text": ""}))  # breaks minLength
    backup = FakeProvider(name=BACKUP, default=Step(output={"text": "Warm saffron tea"}))
    async with Router.open(
        config=config(tmp_path), providers={WATCHED: broken, BACKUP: backup}
    ) as router:
        fingerprint = router.tasks["caption"].contract_fingerprint
        assert fingerprint is not None
        for provider in (broken, backup):
            await certify(router.store, provider, fingerprint)
        router.gate.forget()
        jobs = 0
        while ("gauge-a", "caption") not in await router.store.certifications.list_suspensions():
            assert jobs < 40, "gauge-a was never suspended"
            await one_job(router, f"k{jobs}")  # a's answer fails, b takes the job
            jobs += 1
        await one_job(router, "after")  # decided by the gate's read after the suspension
        assert await gauge(router) == 1.0
        routed = [(name, "caption") for name in (WATCHED, BACKUP)]
        await reinstate(
            router.store.certifications,
            routed,
            provider=WATCHED,
            contract="caption",
            reason="fixed",
            by="user:ops",
        )
        router.gate.forget()  # another process's reinstatement: seen at the next refresh
        broken.default = Step(output={"text": "Warm saffron tea"})  # fixed, as checked
        await one_job(router, "reinstated")
        assert await gauge(router) == 0.0
        assert len(broken.calls) == jobs + 1  # the reinstated pair got the job again
