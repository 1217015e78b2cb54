"""Property (hypothesis): whatever the providers and the store do, an exclusive job never has
two attempts that may have acted, and every `unknown` attempt's provider really received the
request. Both backends.

Each example runs a real `Router` with the real `LiteLLMProvider` against two fault servers
(a first, b the fallback) whose answers are drawn from the failure table (docs/failures.md),
while a fault-injecting connector (tests/support/faulty_connector.py) fails drawn outcome and
creation writes before or after their COMMIT. Four exclusive jobs run at once per example.

"May have acted" is every attempt but one recorded `not_sent` (a refused connection, a
documented "not processed" answer, a call never made). Fails on the old code (f4844b9): a 5xx,
a 52x or an unusable answer was `failed` and the job called b too.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jobrouter.api
from jobrouter import AttemptState, Router
from jobrouter import persist as persist_module
from jobrouter.config import CertificationConfig, EngineConfig, RouterConfig, TaskConfig
from jobrouter.models import Attempt
from jobrouter.providers import _litellm, resilience
from jobrouter.providers.config import ProviderConfig, RetryPolicy
from jobrouter.store import SqlStore, open_store
from tests.providers.fault_server import FaultServer, start_fault_server
from tests.store.pg import create_database, drop_database
from tests.support.faulty_connector import FaultyConnector, When

ECHO = Path(__file__).resolve().parents[1] / "acceptance" / "contracts" / "echo.yaml"
JOBS = 4
SETTLE_S = 30.0
ANSWERS: list[Any] = [
    "answer",
    "answer",
    "drop_after",
    "reset",
    "close_before",
    *({"kind": "status", "status": code} for code in (400, 408, 429, 500, 502, 504, 524)),
    {"kind": "answer", "content": "not json"},
    {"kind": "answer", "content": '{"txt": 1}'},
]
WRITES = ["finish_job_cas", "finish_attempt", "insert_job", "insert_attempt"]
store_faults = st.lists(
    st.tuples(st.sampled_from(WRITES), st.sampled_from(["before", "after"]), st.integers(1, 3)),
    max_size=3,
)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FaultServer, FaultServer]]:
    with start_fault_server() as a, start_fault_server() as b:
        yield a, b


@pytest.fixture(autouse=True)
def _no_backoff() -> Iterator[None]:
    resilience.set_testing(no_backoff=True)
    persist_module.set_testing(no_backoff=True)
    yield
    resilience.set_testing(no_backoff=False)
    persist_module.set_testing(no_backoff=False)


def config(url: str, a: FaultServer, b: FaultServer) -> RouterConfig:
    def provider(server: FaultServer) -> ProviderConfig:
        return ProviderConfig(
            model="openai/fault-model",
            api_base=server.api_base,
            structured_output="none",
            retry=RetryPolicy(attempts=1),
        )

    task = TaskConfig(
        contract=str(ECHO), providers=["a", "b"], side_effects="external", attempt_timeout=5.0
    )
    return RouterConfig(
        providers={"a": provider(a), "b": provider(b)},
        tasks={"post": task},
        certification=CertificationConfig(required=False),
        engine=EngineConfig(poll_interval=0.05, sweep_interval=0.2, lease=5.0, claim=10.0),
    )


def received(server: FaultServer) -> list[str]:
    """The texts the server was asked to echo (each job sends its own key)."""
    return [json.dumps(r["body"].get("messages", [])) for r in server.stats()["requests"]]


def may_have_acted(attempt: Attempt) -> bool:
    return attempt.error_kind != "not_sent"


async def example(
    url: str, a: FaultServer, b: FaultServer, faults: list[tuple[str, When, int]]
) -> None:
    connectors: list[FaultyConnector] = []

    async def open_faulty(db: str, **options: Any) -> SqlStore:
        connectors.append(FaultyConnector((await open_store(db, **options)).connector))
        for query, when, times in faults:
            connectors[-1].fail(query, when, times)
        return SqlStore(connectors[-1])

    with mock.patch.object(jobrouter.api, "open_store", open_faulty):
        async with Router.open(url, config(url, a, b)) as r:
            keys = [f"key-{i}-{id(faults)}" for i in range(JOBS)]
            jobs = await asyncio.gather(*(r.submit("shop", k, "post", {"text": k}) for k in keys))
            for job in jobs:
                await r.wait(job.id, SETTLE_S)
            attempts = {job.id: await r.attempts(job.id) for job in jobs}
    await _litellm.close_clients()
    seen = {"a": received(a), "b": received(b)}
    for job, key in zip(jobs, keys, strict=True):
        tried = attempts[job.id]
        assert all(t.state is not AttemptState.STARTED for t in tried), tried
        acted = [t for t in tried if may_have_acted(t)]
        assert len(acted) <= 1, f"two attempts may have acted for {key}: {tried}"
        for attempt in tried:
            if attempt.state is AttemptState.UNKNOWN:
                assert any(key in text for text in seen[attempt.provider]), (
                    f"{attempt.provider} never received {key}, yet attempt is unknown: "
                    f"{attempt.error}"
                )


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@settings(
    max_examples=10,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    answers_a=st.lists(st.sampled_from(ANSWERS), min_size=JOBS, max_size=JOBS),
    answers_b=st.lists(st.sampled_from(ANSWERS), min_size=JOBS, max_size=JOBS),
    faults=store_faults,
)
def test_no_exclusive_job_acts_twice_and_unknown_means_received(
    backend: str,
    servers: tuple[FaultServer, FaultServer],
    answers_a: list[Any],
    answers_b: list[Any],
    faults: list[tuple[str, When, int]],
) -> None:
    a, b = servers
    a.reset(sequence=answers_a)
    b.reset(sequence=answers_b)

    async def run() -> None:
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as folder:
                await example(f"sqlite:///{folder}/p.db", a, b, faults)
            return
        url = await create_database()
        try:
            await example(url, a, b, faults)
        finally:
            await drop_database(url)

    asyncio.run(run())
