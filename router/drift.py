"""Issue 27's sequential rule: is a certified provider's live traffic drifting? Pure, stdlib only.

Two rules run side by side over the answered attempts of one provider x contract, from the
moment its certification (or reinstatement) reset the `Watch`:

- **failure rate**: two Bernoulli CUSUMs (Page's log-likelihood ratio, floored at 0) against
  the certified baseline p0, one designed for a large rise (p0 + `large_rise`), one for a small
  one (p0 + `small_rise`). A failed answer adds ln(p1 / p0), a passed one subtracts
  ln((1 - p0) / (1 - p1)); the rule fires when either statistic reaches its threshold (nats).
  The large one catches a broken provider fast, the small one a slow leak; a single CUSUM
  cannot do both at this false-alarm rate (docs/certification.md has the measured figures).
- **rendering**: `rendering_run` answers in a row whose reported prompt tokens were out of
  tolerance. A run, not a rate: a template or a dropped system prompt is off on every answer,
  while one odd count is noise. An answer that could not be checked (None) neither extends nor
  breaks the run.

The statistics are kept as integers, in hundredths of a nat (`SCALE`): the state is exact in
JSON, and the simulation test computes the false-alarm probability exactly over these integers
(a Markov chain), so the figures are those of this code, not of an idealized CUSUM.

Once a rule has fired, the watch is latched: later answers are counted but the statistics stay
where they fired, so the verdict cannot fall back to None before the suspension is recorded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache

__all__ = ["SCALE", "Alarm", "Watch", "WatchRule", "certified_baseline", "observe", "verdict"]

SCALE = 100  # statistic units per nat
# A baseline above this is not a certified provider; clamped so that p0 < p1 < 1 always holds.
MAX_BASELINE = 0.5
MAX_RISEN = 0.99


@dataclass(frozen=True)
class WatchRule:
    """The parameters of the rule; the defaults are the ones docs/certification.md measures."""

    baseline_floor: float = 0.02  # no provider is assumed better than 2% failures
    large_rise: float = 0.20  # the large CUSUM is designed for baseline + 20 points
    large_threshold: float = 14.0  # nats
    small_rise: float = 0.05  # the small CUSUM is designed for baseline + 5 points
    small_threshold: float = 13.5  # nats
    rendering_run: int = 5  # answers in a row out of tolerance

    def __post_init__(self) -> None:
        # The config model validates what an operator writes; this guards code that builds one.
        if not 0 < self.baseline_floor <= MAX_BASELINE:
            raise ValueError(f"baseline_floor {self.baseline_floor} is not in (0, {MAX_BASELINE}]")
        for rise in (self.large_rise, self.small_rise):
            if not 0 < rise < 1:
                raise ValueError(f"a rise of {rise} is not in (0, 1)")
        if min(self.large_threshold, self.small_threshold) <= 0 or self.rendering_run < 1:
            raise ValueError("thresholds must be > 0 and rendering_run >= 1")


@dataclass(frozen=True)
class Watch:
    """What is kept per provider x contract since the last reset (a fresh `Watch()`)."""

    answered: int = 0
    failed: int = 0
    large: int = 0  # the large-rise CUSUM, in 1/SCALE nats
    small: int = 0  # the small-rise CUSUM, in 1/SCALE nats
    rendering_run: int = 0  # current run of answers out of tolerance
    rendering_off: int = 0  # answers out of tolerance since the reset
    baseline: float = 0.0  # the baseline the last answer was weighed against (for the reason)

    def to_json(self) -> dict[str, int | float]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Watch:
        """The inverse of `to_json`; a missing key takes its default (a state written before
        the key existed), a key of the wrong type is an error (a corrupt row is not zero)."""
        counts = {f.name: _count(data, f.name) for f in fields(cls) if f.name != "baseline"}
        baseline = data.get("baseline", 0.0)
        if isinstance(baseline, bool) or not isinstance(baseline, int | float):
            raise ValueError(f"watch field baseline: {baseline!r} is not a number")
        return cls(**counts, baseline=float(baseline))


def _count(data: Mapping[str, object], name: str) -> int:
    value = data.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"watch field {name}: {value!r} is not a count")
    return value


@dataclass(frozen=True)
class Alarm:
    """A rule that fired: what to record as the suspension's evidence."""

    rule: str  # "failure rate" | "rendering"
    statistic: float  # nats for the failure rate, answers in a row for rendering
    threshold: float
    answered: int
    failed: int
    reason: str


def certified_baseline(rule: WatchRule, runs: int, failures: int) -> float:
    """The failure rate certification's golden runs showed, floored by `rule.baseline_floor`:
    15 passes out of 15 runs say little about a 1-in-50 failure, so 0% is never assumed."""
    if runs <= 0:
        return rule.baseline_floor
    return min(max(failures / runs, rule.baseline_floor), MAX_BASELINE)


@lru_cache(maxsize=256)
def steps(p0: float, rise: float) -> tuple[int, int]:
    """(up on a failure, down on a pass) in 1/SCALE nats for baseline p0 and the designed rise."""
    p1 = min(p0 + rise, MAX_RISEN)
    up = round(SCALE * math.log(p1 / p0))
    down = round(SCALE * math.log((1 - p0) / (1 - p1)))
    # A zero step would make the statistic never move; one unit is the smallest honest weight.
    return max(up, 1), max(down, 1)


def _clamp(rule: WatchRule, baseline: float) -> float:
    return min(max(baseline, rule.baseline_floor), MAX_BASELINE)


def _units(threshold: float) -> int:
    return round(threshold * SCALE)


def _cusum(value: int, step: tuple[int, int], failed: bool) -> int:
    up, down = step
    return value + up if failed else max(0, value - down)


def observe(
    rule: WatchRule, watch: Watch, baseline: float, *, failed: bool, rendering_off: bool | None
) -> Watch:
    """The watch after one more answered attempt. `failed`: it failed a live verdict (JSON,
    schema, a check, the finish reason); `rendering_off`: its reported prompt tokens were out of
    tolerance (None: not checkable, which counts neither way)."""
    counted = replace(watch, answered=watch.answered + 1, failed=watch.failed + failed)
    if verdict(rule, watch) is not None:
        return counted  # latched: the evidence stays as it was when the rule fired
    p0 = _clamp(rule, baseline)
    run = watch.rendering_run
    if rendering_off is not None:
        run = run + 1 if rendering_off else 0
    return replace(
        counted,
        large=_cusum(watch.large, steps(p0, rule.large_rise), failed),
        small=_cusum(watch.small, steps(p0, rule.small_rise), failed),
        rendering_run=run,
        rendering_off=watch.rendering_off + (rendering_off is True),
        baseline=p0,
    )


def verdict(rule: WatchRule, watch: Watch) -> Alarm | None:
    """The rule that fires on this watch, or None. Rendering first: it names the cause."""
    if watch.rendering_run >= rule.rendering_run:
        return Alarm(
            rule="rendering",
            statistic=float(watch.rendering_run),
            threshold=float(rule.rendering_run),
            answered=watch.answered,
            failed=watch.failed,
            reason=(
                f"{watch.rendering_run} answers in a row reported prompt tokens out of"
                f" tolerance ({watch.rendering_off} of {watch.answered} answers since the reset)"
            ),
        )
    for name, value, rise, threshold in (
        ("large", watch.large, rule.large_rise, rule.large_threshold),
        ("small", watch.small, rule.small_rise, rule.small_threshold),
    ):
        if value >= _units(threshold):
            return _rate_alarm(watch, name, value / SCALE, rise, threshold)
    return None


def _rate_alarm(watch: Watch, name: str, statistic: float, rise: float, threshold: float) -> Alarm:
    rate = watch.failed / watch.answered if watch.answered else 0.0
    reason = (
        f"live failure rate {rate:.0%} over {watch.answered} answers against a certified"
        f" baseline of {watch.baseline:.0%} ({name}-rise CUSUM for +{rise * 100:.0f} points"
        f" {statistic:.1f} >= {threshold:.1f})"
    )
    return Alarm("failure rate", statistic, threshold, watch.answered, watch.failed, reason)
