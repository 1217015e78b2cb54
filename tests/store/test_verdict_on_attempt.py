"""A live verdict rides on its attempt's row (migration 0018), on each backend: the UPDATE that
ends the attempt writes it (no statement of its own), a later end without one keeps it, a
fresh watch of a pair drops only that pair's pending verdicts (live and probes), and a fold
marks both kinds once."""

from __future__ import annotations

from jobrouter.models import AttemptUsage
from jobrouter.states import AttemptState
from jobrouter.store import SqlStore
from jobrouter.store.live_watch import LiveVerdict, WatchRow
from tests.store.test_gate_forget import certify
from tests.support.fakes import FakeProvider
from tests.support.outbox_jobs import new_job


async def started(store: SqlStore, key: str, provider: str = "a") -> str:
    job = await new_job(store, key=key)
    _, attempt = await store.jobs.start_attempt(
        job.id, provider=provider, model=None, worker="w", lease_s=30, exclusive=False
    )
    return attempt.id


async def answered(
    store: SqlStore, key: str, provider: str = "a", contract: str = "caption"
) -> str:
    attempt_id = await started(store, key, provider)
    seen = LiveVerdict(attempt_id, provider, contract, failed=False, prompt_tokens=7)
    await store.jobs.finish_attempt_cas(attempt_id, {}, AttemptUsage(), verdict=seen)
    return attempt_id


def probe(provider: str) -> LiveVerdict:
    return LiveVerdict("probe:tea", provider, "caption", failed=True, failure="tea: x", probe=True)


async def test_the_verdict_costs_the_finish_no_statement(store: SqlStore) -> None:
    """mutant: the verdict written by a statement of its own (as before 0018): one more."""
    stats = store.connector.stats

    async def round_trips(with_verdict: bool, key: str) -> int:
        attempt_id = await started(store, key)
        seen = LiveVerdict(attempt_id, "a", "caption", failed=False) if with_verdict else None
        before = stats.round_trips
        await store.jobs.finish_attempt_cas(attempt_id, {}, AttemptUsage(), verdict=seen)
        return stats.round_trips - before

    assert await round_trips(True, "k1") == await round_trips(False, "k2")
    [stored] = await store.live_watch.pending(10)
    assert stored.verdict.contract == "caption" and not stored.verdict.failed


async def test_an_end_without_a_verdict_keeps_the_one_before(store: SqlStore) -> None:
    """An answer whose result could not be recorded is kept `unknown` with its verdict; the
    operator's resolution that ends it (no verdict of its own) must not wipe it.
    mutant: finish_attempt sets `verdict = :verdict, verdict_at = :verdict_at` (no COALESCE):
    nothing pending."""
    attempt_id = await started(store, "k1")
    seen = LiveVerdict(attempt_id, "a", "caption", failed=True, failure="schema: x", prompt_chars=9)
    await store.jobs.finish_attempt(
        attempt_id,
        AttemptState.UNKNOWN,
        error_kind="unknown",
        error="answered; the result could not be recorded",
        usage=AttemptUsage(),
        verdict=seen,
    )
    await store.jobs.resolve_attempt(attempt_id, AttemptState.FAILED, None, "checked", "user:ops")
    [stored] = await store.live_watch.pending(10)
    assert stored.id == attempt_id
    assert stored.verdict == seen


async def test_a_fresh_watch_drops_only_its_pairs_pending_verdicts(store: SqlStore) -> None:
    """A new certification of a x caption: the verdicts of a x caption (an answer, a probe) are
    dropped; a x other and b x caption keep theirs.
    mutants: drop_attempt_verdicts_of_pair without its contract condition: a x other's gone;
    delete_probe_verdicts_of_pair not run: a's probe still pending."""
    await answered(store, "k1")
    other = await answered(store, "k2", contract="other")
    b_answer = await answered(store, "k3", provider="b")
    await store.live_watch.record_probe(probe("a"))
    await store.live_watch.record_probe(probe("b"))
    await certify(store, FakeProvider(name="a"), "c")
    left = await store.live_watch.pending(10)
    assert sorted((s.verdict.provider, s.verdict.contract, s.verdict.probe) for s in left) == [
        ("a", "other", False),
        ("b", "caption", False),
        ("b", "caption", True),
    ]
    assert {s.id for s in left if not s.verdict.probe} == {other, b_answer}


async def test_a_fold_marks_live_and_probe_verdicts_once(store: SqlStore) -> None:
    """mutant: _consume leaves the probes (counted, not deleted): the probe pending again."""
    await answered(store, "k1")
    await store.live_watch.record_probe(probe("a"))
    pending = await store.live_watch.pending(10)
    assert [s.verdict.probe for s in pending] == [False, True]  # in the order written
    assert await store.live_watch.fold(pending, lambda _: [WatchRow("a", "caption", answered=1)])
    assert await store.live_watch.pending(10) == []
    assert not await store.live_watch.fold(
        pending, lambda _: [WatchRow("a", "caption", answered=9)]
    )
    assert (await store.live_watch.watches())[("a", "caption")].answered == 1


async def _plan(store: SqlStore, query: str, params: dict[str, object]) -> str:
    sql = store.connector.queries[query]
    if store.connector.dialect == "sqlite":
        rows = await store.connector.fetchall("EXPLAIN QUERY PLAN " + sql, params)
        return " | ".join(str(row["detail"]) for row in rows)
    async with store.connector.write() as tx:  # SET LOCAL: this transaction only
        await tx.execute("SET LOCAL enable_seqscan = off", {})  # as if the table were large
        rows = await tx.fetchall("EXPLAIN " + sql, params)
    return " | ".join(str(row["QUERY PLAN"]) for row in rows)


async def test_the_unfolded_verdicts_are_found_by_their_partial_index(store: SqlStore) -> None:
    """The fold's read and a pair's drop walk attempts_unfolded (the few unfolded rows), not
    every attempt. mutant: `provider || ''` back to `provider` in drop_attempt_verdicts_of_pair:
    attempts_by_provider walked."""
    pair = {"provider": "a", "contract": "caption"}
    assert "attempts_unfolded" in await _plan(store, "drop_attempt_verdicts_of_pair", pair)
    assert "attempts_unfolded" in await _plan(store, "pending_attempt_verdicts", {"limit": 10})
