"""Each branch of jobrouter.drift (the sequential rule of issue 27), one decision per test."""

from __future__ import annotations

import pytest

from jobrouter.drift import SCALE, Watch, WatchRule, certified_baseline, observe, steps, verdict

RULE = WatchRule()


def feed(watch: Watch, outcomes: str, baseline: float = 0.02) -> Watch:
    """'F' failed, '.' passed; rendering unchecked."""
    for c in outcomes:
        watch = observe(RULE, watch, baseline, failed=c == "F", rendering_off=None)
    return watch


def test_a_pass_at_zero_stays_at_zero_not_below() -> None:
    watch = feed(Watch(), "." * 10)
    assert (watch.large, watch.small, watch.answered, watch.failed) == (0, 0, 10, 0)


def test_a_failure_then_passes_walks_down_by_the_designed_steps() -> None:
    up, down = steps(0.02, RULE.large_rise)
    watch = feed(Watch(), "F..")
    assert watch.large == up - 2 * down
    assert watch.failed == 1


def test_the_threshold_fires_at_equality_and_not_one_unit_below() -> None:
    at = round(RULE.large_threshold * SCALE)
    assert verdict(RULE, Watch(answered=9, failed=6, large=at - 1, baseline=0.02)) is None
    alarm = verdict(RULE, Watch(answered=9, failed=6, large=at, baseline=0.02))
    assert alarm is not None and alarm.rule == "failure rate"
    assert alarm.threshold == RULE.large_threshold and (alarm.answered, alarm.failed) == (9, 6)
    assert "67% over 9 answers" in alarm.reason and "baseline of 2%" in alarm.reason
    small = verdict(RULE, Watch(small=round(RULE.small_threshold * SCALE), baseline=0.02))
    assert small is not None and "small-rise" in small.reason


def test_the_baseline_floor_holds_under_a_perfect_certification() -> None:
    assert certified_baseline(RULE, 15, 0) == RULE.baseline_floor
    assert certified_baseline(RULE, 0, 0) == RULE.baseline_floor
    assert certified_baseline(RULE, 20, 2) == pytest.approx(0.10)
    # observe weighs a baseline under the floor as the floor (a failure counts less)
    assert feed(Watch(), "F", baseline=0.001) == feed(Watch(), "F", baseline=0.02)


def test_rendering_fires_on_the_run_and_a_fine_answer_breaks_it() -> None:
    watch = Watch()
    for _ in range(RULE.rendering_run - 1):
        watch = observe(RULE, watch, 0.02, failed=False, rendering_off=True)
    assert verdict(RULE, watch) is None
    broken = observe(RULE, watch, 0.02, failed=False, rendering_off=False)
    assert broken.rendering_run == 0 and broken.rendering_off == RULE.rendering_run - 1
    fired = observe(RULE, watch, 0.02, failed=False, rendering_off=True)
    alarm = verdict(RULE, fired)
    assert alarm is not None and alarm.rule == "rendering"
    assert alarm.statistic == RULE.rendering_run


def test_an_unchecked_rendering_counts_neither_way() -> None:
    watch = observe(RULE, Watch(), 0.02, failed=False, rendering_off=True)
    after = observe(RULE, watch, 0.02, failed=False, rendering_off=None)
    assert (after.rendering_run, after.rendering_off) == (1, 1)


def test_a_fired_watch_is_latched() -> None:
    fired = Watch(answered=5, failed=5, large=round(RULE.large_threshold * SCALE), baseline=0.02)
    after = feed(fired, "." * 50)
    assert after.large == fired.large and verdict(RULE, after) is not None
    assert (after.answered, after.failed) == (55, 5)


def test_json_round_trip_and_a_corrupt_field_is_refused() -> None:
    watch = feed(Watch(), "F.F")
    assert Watch.from_json(watch.to_json()) == watch
    assert Watch.from_json({}) == Watch()
    with pytest.raises(ValueError, match="large"):
        Watch.from_json({**watch.to_json(), "large": 1.5})
    with pytest.raises(ValueError, match="baseline"):
        Watch.from_json({**watch.to_json(), "baseline": True})


def test_the_config_sets_the_rule_and_its_defaults_are_the_rules() -> None:
    """`[certification.watch]` keys map onto WatchRule one to one; the defaults agree (the
    figures of docs/certification.md are the defaults')."""
    from jobrouter.config import WatchConfig
    from jobrouter.watch import watch_rule

    assert watch_rule(WatchConfig()) == WatchRule()
    tuned = watch_rule(WatchConfig(large_threshold=10.0, rendering_run=7, baseline_floor=0.05))
    assert (tuned.large_threshold, tuned.rendering_run, tuned.baseline_floor) == (10.0, 7, 0.05)
