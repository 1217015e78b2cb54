"""A pair's live watch keeps its history for the console's chart (issue 27, migration 0020), on
each backend: every fold that counts a pair's answers writes one point in the fold's own
transaction, and the pair's points are trimmed to the newest POINTS_KEPT in it."""

from __future__ import annotations

import json
from dataclasses import replace

from jobrouter.drift import WatchRule
from jobrouter.models import AttemptUsage
from jobrouter.store import SqlStore
from jobrouter.store.live_watch import POINTS_KEPT, WatchRow
from jobrouter.watch import fold_verdicts
from tests.store.test_gate_forget import certify
from tests.store.test_live_watch import SUSPENSION, started, verdict
from tests.support.fakes import FakeProvider


async def answered(store: SqlStore, keys: list[str], failed: set[str]) -> None:
    for key in keys:
        attempt_id = await started(store, key)
        await store.jobs.finish_attempt_cas(
            attempt_id, {}, AttemptUsage(), verdict=verdict(attempt_id, failed=key in failed)
        )


async def test_each_fold_of_a_pair_leaves_one_point_of_what_it_counted(store: SqlStore) -> None:
    """Two folds of a certified pair: a point each, with the answers and failures that fold
    counted (not the totals), the CUSUMs the watch holds after it and its baseline.
    mutant: `_save_point` not called in `fold`: no points."""
    await certify(store, FakeProvider(name="a"), "c")
    rule = WatchRule()
    await answered(store, ["k1", "k2", "k3"], failed={"k2"})
    assert (await fold_verdicts(store.certifications, rule, batch=100)).counted == 3
    await answered(store, ["k4", "k5"], failed={"k4", "k5"})
    assert (await fold_verdicts(store.certifications, rule, batch=100)).counted == 2
    points = (await store.live_watch.points())[("a", "caption")]
    assert [(p.answered, p.failed, p.suspended) for p in points] == [(3, 1, False), (2, 2, False)]
    state = json.loads((await store.live_watch.watches())[("a", "caption")].state)
    assert (points[-1].large, points[-1].small) == (state["large"], state["small"])
    assert points[-1].large > points[0].large > 0
    assert points[0].baseline == state["baseline"] > 0
    assert points[0].at <= points[1].at


async def test_a_pair_keeps_only_its_newest_points(store: SqlStore) -> None:
    """One fold of a pair, then POINTS_KEPT + 3 folds of another: the second keeps its newest
    POINTS_KEPT (the oldest three gone), the first its one, older than any. mutants: the trim
    not run: 63 points; the trim's outer `provider`/`contract` condition dropped: the first
    pair's point gone."""
    assert await store.live_watch.fold((), lambda _: [WatchRow("b", "caption", answered=1)])
    row = WatchRow("a", "caption")
    for n in range(1, POINTS_KEPT + 4):
        row = replace(row, answered=n, failed=n // 2)  # a failure every second fold
        assert await store.live_watch.fold((), lambda _, row=row: [row])
    points = await store.live_watch.points()
    kept = points[("a", "caption")]
    assert len(kept) == POINTS_KEPT
    assert [p.failed for p in kept[:2]] == [1, 0]  # folds 4 and 5: 1, 2 and 3 are gone
    assert [p.answered for p in kept] == [1] * POINTS_KEPT
    assert len(points[("b", "caption")]) == 1


async def test_a_fold_that_counted_no_answer_draws_nothing_unless_it_suspended(
    store: SqlStore,
) -> None:
    """A fold of golden probes only counts no answer: no point, unless it suspended the pair
    (then a point marked suspended). mutant: the `answered <= 0 and not fired` return
    dropped: a point of 0 answers; or `fired` not kept: the suspension's point unmarked."""
    row = WatchRow("a", "caption", answered=4, failed=1)
    assert await store.live_watch.fold((), lambda _: [row])
    assert await store.live_watch.fold((), lambda _: [row])
    assert await store.live_watch.fold((), lambda _: [replace(row, suspension=SUSPENSION)])
    points = (await store.live_watch.points())[("a", "caption")]
    assert [(p.answered, p.failed, p.suspended) for p in points] == [(4, 1, False), (0, 0, True)]


async def test_a_fresh_watch_draws_a_fresh_chart(store: SqlStore) -> None:
    """A new certification and a reinstatement start the watch from zero, and the chart with it:
    the pair's points are gone, another pair's kept; a reinstatement refused (the pair not
    suspended) keeps them. mutants: the points' DELETE dropped from `save_certification`, or from
    `reinstate`, or run whether or not the reinstatement changed the watch: each assertion in
    turn fails."""
    provider = FakeProvider(name="a")
    await certify(store, provider, "c")
    row = WatchRow("a", "caption", answered=4, failed=1)
    other = WatchRow("b", "caption", answered=2)
    assert await store.live_watch.fold((), lambda _: [row, other])
    await certify(store, provider, "c")  # certified again: a new watch
    points = await store.live_watch.points()
    assert ("a", "caption") not in points
    assert len(points[("b", "caption")]) == 1

    assert await store.live_watch.fold((), lambda _: [row])
    assert not await store.certifications.reinstate(
        provider="a", contract="caption", by="user:ops", reason="not suspended"
    )
    assert len((await store.live_watch.points())[("a", "caption")]) == 1
    assert await store.live_watch.fold((), lambda _: [replace(row, suspension=SUSPENSION)])
    assert await store.certifications.reinstate(
        provider="a", contract="caption", by="user:ops", reason="template fixed"
    )
    points = await store.live_watch.points()
    assert ("a", "caption") not in points
    assert len(points[("b", "caption")]) == 1
