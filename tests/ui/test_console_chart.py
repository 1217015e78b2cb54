"""The matrix's chart of a pair's live failure rate (issue 27) in headless Chromium: provider
`fast` is certified for contract `chart` by a real certification run (its case passes), then
its answers are folded one fold at a time into the console's store, and the pair's cell draws
one point per fold against the certified baseline, saying the figures in its label."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from jobrouter.drift import WatchRule
from jobrouter.models import AttemptUsage
from jobrouter.store import SqlStore
from jobrouter.store.live_watch import LiveVerdict
from jobrouter.watch import fold_verdicts
from tests.support.store_jobs import create_job
from tests.ui.conftest import Console, certify_fast, shoot, signed_in
from tests.ui.test_console import in_store

FOLDS = (False, True, False, False, True, False)  # each fold: one answer, broke the contract?


async def answer_and_fold(store: SqlStore, n: int, failed: bool) -> None:
    """One answer of `fast` for `chart`, its verdict written by the attempt's end, then folded
    (by this fold, or by the server's leader first: a fold counts it once either way)."""
    job = await create_job(
        store,
        owner="chart",
        idempotency_key=f"chart-{n}",
        task="chart",
        input={"product": "tea"},
        params={},
        deadline_s=None,
        claimed_by="chart-test",  # never the server's worker: this test ends the attempt
        claim_s=3600.0,
    )
    _, attempt = await store.jobs.start_attempt(
        job.id, provider="fast", model=None, worker="chart-test", lease_s=60, exclusive=False
    )
    failure = "schema: answer does not match the output schema" if failed else None
    seen = LiveVerdict(attempt.id, "fast", "chart", failed=failed, failure=failure)
    await store.jobs.finish_attempt_cas(attempt.id, {}, AttemptUsage(), verdict=seen)
    await fold_verdicts(store.certifications, WatchRule(), batch=100)
    assert await store.live_watch.pending(100) == []


def test_the_matrix_draws_one_point_per_fold_of_the_live_answers(
    browser: Browser, console: Console
) -> None:
    """Six folds of one answer each, two broken: six points, the label says 2 of 6, the last
    fold's figures and the baseline the certification gave (its golden runs all passed: the
    floor, 2%), drawn as the dashed line.
    mutant: the matrix not passed the pair's points: no chart.
    mutant: the fold writes no baseline on its point (`baseline` 0): "no certified baseline",
    no dashed line."""
    # The in-process echo reports no usage and cannot show its prompt: rendering is waived.
    certify_fast(console.server, "chart", {"rendering": "in-process echo, nothing to count"})
    for n, failed in enumerate(FOLDS):
        in_store(console, lambda store, n=n, failed=failed: answer_and_fold(store, n, failed))
    page = signed_in(browser, console, console.alice)
    page.goto(f"{console.url}/ui/matrix")
    cell = page.locator("#cell-fast-chart")
    expect(cell.locator("> summary .badge")).to_have_text("pass")  # certified, not uncertified
    cell.locator("> summary").click()  # a passing cell's evidence starts folded
    chart = cell.locator("figure.live-chart svg[role=img]")
    expect(chart).to_be_visible()
    expect(chart.locator("circle.point")).to_have_count(len(FOLDS))
    expect(chart).to_have_attribute(
        "aria-label",
        "Live failure rate of fast for chart over its last 6 folds: 2 of 6 answers broke the "
        "contract; latest fold 0 of 1; certified baseline 2.0%.",
    )
    expect(chart.locator("line.baseline")).to_have_count(1)
    expect(chart.locator("polyline.rate")).to_have_count(1)
    chart.scroll_into_view_if_needed()
    shoot(page, "matrix-live-chart")
    page.context.close()
