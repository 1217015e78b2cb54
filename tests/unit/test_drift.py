"""The sequential rule of jobrouter.drift against issue 27's targets, and each of its branches.

Targets (docs/certification.md states the measured figures; `python -m tests.bench.drift`
prints them): from a 2% baseline, a rise to +20 points caught within 50 answers and to +5
points within 400 (the median run; the 90th percentile is reported beside it), a provider at
its baseline suspended falsely in fewer than 1 of 10,000 windows of 1,000 answers, rendering
drift within 5 answers.

The false-alarm probability is computed exactly (to the discretisation of the statistic): a
Markov chain over each CUSUM's integer-scaled value, for 1,000 steps; the two CUSUMs' union
is bounded by the sum. A Monte Carlo run of the real `observe` cross-checks the chain on a
rule made deliberately touchy, where false alarms are frequent enough to count."""

from __future__ import annotations

import math
import random

from jobrouter.drift import (
    PromptCalibration,
    Watch,
    WatchRule,
    certified_baseline,
    observe,
    step,
    verdict,
)

RULE = WatchRule()
BASELINE = 0.02
SCALE = 100  # steps of the statistic per unit of log-likelihood in the exact computation


def answers_until_alarm(rule: WatchRule, rate: float, rng: random.Random, cap: int) -> int:
    watch = Watch()
    for answered in range(1, cap + 1):
        watch = observe(rule, watch, BASELINE, failed=rng.random() < rate, rendering_off=None)
        if verdict(rule, watch) is not None:
            return answered
    return cap + 1


def detection(rule: WatchRule, rate: float, runs: int, seed: int) -> tuple[int, int]:
    """(median, 90th percentile) of the answers it takes to fire, over seeded runs."""
    rng = random.Random(seed)
    taken = sorted(answers_until_alarm(rule, rate, rng, 5000) for _ in range(runs))
    return taken[runs // 2], taken[runs * 9 // 10]


def false_alarm(shift: float, threshold: float, answers: int = 1000) -> float:
    """P(a CUSUM designed for `shift` fires within `answers` at the baseline), exactly."""
    p1 = min(BASELINE + shift, 0.99)
    up = round(math.log(p1 / BASELINE) * SCALE)
    down = round(math.log((1 - p1) / (1 - BASELINE)) * SCALE)
    top = math.ceil(threshold * SCALE)
    alive = [0.0] * top
    alive[0] = 1.0
    fired = 0.0
    for _ in range(answers):
        after = [0.0] * top
        for value, share in enumerate(alive):
            if share:
                if value + up >= top:
                    fired += share * BASELINE
                else:
                    after[value + up] += share * BASELINE
                after[max(0, value + down)] += share * (1 - BASELINE)
        alive = after
    return fired


def windows_with_a_false_alarm(rule: WatchRule) -> float:
    return false_alarm(rule.fast_shift, rule.fast_threshold) + false_alarm(
        rule.slow_shift, rule.slow_threshold
    )


def test_a_provider_at_its_baseline_is_rarely_suspended() -> None:
    assert windows_with_a_false_alarm(RULE) < 1e-4


def test_the_exact_false_alarm_agrees_with_a_monte_carlo_of_observe() -> None:
    """On a touchy rule (thresholds 5 and 6), where about 1 window in 4 fires: counted over
    600 seeded windows of `observe` it must lie within 4 standard errors of the chain's."""
    touchy = WatchRule(fast_threshold=5.0, slow_threshold=6.0)
    exact = windows_with_a_false_alarm(touchy)
    rng = random.Random(3)
    windows = 600
    fired = sum(answers_until_alarm(touchy, BASELINE, rng, 1000) <= 1000 for _ in range(windows))
    error = math.sqrt(exact * (1 - exact) / windows)
    # the sum bounds the union from above: the counted share may only be lower, or close
    assert fired / windows <= exact + 4 * error
    assert fired / windows >= exact * 0.7 - 4 * error


def test_a_rise_of_20_points_is_caught_within_50_answers() -> None:
    median, p90 = detection(RULE, BASELINE + 0.20, runs=400, seed=1)
    assert median <= 50, (median, p90)
    assert p90 <= 100, (median, p90)


def test_a_rise_of_5_points_is_caught_within_400_answers() -> None:
    median, p90 = detection(RULE, BASELINE + 0.05, runs=200, seed=2)
    assert median <= 400, (median, p90)
    assert p90 <= 1000, (median, p90)


def test_rendering_drift_fires_after_a_run_and_not_on_one_odd_answer() -> None:
    """mutant: the run not reset by an answer within tolerance: the odd answers add up."""
    watch = Watch()
    for i in range(200):  # one answer in 20 out of tolerance, never two in a row
        watch = observe(RULE, watch, BASELINE, failed=False, rendering_off=i % 20 == 0)
        assert verdict(RULE, watch) is None
    for _ in range(RULE.rendering_run):
        assert verdict(RULE, watch) is None
        watch = observe(RULE, watch, BASELINE, failed=False, rendering_off=True)
    alarm = verdict(RULE, watch)
    assert alarm is not None and alarm.rule == "rendering"
    assert RULE.rendering_run <= 5


def test_a_rendering_not_compared_neither_breaks_nor_extends_a_run() -> None:
    """mutant: None counted as within tolerance (run reset), or as out of it (run grows)."""
    watch = Watch()
    watch = observe(RULE, watch, BASELINE, failed=False, rendering_off=True)
    watch = observe(RULE, watch, BASELINE, failed=False, rendering_off=None)
    assert watch.rendering_run == 1


def test_a_cusum_is_held_at_zero_and_rises_by_the_log_likelihood_ratio() -> None:
    """mutant: no max(0, ...): a long good run lets later failures go unseen."""
    assert step(0.0, 0.02, 0.20, failed=False) == 0.0
    assert math.isclose(step(0.0, 0.02, 0.20, failed=True), math.log(0.22 / 0.02))
    assert math.isclose(step(5.0, 0.02, 0.20, failed=False), 5.0 + math.log(0.78 / 0.98))


def test_the_alarm_fires_at_its_threshold_and_names_the_figures() -> None:
    """mutant: `>` for `>=`: a statistic exactly at the threshold does not fire."""
    at = Watch(fast=RULE.fast_threshold, answered=40, failed=9, baseline=0.02)
    alarm = verdict(RULE, at)
    assert alarm is not None and alarm.rule == "failure rate"
    assert "live failure rate 22% (9 of 40 answers)" in alarm.reason
    assert "certified baseline of 2%" in alarm.reason
    assert verdict(RULE, Watch(fast=RULE.fast_threshold - 0.01, slow=1.0)) is None
    slow = verdict(RULE, Watch(slow=RULE.slow_threshold, answered=300, failed=21))
    assert slow is not None and "slow CUSUM" in slow.reason


def test_the_baseline_is_what_certification_saw_but_never_below_the_floor() -> None:
    """mutant: no floor: a provider that passed every golden run gets a baseline of 0 (and
    the first failure an infinite log-likelihood ratio)."""
    assert certified_baseline(RULE, runs=15, failures=0) == RULE.baseline_floor
    assert certified_baseline(RULE, runs=10, failures=1) == 0.1
    assert certified_baseline(RULE, runs=0, failures=0) == RULE.baseline_floor


def test_the_state_survives_its_json() -> None:
    watch = Watch(fast=1.5, slow=2.25, rendering_run=2, answered=7, failed=3, baseline=0.04)
    assert Watch.from_json(watch.to_json()) == watch


def test_the_prompt_count_is_expected_from_the_nearest_golden_case() -> None:
    """Two cases 400 characters apart, the provider counting 1 token per 4 characters: a live
    prompt between them is expected at their line, a count 30 tokens short (the system text
    dropped) is off, one a token away is not. mutant: the margin without the moved part: a
    live prompt far from every case is off on its word choice alone."""
    calibration = PromptCalibration.from_points(((400, 110), (400, 110), (800, 210)))
    assert calibration is not None
    assert math.isclose(calibration.tokens_per_char, 0.25)
    expected, margin = calibration.expected(500)
    assert math.isclose(expected, 135.0)
    assert margin == 0.25 * 25 + 1
    assert not calibration.off(500, 136)
    assert calibration.off(500, 105)
    assert not calibration.off(1200, 310 + 20)  # 100 tokens moved: a margin of 26


def test_cases_of_one_length_assume_4_characters_a_token() -> None:
    """mutant: the slope fitted from equal lengths (a division by zero)."""
    calibration = PromptCalibration.from_points(((300, 80), (300, 81)))
    assert calibration is not None
    assert calibration.tokens_per_char == 0.25
    assert calibration.spread == 1.0  # the repeats' own difference
    assert PromptCalibration.from_points(()) is None
