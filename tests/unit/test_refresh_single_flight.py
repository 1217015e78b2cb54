"""The circuits and certifications each process caches are read again by ONE read however many
deciders find them due at once: 64 drivers deciding together made 17 circuit reads a second,
each a transaction on PostgreSQL. A change this process makes is never answered from a read
that started before it. (On the old code the first test counts 10 reads.)"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from jobrouter.breaker import Breakers, BreakerSettings
from jobrouter.contracts import CaseEvidence, Certification, RenderingEvidence, load_contract
from jobrouter.gate import Gate
from jobrouter.policy import TaskPolicy
from jobrouter.states import CircuitState
from jobrouter.store.certifications import CertificationRow, CertificationStore
from jobrouter.store.circuits import CircuitRow, CircuitStore
from jobrouter.tasks import TaskRuntime
from tests.support.fakes import FakeProvider
from tests.support.waiting import until


class SlowCircuits:
    """A store whose circuit read waits until released, counting the reads."""

    def __init__(self) -> None:
        self.reads = 0
        self.read = asyncio.Event()  # set at each read
        self.release = asyncio.Event()
        self.rows = [CircuitRow("a", CircuitState.CLOSED, 0, None, None)]

    async def list_circuits(self) -> list[CircuitRow]:
        self.reads += 1
        self.read.set()
        rows = list(self.rows)
        await self.release.wait()
        return rows

    async def reads_reach(self, count: int) -> None:
        while self.reads < count:
            self.read.clear()
            await self.read.wait()


def breakers(store: SlowCircuits) -> Breakers:
    return Breakers(cast(CircuitStore, cast(Any, store)), BreakerSettings())


async def test_deciders_that_find_the_circuits_due_together_share_one_read() -> None:
    store = SlowCircuits()
    subject = breakers(store)
    verdicts = [asyncio.create_task(subject.verdict("a")) for _ in range(10)]
    await store.reads_reach(1)
    for _ in range(5):
        await asyncio.sleep(0)  # every decider is waiting now
    store.release.set()
    assert all(v.ok for v in await asyncio.gather(*verdicts))
    assert store.reads == 1


async def test_a_read_begun_before_a_change_here_is_not_the_answer_after_it() -> None:
    store = SlowCircuits()
    subject = breakers(store)
    before = asyncio.create_task(subject.verdict("a"))
    await store.reads_reach(1)
    store.rows = [CircuitRow("a", CircuitState.OPEN, 5, 2e9, None)]  # opened, then forgotten here
    subject._read_at = float("-inf")
    subject._forgotten += 1
    after = asyncio.create_task(subject.verdict("a"))
    await store.reads_reach(2)
    store.release.set()
    await before  # it may see either read: both are after it began
    assert not (await after).ok  # from the second read, begun after the change


class SlowCertifications:
    """A store whose certification read waits until released, counting the reads."""

    def __init__(self) -> None:
        self.reads = 0
        self.read = asyncio.Event()
        self.release = asyncio.Event()
        self.rows: list[CertificationRow] = []

    async def list_suspensions(self) -> dict[tuple[str, str], object]:
        return {}  # read with the certifications, in the same refresh

    async def list_certifications(self) -> list[CertificationRow]:
        self.reads += 1
        self.read.set()
        rows = list(self.rows)
        await self.release.wait()
        return rows

    async def reads_reach(self, count: int) -> None:
        while self.reads < count:
            self.read.clear()
            await self.read.wait()


def certified_row(provider: FakeProvider) -> CertificationRow:
    now = datetime.now(UTC)
    case = CaseEvidence(
        name="tea", passed=True, verdict="pass", rendering=RenderingEvidence(ok=True), runs=1
    )
    record = Certification(
        provider=provider.name,
        provider_fingerprint=provider.fingerprint,
        contract="caption",
        contract_version=1,
        contract_fingerprint="c",
        passed=True,
        cases=(case,),
        certified_at=now,
        expires_at=now + timedelta(days=1),
    )
    return CertificationRow(provider.name, "caption", record.model_dump_json())


async def test_a_certification_read_begun_before_forget_is_not_the_answer_after_it() -> None:
    """mutant: `Gate.forget()` no longer counting `_forgotten` (the decision after it shares the
    read in flight, begun before the certification was written), seen failing."""
    store = SlowCertifications()
    provider = FakeProvider(name="a")
    circuits = SlowCircuits()
    circuits.release.set()  # the circuits answer at once: only certifications are slow here
    gate = Gate(
        cast(CertificationStore, cast(Any, store)),
        {"a": provider},
        breakers(circuits),
        required=True,
    )
    task = TaskRuntime(
        name="caption",
        policy=TaskPolicy(providers=("a",), exclusive=False),
        deadline_s=None,
        attempt_timeout_s=None,
        contract=load_contract("caption"),
        contract_fingerprint="c",
    )
    before = asyncio.create_task(gate.eligibility(task))
    await store.reads_reach(1)
    store.rows = [certified_row(provider)]  # certified here, then forgotten
    gate.forget()
    after = asyncio.create_task(gate.eligibility(task))
    # A second read starts within a loop turn or two; the ceiling only bounds the mutant's wait
    # (sharing the first read, it would wait for it forever).
    await until(lambda: store.reads >= 2, "a certification read begun after forget()", within=30)
    store.release.set()
    await before  # it may see either read: both are after it began
    assert (await after)["a"].ok  # from the second read, begun after the change


def certifying_gate(store: SlowCertifications) -> tuple[Gate, TaskRuntime]:
    circuits = SlowCircuits()
    circuits.release.set()  # the circuits answer at once: only certifications are slow here
    provider = FakeProvider(name="a")
    store.rows = [certified_row(provider)]
    gate = Gate(
        cast(CertificationStore, cast(Any, store)),
        {"a": provider},
        breakers(circuits),
        required=True,
    )
    task = TaskRuntime(
        name="caption",
        policy=TaskPolicy(providers=("a",), exclusive=False),
        deadline_s=None,
        attempt_timeout_s=None,
        contract=load_contract("caption"),
        contract_fingerprint="c",
    )
    return gate, task


async def test_deciders_that_find_the_certifications_due_together_share_one_read() -> None:
    """mutants of `Gate._certifications`: a new read whenever the counts are equal (`==` for
    `!=`), and `_reading_after = None`, each seen failing (10 reads)."""
    store = SlowCertifications()
    gate, task = certifying_gate(store)
    verdicts = [asyncio.create_task(gate.eligibility(task)) for _ in range(10)]
    await store.reads_reach(1)
    for _ in range(5):
        await asyncio.sleep(0)  # every decider is waiting now
    store.release.set()
    assert all(v["a"].ok for v in await asyncio.gather(*verdicts))
    assert store.reads == 1


async def test_certifications_are_read_once_per_refresh_and_again_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Within the refresh a decision reads nothing; once it is due, the next one reads again.
    mutants: `_read(None)` for `_read(self._forgotten)` (never fresh: a read per decision), and
    `_read` keeping its finished read as the one in flight (`!=` for `==`, `""` for `None`:
    never read again), each seen failing."""
    store = SlowCertifications()
    store.release.set()
    gate, task = certifying_gate(store)
    assert (await gate.eligibility(task))["a"].ok
    assert (await gate.eligibility(task))["a"].ok
    assert store.reads == 1
    monkeypatch.setattr("jobrouter.gate.CERTIFICATION_REFRESH_S", 0.0)  # due at every decision
    store.rows = []  # the certification gone (another process)
    assert not (await gate.eligibility(task))["a"].ok
    assert store.reads == 2


async def test_a_read_begun_between_two_forgets_is_not_the_answer_after_the_second() -> None:
    """mutant: `forget()` setting `_forgotten = 1` instead of counting (a second forget looks
    like the first), seen failing."""
    store = SlowCertifications()
    gate, task = certifying_gate(store)
    store.rows = []
    gate.forget()
    first = asyncio.create_task(gate.eligibility(task))  # begun after the first forget
    await store.reads_reach(1)
    store.rows = [certified_row(FakeProvider(name="a"))]
    gate.forget()
    after = asyncio.create_task(gate.eligibility(task))
    await until(lambda: store.reads >= 2, "a certification read begun after forget()", within=30)
    store.release.set()
    await first
    assert (await after)["a"].ok


async def test_a_provider_the_task_names_but_none_configures_is_refused_with_why() -> None:
    """mutants of `Gate._certified`'s first refusal: `True` for `False`, and its reason lost or
    changed (`Eligibility(reason)`, no reason, other text), each seen failing."""
    store = SlowCertifications()
    gate, task = certifying_gate(store)
    gate.providers = {}
    verdict = (await gate.eligibility(task))["a"]
    assert (verdict.ok, verdict.reason) == (False, "not configured in [providers]")
    assert store.reads == 0  # refused before any certification is read
