"""`Gate.forget()`: a certification this process has just written decides the very next
eligibility, not the one after the 2 s refresh (each backend)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobrouter.breaker import Breakers, BreakerSettings
from jobrouter.contracts import CaseEvidence, Certification, RenderingEvidence, load_contract
from jobrouter.gate import Gate
from jobrouter.policy import TaskPolicy
from jobrouter.store import SqlStore
from jobrouter.tasks import TaskRuntime
from tests.support.fakes import FakeProvider


async def certify(
    store: SqlStore,
    provider: FakeProvider,
    contract_fingerprint: str,
    cases: tuple[str, ...] = ("tea",),
) -> None:
    """A passed certification of `caption` for `provider`, its `cases` passed."""
    now = datetime.now(UTC)
    evidence = tuple(
        CaseEvidence(
            name=name, passed=True, verdict="pass", rendering=RenderingEvidence(ok=True), runs=1
        )
        for name in cases
    )
    record = Certification(
        provider=provider.name,
        provider_fingerprint=provider.fingerprint,
        contract="caption",
        contract_version=1,
        contract_fingerprint=contract_fingerprint,
        passed=True,
        cases=evidence,
        certified_at=now,
        expires_at=now + timedelta(days=1),
    )
    await store.certifications.save_certification(
        provider=provider.name,
        contract="caption",
        provider_fingerprint=provider.fingerprint,
        contract_fingerprint=contract_fingerprint,
        passed=True,
        record=record.model_dump_json(),
        certified_at=record.certified_at.timestamp(),
        expires_at=record.expires_at.timestamp(),
    )


async def test_a_certification_written_here_decides_the_next_eligibility(store: SqlStore) -> None:
    """mutant: `forget()` no longer resets `_read_at` (the next decision answered from the read
    before the certification, up to 2 s old), seen failing on both backends."""
    provider = FakeProvider(name="a")
    task = TaskRuntime(
        name="caption",
        policy=TaskPolicy(providers=("a",), exclusive=False),
        deadline_s=None,
        attempt_timeout_s=None,
        contract=load_contract("caption"),
        contract_fingerprint="c",
    )
    breakers = Breakers(store.circuits, BreakerSettings())
    gate = Gate(store.certifications, {"a": provider}, breakers, required=True)
    before = (await gate.eligibility(task))["a"]
    assert not before.ok and "not certified" in before.reason
    await certify(store, provider, "c")
    gate.forget()
    assert (await gate.eligibility(task))["a"].ok
