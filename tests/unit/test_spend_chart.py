"""The spend page's chart (router/ui/chart.py, spend_chart), drawn through the console's own
template: a bar per UTC day of the range, as tall as that day's known spend, an empty day at
zero, a mark on a day with attempts of unknown cost (never drawn as $0 spend), and the
figures in words."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from jobrouter.models import SpendLine
from jobrouter.ui.chart import PAD, SPEND_HEIGHT, spend_chart
from jobrouter.ui.render import templates

SINCE = datetime(2026, 12, 1, tzinfo=UTC)
UNTIL = datetime(2026, 12, 4, tzinfo=UTC)
LINES = [
    SpendLine(period="2026-12-01", attempts=2, tokens=40, cost_usd=0.002, cost_unknown=0),
    SpendLine(period="2026-12-03", attempts=3, tokens=60, cost_usd=0.001, cost_unknown=1),
]


def test_a_bar_per_day_as_tall_as_its_known_spend_an_empty_day_at_zero() -> None:
    """Mutants killed: the bar's height not scaled by its day's cost (every bar full); the
    range's empty days left out (two bars, the axis no longer one slot per day)."""
    chart = spend_chart(LINES, SINCE, UNTIL)
    assert chart is not None
    assert [bar.day for bar in chart.bars] == ["2026-12-01", "2026-12-02", "2026-12-03"]
    first, empty, third = chart.bars
    assert first.height == SPEND_HEIGHT - 2 * PAD  # the highest day reaches the top
    assert empty.height == 0 and empty.unknown == 0
    assert third.height == first.height / 2
    assert first.x < empty.x < third.x


def test_unknown_costs_are_marked_never_drawn_as_spend() -> None:
    """Mutant killed: `Bar.unknown` left 0 (the day with an unknown cost looks complete)."""
    chart = spend_chart(LINES, SINCE, UNTIL)
    assert chart is not None
    assert [bar.unknown for bar in chart.bars] == [0, 0, 1]
    assert "1 of unknown cost, not in the bar" in chart.bars[2].title
    assert chart.label == (
        "Known spend per UTC day from 2026-12-01 to 2026-12-03: $0.003000 over 5 attempts; "
        "highest 2026-12-01 ($0.002000); 1 attempts of unknown cost, marked above their "
        "day's bar."
    )
    html = templates.get_template("_spend_chart.html").render(chart=chart)
    assert len(re.findall(r'<rect class="spend"', html)) == 3
    assert len(re.findall(r'<rect class="unknown"', html)) == 1
    assert "orange: a day with attempts of unknown cost" in html


def test_no_attempt_no_chart_and_only_unknown_costs_draw_no_bar_height() -> None:
    assert spend_chart([], SINCE, UNTIL) is None
    unknown = [SpendLine(period="2026-12-02", attempts=1, tokens=9, cost_usd=None, cost_unknown=1)]
    chart = spend_chart(unknown, SINCE, UNTIL)
    assert chart is not None
    assert [bar.height for bar in chart.bars] == [0, 0, 0]
    assert [bar.unknown for bar in chart.bars] == [0, 1, 0]
