"""The live prompt-count comparison (jobrouter.drift.PromptCalibration): what a live answer's
reported prompt tokens are expected to be, from the certification's golden runs."""

from __future__ import annotations

import math

from jobrouter.drift import PromptCalibration


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
