"""The sequential rule that suspends a drifting provider (issue 27): pure, no I/O.

Two Bernoulli CUSUMs over a pair's live answers, each the log-likelihood ratio of "the failure
rate rose by `shift`" against "it is the certified baseline", summed answer by answer and held
at 0 from below (Page's CUSUM); either reaching its threshold fires:

    S <- max(0, S + log(p1/p0))              for a failed answer
    S <- max(0, S + log((1-p1)/(1-p0)))      for a good one       p1 = min(p0 + shift, 0.99)

- `fast`: designed for a large rise (+20 points), caught in a few dozen answers;
- `slow`: designed for a small one (+5 points), caught in a few hundred.

A single CUSUM cannot do both at a false-alarm rate this low: tuned for +5 it takes ~50 answers
for +20, tuned for +20 it misses +5 for thousands. The thresholds are set so that a provider at
its baseline is suspended falsely in fewer than 1 of 10,000 windows of 1,000 answers (computed
exactly: tests/unit/test_drift.py, `python -m tests.bench.drift`; the figures are in
docs/certification.md).

Rendering drift is not noise (an exact prompt count does not wander): `rendering_run` answers
out of tolerance in a row fire; one within tolerance starts the run again, one not compared
(None) neither breaks nor extends it.

Why not a library: the two CUSUMs are six lines of arithmetic, and the state must be a few
numbers kept as JSON in the database between the leader's folds.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class WatchRule:
    """`[certification.watch]`'s rule parameters (docs/certification.md has the measured
    figures for the defaults)."""

    baseline_floor: float = 0.02  # a provider that passed every golden run is not perfect
    fast_shift: float = 0.20
    fast_threshold: float = 14.0
    slow_shift: float = 0.05
    slow_threshold: float = 13.5
    rendering_run: int = 3


@dataclass(frozen=True)
class Watch:
    """A pair's state between folds: both statistics, the rendering run, the counts."""

    fast: float = 0.0
    slow: float = 0.0
    rendering_run: int = 0
    answered: int = 0
    failed: int = 0
    baseline: float = 0.0  # the baseline the statistics were last computed against

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Watch:
        data = json.loads(text)
        return cls(
            fast=float(data["fast"]),
            slow=float(data["slow"]),
            rendering_run=int(data["rendering_run"]),
            answered=int(data["answered"]),
            failed=int(data["failed"]),
            baseline=float(data["baseline"]),
        )


@dataclass(frozen=True)
class Alarm:
    rule: str  # "failure rate" or "rendering"
    statistic: float
    threshold: float
    answered: int
    failed: int
    reason: str


def certified_baseline(rule: WatchRule, runs: int, failures: int) -> float:
    """The failure rate certification saw over its golden runs, at least `baseline_floor`."""
    seen = failures / runs if runs > 0 else 0.0
    return min(max(seen, rule.baseline_floor), 0.5)


def step(statistic: float, baseline: float, shift: float, failed: bool) -> float:
    """One answer's step of a CUSUM designed for a rise of `shift` above `baseline`."""
    p1 = min(baseline + shift, 0.99)
    if failed:
        return max(0.0, statistic + math.log(p1 / baseline))
    return max(0.0, statistic + math.log((1 - p1) / (1 - baseline)))


def observe(
    rule: WatchRule, watch: Watch, baseline: float, *, failed: bool, rendering_off: bool | None
) -> Watch:
    """`watch` after one more answer."""
    if rendering_off is None:
        run = watch.rendering_run
    else:
        run = watch.rendering_run + 1 if rendering_off else 0
    return replace(
        watch,
        fast=step(watch.fast, baseline, rule.fast_shift, failed),
        slow=step(watch.slow, baseline, rule.slow_shift, failed),
        rendering_run=run,
        answered=watch.answered + 1,
        failed=watch.failed + int(failed),
        baseline=baseline,
    )


def verdict(rule: WatchRule, watch: Watch) -> Alarm | None:
    """The alarm `watch` raises, if any (rendering first: it needs the fewest answers)."""
    if watch.rendering_run >= rule.rendering_run:
        return Alarm(
            rule="rendering",
            statistic=float(watch.rendering_run),
            threshold=float(rule.rendering_run),
            answered=watch.answered,
            failed=watch.failed,
            reason=(
                f"the provider's prompt token count was out of tolerance on "
                f"{watch.rendering_run} answers in a row (the prompt it reads changed)"
            ),
        )
    for name, statistic, threshold in (
        ("fast", watch.fast, rule.fast_threshold),
        ("slow", watch.slow, rule.slow_threshold),
    ):
        if statistic >= threshold:
            share = watch.failed / watch.answered if watch.answered else 0.0
            return Alarm(
                rule="failure rate",
                statistic=statistic,
                threshold=threshold,
                answered=watch.answered,
                failed=watch.failed,
                reason=(
                    f"live failure rate {share:.0%} ({watch.failed} of {watch.answered} "
                    f"answers) against a certified baseline of {watch.baseline:.0%} "
                    f"({name} CUSUM {statistic:.1f} >= {threshold:.1f})"
                ),
            )
    return None


@dataclass(frozen=True)
class PromptCalibration:
    """What certification saw of a provider's prompt count: for each golden case, the
    characters sent and the count the provider reported. A live answer's count is compared with
    the count this predicts for its own characters: the nearest golden case's, moved by the
    tokens per character the cases show (4 characters a token when they cannot show it).

    The margin is the cases' own spread around that line plus a quarter of the moved part (a
    live input's words need not tokenize like the golden ones), at least `min_margin` tokens: a
    server that drops the system prompt, or renders another chat template, moves the count by
    more than that on every answer, which the rendering run turns into a suspension; an odd
    input that moves it once does not."""

    points: tuple[tuple[int, int], ...]  # (characters sent, tokens reported)
    tokens_per_char: float
    spread: float
    min_margin: int = 2

    @classmethod
    def from_points(cls, points: tuple[tuple[int, int], ...]) -> PromptCalibration | None:
        if not points:
            return None
        slope = _slope(points)
        ordered = tuple(sorted(set(points)))
        spread = max(abs(tokens - _predicted(ordered, slope, chars)) for chars, tokens in points)
        return cls(ordered, slope, spread)

    def expected(self, chars: int) -> tuple[float, float]:
        """(the count expected for `chars` characters, the margin around it)."""
        near_chars, _ = min(self.points, key=lambda point: abs(point[0] - chars))
        moved = abs(chars - near_chars) * self.tokens_per_char
        margin = max(float(self.min_margin), self.spread + 0.25 * moved + 1)
        return _predicted(self.points, self.tokens_per_char, chars), margin

    def off(self, chars: int, tokens: int) -> bool:
        expected, margin = self.expected(chars)
        return abs(tokens - expected) > margin


def _predicted(points: tuple[tuple[int, int], ...], slope: float, chars: int) -> float:
    near_chars, near_tokens = min(points, key=lambda point: abs(point[0] - chars))
    return near_tokens + (chars - near_chars) * slope


def _slope(points: tuple[tuple[int, int], ...]) -> float:
    """Tokens per character by least squares over the cases, when their lengths differ by
    enough to say (20 characters); else 4 characters a token. Kept within 0.05-1."""
    xs = [float(chars) for chars, _ in points]
    if max(xs) - min(xs) < 20:
        return 0.25
    mean_x = sum(xs) / len(xs)
    mean_y = sum(tokens for _, tokens in points) / len(points)
    covariance = sum((x - mean_x) * (y - mean_y) for x, (_, y) in zip(xs, points, strict=True))
    variance = sum((x - mean_x) ** 2 for x in xs)
    return min(max(covariance / variance, 0.05), 1.0)
