"""The console's charts, the geometry of small inline SVGs drawn server-side, so a page needs no
JS library: the matrix's chart of a pair's live failure rate (issue 27), from the watch's kept
folds (router/store/live_watch.py, WatchPoint), and the spend page's known spend per UTC day
(issue 29), from a spend report by day (jobrouter.spend_report). The templates
(_live_chart.html, _spend_chart.html) only place what this computes; each label says in words
what the figure shows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jobrouter.models import SpendLine
from jobrouter.store.live_watch import WatchPoint

WIDTH, HEIGHT, PAD = 300, 80, 6  # the SVG's user units: small enough for a matrix cell
MIN_SCALE = 0.10  # the rate axis reaches at least 10%, so a 2% baseline is not at the top


@dataclass(frozen=True)
class Dot:
    """A fold with answers: where it is drawn and its figures in words (its <title>)."""

    x: float
    y: float
    title: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    dots: tuple[Dot, ...]
    line: str  # the polyline's points, "x,y x,y ..."
    baseline_y: float | None  # None: the pair holds no certified baseline
    fired_x: tuple[float, ...]  # the folds that suspended the pair
    top: float  # the rate at the top of the axis
    label: str


def rate(point: WatchPoint) -> float | None:
    return point.failed / point.answered if point.answered else None


def live_chart(provider: str, contract: str, points: Sequence[WatchPoint]) -> Chart | None:
    """The chart of `points` (oldest first), one position per fold; None when there are none."""
    if not points:
        return None
    rates = [r for r in map(rate, points) if r is not None]
    baseline = points[-1].baseline or None
    top = min(1.0, max([MIN_SCALE, 2 * (baseline or 0), *rates]))
    step = (WIDTH - 2 * PAD) / max(1, len(points) - 1)

    def x(i: int) -> float:
        return round(PAD + i * step, 1)

    def y(value: float) -> float:
        return round(HEIGHT - PAD - value / top * (HEIGHT - 2 * PAD), 1)

    dots = tuple(
        Dot(x(i), y(r), f"{p.failed} of {p.answered} broke the contract ({r:.0%})")
        for i, p in enumerate(points)
        if (r := rate(p)) is not None
    )
    fired = tuple(x(i) for i, p in enumerate(points) if p.suspended)
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        dots=dots,
        line=" ".join(f"{d.x},{d.y}" for d in dots),
        baseline_y=None if baseline is None else y(baseline),
        fired_x=fired,
        top=top,
        label=chart_label(provider, contract, points, baseline, len(fired)),
    )


def chart_label(
    provider: str,
    contract: str,
    points: Sequence[WatchPoint],
    baseline: float | None,
    fired: int,
) -> str:
    """The figures in words, for a reader who cannot see the drawing."""
    answered = sum(p.answered for p in points)
    failed = sum(p.failed for p in points)
    last = next((p for p in reversed(points) if p.answered), None)
    words = [
        f"Live failure rate of {provider} for {contract} over its last {len(points)} folds: "
        f"{failed} of {answered} answers broke the contract"
    ]
    if last is not None:
        words.append(f"latest fold {last.failed} of {last.answered}")
    words.append(
        "no certified baseline" if baseline is None else f"certified baseline {baseline:.1%}"
    )
    if fired:
        words.append("suspended by the fold marked in red")
    return "; ".join(words) + "."


# ---- the spend page's chart (issue 29): known spend per UTC day ------------------------------

SPEND_WIDTH, SPEND_HEIGHT = 600, 140
MAX_DAYS = 400  # a longer range draws only its days with spend, not an axis of empty days
DAY_S = 86_400


@dataclass(frozen=True)
class Bar:
    """One UTC day: its known spend as a bar; `unknown` attempts of unknown cost are marked
    on top (their cost is not in the bar: it is not known, and is never drawn as $0)."""

    day: str
    x: float
    y: float
    width: float
    height: float
    unknown: int
    title: str


@dataclass(frozen=True)
class SpendChart:
    width: int
    height: int
    bars: tuple[Bar, ...]
    top: float  # the USD at the top of the axis
    label: str


def spend_chart(lines: Sequence[SpendLine], since: datetime, until: datetime) -> SpendChart | None:
    """The chart of a report by day (`lines`, one per day with attempts): one bar per day of
    [since, until) when the range is at most MAX_DAYS days (an empty day at zero), else per
    day with attempts. None when there is no attempt."""
    if not lines:
        return None
    found = {line.period: line for line in lines if line.period}
    days = _days(since, until) if (until - since).days <= MAX_DAYS else sorted(found)
    top = max((line.cost_usd or 0.0 for line in lines), default=0.0)
    slot = (SPEND_WIDTH - 2 * PAD) / max(1, len(days))
    bars = []
    for i, day in enumerate(days):
        line = found.get(day)
        cost = (line.cost_usd or 0.0) if line else 0.0
        height = 0.0 if top <= 0 else round(cost / top * (SPEND_HEIGHT - 2 * PAD), 1)
        bars.append(
            Bar(
                day=day,
                x=round(PAD + i * slot + slot * 0.1, 1),
                y=round(SPEND_HEIGHT - PAD - height, 1),
                width=round(slot * 0.8, 1),
                height=height,
                unknown=line.cost_unknown if line else 0,
                title=_bar_title(day, line),
            )
        )
    return SpendChart(SPEND_WIDTH, SPEND_HEIGHT, tuple(bars), top, _spend_label(lines, days))


def _days(since: datetime, until: datetime) -> list[str]:
    first = since.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    count = math.ceil((until - first).total_seconds() / DAY_S)
    return [(first + timedelta(days=n)).strftime("%Y-%m-%d") for n in range(count)]


def _bar_title(day: str, line: SpendLine | None) -> str:
    if line is None:
        return f"{day}: no attempt"
    known = "no cost known" if line.cost_usd is None else f"${line.cost_usd:.6f} known"
    words = f"{day}: {known} over {line.attempts} attempts, {line.tokens} tokens"
    if line.cost_unknown:
        words += f"; {line.cost_unknown} of unknown cost, not in the bar"
    return words


def _spend_label(lines: Sequence[SpendLine], days: Sequence[str]) -> str:
    """The figures in words, for a reader who cannot see the drawing."""
    known = sum(line.cost_usd or 0.0 for line in lines)
    attempts = sum(line.attempts for line in lines)
    unknown = sum(line.cost_unknown for line in lines)
    peak = max(lines, key=lambda line: line.cost_usd or 0.0)
    words = [
        f"Known spend per UTC day from {days[0]} to {days[-1]}: ${known:.6f} over "
        f"{attempts} attempts",
        f"highest {peak.period} (${peak.cost_usd or 0.0:.6f})",
    ]
    if unknown:
        words.append(f"{unknown} attempts of unknown cost, marked above their day's bar")
    return "; ".join(words) + "."
