"""The geometry and words of the matrix's live failure-rate chart (router/ui/chart.py), drawn
through the console's own template: a baseline line, a mark where the pair was suspended, a
dot per fold with answers, higher for a higher rate."""

from __future__ import annotations

import re

from jobrouter.store.live_watch import WatchPoint
from jobrouter.ui.chart import HEIGHT, PAD, live_chart
from jobrouter.ui.render import templates


def point(answered: int, failed: int, *, suspended: bool = False) -> WatchPoint:
    return WatchPoint(
        at=0.0,
        answered=answered,
        failed=failed,
        large=0,
        small=0,
        baseline=0.02,
        suspended=suspended,
    )


POINTS = [point(10, 0), point(10, 1), point(10, 5), point(0, 0, suspended=True)]


def test_a_chart_draws_the_baseline_the_rates_and_where_the_pair_was_suspended() -> None:
    """mutants: the baseline line never drawn (`baseline_y` None); the suspending fold not
    marked (`fired_x` empty); the rate axis upside down (a higher rate drawn lower)."""
    chart = live_chart("fast", "quote", POINTS)
    assert chart is not None
    assert [d.title for d in chart.dots] == [
        "0 of 10 broke the contract (0%)",
        "1 of 10 broke the contract (10%)",
        "5 of 10 broke the contract (50%)",
    ]  # the last fold counted no answer: no dot, its mark only
    assert chart.dots[0].y == HEIGHT - PAD > chart.dots[1].y > chart.dots[2].y == PAD
    assert chart.top == 0.5
    assert chart.baseline_y is not None and chart.dots[1].y < chart.baseline_y < chart.dots[0].y
    assert chart.fired_x == (chart.width - PAD,)
    assert chart.label == (
        "Live failure rate of fast for quote over its last 4 folds: 6 of 30 answers broke the "
        "contract; latest fold 5 of 10; certified baseline 2.0%; suspended by the fold marked "
        "in red."
    )
    svg = templates.get_template("_live_chart.html").render(chart=chart)
    assert len(re.findall(r'<circle class="point"', svg)) == 3
    assert svg.count('<line class="baseline"') == 1
    assert svg.count('<line class="fired"') == 1
    assert 'aria-label="Live failure rate of fast for quote' in svg


def test_a_pair_without_points_has_no_chart_and_one_without_a_baseline_no_line() -> None:
    """mutant: `baseline or None` dropped: a line drawn at 0% for an uncertified pair."""
    assert live_chart("fast", "quote", []) is None
    uncertified = live_chart("fast", "quote", [WatchPoint(0.0, 4, 1, 0, 0, 0.0, False)])
    assert uncertified is not None and uncertified.baseline_y is None
    assert uncertified.label.endswith("no certified baseline.")
    assert uncertified.top == 0.25
