"""Issue 27's targets for the sequential rule (jobrouter.drift), with its default parameters.

False alarms are computed exactly (tests/support/drift_sim.py: a Markov chain over the integer
statistic) and cross-checked by a Monte Carlo run of the real code at thresholds where alarms are
common enough to count; detection delays are 2,000 seeded runs of the real code each. The
"caught in >= 99% of runs" reading of the targets cannot be met by ANY rule at a false-alarm
rate under 1 in 10,000 windows (the Neyman-Pearson bound, tested below): the rule meets the
targets as median delays and the measured shares are asserted as they are.
"""

from __future__ import annotations

import math

from jobrouter.drift import Watch, WatchRule, observe, steps, verdict
from tests.support import drift_sim

RULE = WatchRule()
BASE = 0.02


def test_at_its_baseline_fewer_than_1_in_10000_windows_of_1000_alarm() -> None:
    large, small = drift_sim.false_alarm_bound(RULE, BASE, 1000)
    assert large + small < 1e-4
    assert large > 1e-5 and small > 1e-5  # both spend the budget: tighter would slow detection


def test_the_exact_chain_agrees_with_the_real_code() -> None:
    noisy = WatchRule(large_threshold=6.0, small_threshold=6.0)
    large, small = drift_sim.false_alarm_bound(noisy, BASE, 1000)
    windows = 200
    fired = drift_sim.windows_alarmed(noisy, BASE, windows, 1000, seed=27)
    # the union bound is above the truth; the truth is above the larger of the two
    low, high = max(large, small), min(large + small, 1.0)
    sd = math.sqrt(high * (1 - high) / windows)
    assert low - 4 * sd <= fired / windows <= high + 4 * sd


def test_a_rise_to_plus_20_points_is_caught_in_a_median_under_50() -> None:
    found = drift_sim.delays(RULE, BASE, BASE + 0.20, bound=50, runs=2000, seed=20)
    assert found.median <= 50 and found.never == 0
    assert found.within >= 0.74  # measured 0.76; the best possible is 0.95 (below)


def test_a_rise_to_plus_5_points_is_caught_in_a_median_under_400() -> None:
    found = drift_sim.delays(RULE, BASE, BASE + 0.05, bound=400, runs=2000, seed=5)
    assert found.median <= 400 and found.never == 0
    assert found.within >= 0.74  # measured 0.76; the best possible is 0.94 (below)


def test_no_rule_can_catch_99_percent_at_this_false_alarm_rate() -> None:
    # Even a rule that spends its whole 1e-4 on the first n answers stays under 99%.
    assert drift_sim.best_power(50, BASE, BASE + 0.20, 1e-4) < 0.96
    assert drift_sim.best_power(400, BASE, BASE + 0.05, 1e-4) < 0.95


def test_rendering_drift_suspends_at_the_fifth_answer() -> None:
    watch = Watch()
    for _ in range(5):
        assert verdict(RULE, watch) is None  # not before the fifth
        watch = observe(RULE, watch, BASE, failed=False, rendering_off=True)
    alarm = verdict(RULE, watch)
    assert alarm is not None and alarm.rule == "rendering" and watch.answered == 5


def test_one_odd_rendering_in_20_does_not_suspend_over_10000() -> None:
    # exact for independent odd answers at 5%: 0.3% of such 10,000-answer stretches
    assert drift_sim.rendering_false_alarm(0.05, RULE.rendering_run, 10_000) < 0.005
    watch = Watch()
    for answered in range(10_000):  # every 20th answer odd, the rest fine or unchecked
        off = True if answered % 20 == 0 else (False if answered % 3 else None)
        watch = observe(RULE, watch, BASE, failed=False, rendering_off=off)
    assert verdict(RULE, watch) is None and watch.rendering_off == 500


def test_the_steps_are_the_log_likelihood_ratio_to_a_hundredth_of_a_nat() -> None:
    up, down = steps(BASE, 0.20)
    assert abs(up - 100 * math.log(0.22 / 0.02)) <= 0.5
    assert abs(down - 100 * math.log(0.98 / 0.78)) <= 0.5
