"""The console matrix's chart of a pair's live failure rate (issue 27): the geometry of a small
inline SVG, drawn server-side from the watch's kept folds (router/store/live_watch.py,
WatchPoint), so the page needs no JS library. The template (_live_chart.html) only places
what this computes; the label says in words what the figure shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
