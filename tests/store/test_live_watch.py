"""Live evidence in the store (issue 27), on each backend: a verdict exists exactly when the
attempt's end does, a fold counts each verdict once, and a suspension is a certification state
the gate and the matrix read, lifted only by a new certification or an operator's word."""

from __future__ import annotations

import json
import time
from dataclasses import replace

from jobrouter.breaker import Breakers, BreakerSettings
from jobrouter.certifier import Pair, matrix
from jobrouter.contracts import Validity, load_contract
from jobrouter.gate import Gate
from jobrouter.models import AttemptUsage
from jobrouter.policy import TaskPolicy
from jobrouter.printing import render_matrix
from jobrouter.providers.errors import OutcomeUnknown
from jobrouter.states import AttemptState
from jobrouter.store import SqlStore
from jobrouter.store.live_watch import LiveVerdict, Suspension, WatchRow
from jobrouter.tasks import TaskRuntime
from tests.store.test_gate_forget import certify
from tests.support.fakes import FakeProvider
from tests.support.outbox_jobs import new_job

SUSPENSION = Suspension(
    at=0.0,
    rule="failure rate",
    reason="live failure rate 40% over 10 answers against a certified baseline of 2%",
    answered=10,
    failed=4,
    sample_attempts=("att-1", "att-2"),
)


def verdict(attempt_id: str, *, failed: bool = False) -> LiveVerdict:
    failure = "schema: answer does not match the output schema" if failed else None
    return LiveVerdict(attempt_id, "a", "caption", failed=failed, failure=failure)


async def started(store: SqlStore, key: str) -> str:
    job = await new_job(store, key=key)
    _, attempt = await store.jobs.start_attempt(
        job.id, provider="a", model=None, worker="w", lease_s=30, exclusive=False
    )
    return attempt.id


async def test_a_verdict_is_kept_with_the_end_of_its_attempt_once(store: SqlStore) -> None:
    """A success and a broken answer each leave one verdict; the same end reported again (its
    COMMIT acknowledgement lost, so `persist` tries again) leaves no second one.
    mutant: the verdict written before the `terminal` check of finish_attempt_cas: 3 rows."""
    won = await started(store, "k1")
    await store.jobs.finish_attempt_cas(won, {"ok": 1}, AttemptUsage(), verdict=verdict(won))
    await store.jobs.finish_attempt_cas(won, {"ok": 1}, AttemptUsage(), verdict=verdict(won))
    broken = await started(store, "k2")
    for _ in range(2):
        await store.jobs.finish_attempt(
            broken,
            AttemptState.FAILED,
            error_kind="rejected",
            error="the answer broke the contract",
            usage=AttemptUsage(),
            verdict=verdict(broken, failed=True),
        )
    pending = await store.live_watch.pending(100)
    assert [(s.verdict.attempt_id, s.verdict.failed) for s in pending] == [
        (won, False),
        (broken, True),
    ]
    assert pending[1].verdict.failure == "schema: answer does not match the output schema"
    assert pending[0].at <= pending[1].at


async def test_a_fold_counts_each_verdict_once(store: SqlStore) -> None:
    """Two folds of the same verdicts (a leader taking over mid-fold): the second writes
    nothing. mutant: no check of the consumed count: the second fold's watch (answered=99)
    overwrites the first's."""
    ids = [await started(store, f"k{i}") for i in range(3)]
    for attempt_id in ids:
        await store.jobs.finish_attempt_cas(
            attempt_id, {}, AttemptUsage(), verdict=verdict(attempt_id)
        )
    pending = await store.live_watch.pending(100)
    consumed = pending
    assert await store.live_watch.fold(consumed, lambda _: [WatchRow("a", "caption", answered=3)])
    assert not await store.live_watch.fold(
        consumed, lambda _: [WatchRow("a", "caption", answered=99)]
    )
    assert (await store.live_watch.watches())[("a", "caption")].answered == 3
    assert await store.live_watch.pending(100) == []


def caption_task() -> TaskRuntime:
    return TaskRuntime(
        name="caption",
        policy=TaskPolicy(providers=("a",), exclusive=False),
        deadline_s=None,
        attempt_timeout_s=None,
        contract=load_contract("caption"),
        contract_fingerprint="c",
    )


async def suspended_pair(store: SqlStore) -> FakeProvider:
    provider = FakeProvider(name="a")
    await certify(store, provider, "c")
    await store.live_watch.save(WatchRow("a", "caption", answered=10, suspension=SUSPENSION))
    return provider


async def test_the_gate_refuses_a_suspended_pair_and_says_how_back(store: SqlStore) -> None:
    """mutant: the gate's suspension branch removed: `a` eligible."""
    provider = await suspended_pair(store)
    gate = Gate(
        store.certifications,
        {"a": provider},
        Breakers(store.circuits, BreakerSettings()),
        required=True,
    )
    refused = (await gate.eligibility(caption_task()))["a"]
    assert not refused.ok
    assert "suspended for contract 'caption' by its live answers" in refused.reason
    assert SUSPENSION.reason in refused.reason
    assert "jobrouter contracts run --provider a --contract caption" in refused.reason
    assert "jobrouter contracts reinstate --provider a --contract caption" in refused.reason


async def test_the_matrix_shows_a_suspended_pair(store: SqlStore) -> None:
    provider = await suspended_pair(store)
    pair = Pair("a", load_contract("caption"), "c")
    [cell] = await matrix(store.certifications, {"a": provider}, [pair])
    assert cell.status is Validity.SUSPENDED
    assert not cell.status.valid
    assert cell.watch is not None and cell.watch.suspension == SUSPENSION
    printed = render_matrix([cell], width=200)  # `contracts status` as text
    assert "suspended (live answers)" in printed
    assert "live failure rate 40% over 10 answers" in printed


async def test_reinstating_lifts_the_suspension_and_keeps_who_and_why(store: SqlStore) -> None:
    provider = await suspended_pair(store)
    before = time.time()
    assert await store.certifications.reinstate(
        provider="a", contract="caption", by="user:ops", reason="template fixed, checked by hand"
    )
    watch = (await store.live_watch.watches())[("a", "caption")]
    assert watch.suspension is None and watch.answered == 0 and watch.state == ""
    assert watch.reinstated is not None
    assert (watch.reinstated.by, watch.reinstated.reason) == (
        "user:ops",
        "template fixed, checked by hand",
    )
    assert watch.reinstated.at >= before
    # not suspended any more: nothing to reinstate
    assert not await store.certifications.reinstate(
        provider="a", contract="caption", by="user:ops", reason="again"
    )
    gate = Gate(
        store.certifications,
        {"a": provider},
        Breakers(store.circuits, BreakerSettings()),
        required=True,
    )
    assert (await gate.eligibility(caption_task()))["a"].ok


async def test_a_new_certification_starts_a_fresh_watch(store: SqlStore) -> None:
    """mutant: save_certification keeps the watch row: the pair stays suspended."""
    provider = await suspended_pair(store)
    await certify(store, provider, "c")
    assert await store.live_watch.watches() == {}
    assert await store.certifications.list_suspensions() == {}


async def suspension_events(store: SqlStore) -> list[tuple[str, dict[str, object]]]:
    rows = await store.connector.fetchall(
        "SELECT owner, payload FROM outbox WHERE kind = 'provider.suspended' ORDER BY owner", {}
    )
    return [(row["owner"], json.loads(row["payload"])) for row in rows]


async def test_a_suspension_reaches_each_owner_once_through_the_outbox(store: SqlStore) -> None:
    """In the fold's transaction, one event per owner with a webhook; a fold that finds the
    pair suspended already writes none. mutant: announced whenever the row is suspended: four
    events."""
    for round_ in range(2):
        attempt_id = await started(store, f"k{round_}")
        await store.jobs.finish_attempt_cas(
            attempt_id, {}, AttemptUsage(), verdict=verdict(attempt_id)
        )
        consumed = await store.live_watch.pending(10)
        suspended = WatchRow("a", "caption", answered=round_ + 1, suspension=SUSPENSION)
        assert await store.live_watch.fold(
            consumed, lambda _, row=suspended: [row], ["ops", "shop"]
        )
    events = await suspension_events(store)
    assert [owner for owner, _ in events] == ["ops", "shop"]
    _, payload = events[0]
    assert payload["event"] == "provider.suspended"
    assert (payload["provider"], payload["contract"], payload["owner"]) == ("a", "caption", "ops")
    assert payload["reason"] == SUSPENSION.reason
    assert payload["sample_attempts"] == ["att-1", "att-2"]


def test_no_verdict_is_kept_when_nobody_watches() -> None:
    """`[certification.watch] enabled = false`: no fold would ever delete them.
    mutant: the `watched` check removed: a verdict."""
    task = replace(caption_task(), watched=False)
    assert task.live_verdict("att", "a", None, request=None, prompt_tokens=None) is None
    seen = caption_task().live_verdict("att", "a", "schema: x", request=None, prompt_tokens=3)
    assert seen is not None and seen.failed and seen.prompt_tokens == 3


async def test_answers_not_yet_folded_do_not_outlive_a_new_certification(store: SqlStore) -> None:
    """Failed answers from before a new certification (the leader away, or its fold later)
    are not counted into the fresh watch, and a fold that read them before finds them gone.
    mutant: save_certification keeps the pending verdicts: the fresh watch counts 3 failures."""
    provider = FakeProvider(name="a")
    await certify(store, provider, "c")
    for i in range(3):
        attempt_id = await started(store, f"k{i}")
        await store.jobs.finish_attempt(
            attempt_id,
            AttemptState.FAILED,
            error_kind="rejected",
            error="broke the contract",
            usage=AttemptUsage(),
            verdict=verdict(attempt_id, failed=True),
        )
    read_before = await store.live_watch.pending(10)
    await certify(store, provider, "c")  # the provider fixed, certified again
    assert await store.live_watch.pending(10) == []
    assert not await store.live_watch.fold(
        read_before, lambda _: [WatchRow("a", "caption", failed=3)]
    )
    assert await store.live_watch.watches() == {}


async def test_a_late_answer_of_an_attempt_swept_to_unknown_keeps_its_verdict(
    store: SqlStore,
) -> None:
    """An exclusive job's attempt swept to `unknown` (its lease expired) has no answer and no
    verdict: nothing counts it, as a pass or otherwise. Its answer arriving afterwards, broken
    (it stays `unknown`: the provider may have acted), is evidence: its verdict is kept once,
    and the first record of the attempt stays. A late good answer's CAS keeps its pass, so
    dropping only the broken one would bias the live rate toward passing.
    mutant: the unknown -> unknown end returns before keep_late_verdict: no pending verdict."""
    job = await new_job(store, key="swept")
    _, attempt = await store.jobs.start_attempt(
        job.id, provider="a", model=None, worker="w", lease_s=-1.0, exclusive=True
    )
    [swept] = await store.jobs.expire_attempts()
    assert swept.id == attempt.id and swept.state is AttemptState.UNKNOWN
    assert await store.live_watch.pending(100) == []  # no answer, no verdict
    for _ in range(2):  # the second: the same end tried again (persist)
        ended = await store.jobs.finish_attempt(
            attempt.id,
            AttemptState.UNKNOWN,
            error_kind="rejected",
            error="the answer broke the contract; the task is exclusive",
            usage=AttemptUsage(),
            verdict=verdict(attempt.id, failed=True),
        )
        assert ended.error == swept.error  # the sweep's record stays
    [late] = await store.live_watch.pending(100)
    assert (late.verdict.attempt_id, late.verdict.failed) == (attempt.id, True)


async def test_a_circuit_breakers_cool_down_never_lifts_a_suspension(store: SqlStore) -> None:
    """A suspended pair whose provider's circuit opens, cools down (half-open: the breaker
    would let its probe through) and closes again is still refused for the contract: only a
    passing certification or an operator's word lifts a suspension.
    mutant: the gate asks the breaker first and returns a half-open verdict as it is (the
    breaker's probe let through): `a` eligible after the cool-down."""
    provider = await suspended_pair(store)

    def gate(cooldown_s: float) -> tuple[Gate, Breakers]:
        settings = BreakerSettings(failure_threshold=1, cooldown_s=cooldown_s, refresh_s=0.0)
        breakers = Breakers(store.circuits, settings)
        return Gate(store.certifications, {"a": provider}, breakers, required=True), breakers

    cooling, breakers = gate(cooldown_s=3600.0)
    await breakers.record("a", OutcomeUnknown("read timeout", provider="a"))
    assert not (await breakers.verdict("a")).ok  # open, cooling down
    assert not (await cooling.eligibility(caption_task()))["a"].ok
    cooled, breakers = gate(cooldown_s=0.0)  # the same circuit, its cool-down over
    half_open = await breakers.verdict("a")
    assert half_open.ok and "half-open" in half_open.reason
    refused = (await cooled.eligibility(caption_task()))["a"]
    assert not refused.ok and "suspended for contract 'caption'" in refused.reason
    assert await breakers.acquire("a")  # the breaker's probe, and it succeeds: closed
    await breakers.record("a", None)
    assert (await breakers.verdict("a")).ok and (await breakers.verdict("a")).reason == ""
    closed, _ = gate(cooldown_s=0.0)
    refused = (await closed.eligibility(caption_task()))["a"]
    assert not refused.ok and "suspended for contract 'caption'" in refused.reason
