"""Golden probes (router/probes.py), on each backend: the leader's probe sends a case
certification passed to a certified provider and keeps what the answer shows; a probe with no
answer to judge keeps nothing (could not check: never a pass); a suspended or uncertified
provider is not probed."""

from __future__ import annotations

from jobrouter.contracts import load_contract
from jobrouter.drift import WatchRule
from jobrouter.policy import TaskPolicy
from jobrouter.probes import PROBES, Prober
from jobrouter.providers.errors import NotSent
from jobrouter.store import SqlStore
from jobrouter.store.live_watch import WatchRow
from jobrouter.tasks import TaskRuntime
from jobrouter.watch import fold_verdicts
from tests.store.test_gate_forget import certify
from tests.store.test_live_watch import SUSPENSION
from tests.support.fakes import FakeProvider, Step


def prober(store: SqlStore, provider: FakeProvider) -> Prober:
    task = TaskRuntime(
        name="caption",
        policy=TaskPolicy(providers=(provider.name,), exclusive=False),
        deadline_s=None,
        attempt_timeout_s=None,
        contract=load_contract("caption"),
        contract_fingerprint="c",
    )
    return Prober(store.certifications, {"caption": task}, {provider.name: provider})


async def test_a_wrong_golden_answer_is_kept_as_a_failed_probe(store: SqlStore) -> None:
    """The certified case `tea` answered without tea: schema-valid, so no live check sees it.
    mutant: the case's expectations not passed to check_output: the probe passes."""
    provider = FakeProvider(name="a", default=Step(output={"text": "A warm cup of coffee"}))
    await certify(store, provider, "c")
    assert await prober(store, provider).round() == 1
    [request] = provider.calls
    assert "Saffron tea" in " ".join(m.content for m in request.messages)
    [stored] = await store.live_watch.pending(10)
    seen = stored.verdict
    assert seen.probe and seen.failed and seen.provider == "a" and seen.contract == "caption"
    assert seen.failure is not None and seen.failure.startswith("tea: ")
    assert "tea" in seen.failure.split(": ", 1)[1]


async def test_a_right_golden_answer_is_kept_as_a_passed_probe(store: SqlStore) -> None:
    provider = FakeProvider(name="a", default=Step(output={"text": "Warm saffron tea"}))
    await certify(store, provider, "c")
    await prober(store, provider).round()
    [stored] = await store.live_watch.pending(10)
    assert stored.verdict.probe and not stored.verdict.failed


async def test_a_probe_without_an_answer_keeps_nothing(store: SqlStore) -> None:
    provider = FakeProvider(
        name="a", default=Step(error=NotSent("connection refused", provider="a"))
    )
    await certify(store, provider, "c")
    unchecked = PROBES.labels("a", "caption", "unchecked")
    before = unchecked._value.get()
    assert await prober(store, provider).round() == 1
    assert await store.live_watch.pending(10) == []
    assert unchecked._value.get() == before + 1


async def test_suspended_and_uncertified_providers_are_not_probed(store: SqlStore) -> None:
    """mutant: suspended pairs not left out of the targets: one call."""
    provider = FakeProvider(name="a")
    assert await prober(store, provider).round() == 0  # not certified
    await certify(store, provider, "c")
    await store.live_watch.save(WatchRow("a", "caption", suspension=SUSPENSION))
    assert await prober(store, provider).round() == 0
    assert provider.calls == []


async def test_a_wrong_probe_suspends_at_the_next_fold_and_a_right_one_does_not(
    store: SqlStore,
) -> None:
    """mutant: probes folded as live answers (the CUSUM, one failure far from its
    threshold): not suspended."""
    wrong = FakeProvider(name="a", default=Step(output={"text": "Warm saffron tea"}))
    await certify(store, wrong, "c")
    probes = prober(store, wrong)
    await probes.round()
    assert (await fold_verdicts(store.certifications, WatchRule(), 100)).suspended == ()
    wrong.default = Step(output={"text": "A warm cup of coffee"})
    await probes.round()
    folded = await fold_verdicts(store.certifications, WatchRule(), 100)
    [row] = folded.suspended
    assert row.suspension is not None and row.suspension.rule == "golden probe"
    assert row.suspension.reason.startswith("a golden case answered wrong: tea: ")
    assert row.suspension.sample_attempts == ("probe:tea",)
    assert row.answered == 0  # probes are not live traffic
    assert ("a", "caption") in await store.certifications.list_suspensions()
