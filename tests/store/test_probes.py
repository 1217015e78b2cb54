"""Golden probes (router/probes.py), on each backend: the leader's probe sends a case
certification passed to a certified provider and keeps what the answer shows; a probe with no
answer to judge keeps nothing (could not check: never a pass); a suspended or uncertified
provider is not probed; when a probe is due is the store's (`probe_schedule`), so the cap and
the turns hold across leaders."""

from __future__ import annotations

import asyncio

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
from tests.support.clock import ManualClock
from tests.support.fakes import FakeProvider, Step

INTERVAL_S = 1800.0  # 2 probes an hour, the default
T0 = 1_000_000.0  # the leaders' time at the start: when a probe is due is decided on it


def prober(store: SqlStore, provider: FakeProvider, clock: ManualClock | None = None) -> Prober:
    task = TaskRuntime(
        name="caption",
        policy=TaskPolicy(providers=(provider.name,), exclusive=False),
        deadline_s=None,
        attempt_timeout_s=None,
        contract=load_contract("caption"),
        contract_fingerprint="c",
    )
    providers = {provider.name: provider}
    return Prober(
        store.certifications,
        {"caption": task},
        providers,
        INTERVAL_S,
        clock or ManualClock(T0),
    )


async def due(probes: Prober) -> Prober:
    """`probes` after a first round (which schedules its providers one interval on and sends
    nothing) and the interval: each provider's probe is due."""
    assert await probes.round() == 0
    assert isinstance(probes.clock, ManualClock)
    probes.clock.now += INTERVAL_S
    return probes


async def test_a_wrong_golden_answer_is_kept_as_a_failed_probe(store: SqlStore) -> None:
    """The certified case `tea` answered without tea: schema-valid, so no live check sees it.
    mutant: the case's expectations not passed to check_output: the probe passes."""
    provider = FakeProvider(name="a", default=Step(output={"text": "A warm cup of coffee"}))
    await certify(store, provider, "c")
    assert await (await due(prober(store, provider))).round() == 1
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
    assert await (await due(prober(store, provider))).round() == 1
    [stored] = await store.live_watch.pending(10)
    assert stored.verdict.probe and not stored.verdict.failed


async def test_a_probe_without_an_answer_keeps_nothing(store: SqlStore) -> None:
    provider = FakeProvider(
        name="a", default=Step(error=NotSent("connection refused", provider="a"))
    )
    await certify(store, provider, "c")
    unchecked = PROBES.labels("a", "caption", "unchecked")
    before = unchecked._value.get()
    assert await (await due(prober(store, provider))).round() == 1
    assert await store.live_watch.pending(10) == []
    assert unchecked._value.get() == before + 1


async def test_suspended_and_uncertified_providers_are_not_probed(store: SqlStore) -> None:
    """mutant: suspended pairs not left out of the targets: one call."""
    provider = FakeProvider(name="a")
    probes = prober(store, provider)
    assert await probes.round() == 0  # not certified
    await certify(store, provider, "c")
    await due(probes)
    await store.live_watch.save(WatchRow("a", "caption", suspension=SUSPENSION))
    assert await probes.round() == 0
    assert provider.calls == []


async def test_a_wrong_probe_suspends_at_the_next_fold_and_a_right_one_does_not(
    store: SqlStore,
) -> None:
    """mutant: probes folded as live answers (the CUSUM, one failure far from its
    threshold): not suspended."""
    wrong = FakeProvider(name="a", default=Step(output={"text": "Warm saffron tea"}))
    await certify(store, wrong, "c")
    probes = await due(prober(store, wrong))
    assert await probes.round() == 1
    assert (await fold_verdicts(store.certifications, WatchRule(), 100)).suspended == ()
    wrong.default = Step(output={"text": "A warm cup of coffee"})
    probes.clock.now += INTERVAL_S  # type: ignore[attr-defined]
    assert await probes.round() == 1
    folded = await fold_verdicts(store.certifications, WatchRule(), 100)
    [row] = folded.suspended
    assert row.suspension is not None and row.suspension.rule == "golden probe"
    assert row.suspension.reason.startswith("a golden case answered wrong: tea: ")
    assert row.suspension.sample_attempts == ("probe:tea",)
    assert row.answered == 0  # probes are not live traffic
    assert ("a", "caption") in await store.certifications.list_suspensions()


async def test_a_provider_is_first_probed_one_interval_after_it_is_first_seen(
    store: SqlStore,
) -> None:
    """A fleet that starts (or a leader elected) does not probe at once: the first probe is due
    one interval after the provider is first seen with a target, and the next one interval
    after that. mutants: the schedule's first `next_at` at `:now` (a probe at the first round);
    `next_at <= :now` as `<` (the due probe not sent at its time)."""
    provider = FakeProvider(name="a", default=Step(output={"text": "Warm saffron tea"}))
    await certify(store, provider, "c")
    clock = ManualClock(T0)
    probes = prober(store, provider, clock)
    assert await probes.round() == 0
    clock.now += INTERVAL_S - 1
    assert await probes.round() == 0
    clock.now += 1
    assert await probes.round() == 1
    assert await probes.round() == 0  # the next is an interval on
    clock.now += INTERVAL_S
    assert await probes.round() == 1
    assert len(provider.calls) == 2


async def test_two_leaders_at_once_send_one_probe(store: SqlStore) -> None:
    """Two processes that both believe they lead (a lease lost between two heartbeats) round
    at the same moment with the probe due: one call. mutant: the claim's `next_at <= :now`
    dropped: both send, two calls."""
    provider = FakeProvider(name="a", default=Step(output={"text": "Warm saffron tea"}))
    await certify(store, provider, "c")
    clock = ManualClock(T0)
    first = await due(prober(store, provider, clock))
    second = prober(store, provider, clock)
    sent = await asyncio.gather(first.round(), second.round())
    assert sorted(sent) == [0, 1]
    assert len(provider.calls) == 1


async def test_a_new_leader_goes_on_where_the_last_one_stopped(store: SqlStore) -> None:
    """Leader one probes case `tea`; leader two, elected at once, sends nothing (the probe is
    not due again) and, an interval on, sends the next stable case, `scarf_playful`, not `tea`
    again. mutants: the turn read as 0 for a new leader (the claim's `turn - 1` as `0`): `tea`
    twice; the turn not moved on (`turn = turn + 1` dropped): `tea` twice."""
    provider = FakeProvider(name="a", default=Step(output={"text": "Warm saffron tea"}))
    await certify(store, provider, "c", cases=("tea", "scarf_playful"))
    clock = ManualClock(T0)
    assert await (await due(prober(store, provider, clock))).round() == 1
    successor = prober(store, provider, clock)
    assert await successor.round() == 0
    clock.now += INTERVAL_S
    assert await successor.round() == 1
    first, second = (" ".join(m.content for m in call.messages) for call in provider.calls)
    assert "Saffron tea" in first and "Merino wool scarf" in second
