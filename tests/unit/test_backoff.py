"""The one backoff module (providers/backoff.py): the formula's bounds, the Retry-After parser's
rules, and the one test switch.

Before it, three Retry-After parsers disagreed (issue 26, bullet 7); the table below is what
each answered, and what the one parser answers now:

| value                  | classify (providers) | outbox (webhooks) | client   | now     |
|------------------------|----------------------|-------------------|----------|---------|
| "120"                  | 120.0                | 120.0             | 120.0    | 120.0   |
| "-3"                   | 0.0                  | None              | 0.0      | 0.0     |
| HTTP date 30 s ahead   | 30.0                 | None              | None     | 30.0    |
| HTTP date in the past  | 0.0                  | None              | None     | 0.0     |
| "inf", "1e400"         | inf                  | inf               | inf      | a year  |
| "nan"                  | 0.0                  | None              | 0.0      | None    |
| "soon", ""             | None                 | None              | None     | None    |
| date "-0000" (no zone) | local time           | None              | None     | UTC     |

(and the client's `OverBudget.retry_after` was a bare `float()`: "soon" raised ValueError.)
"""

from __future__ import annotations

import email.utils
import math
import os
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrouter.providers import backoff
from jobrouter.providers.backoff import (
    RETRY_AFTER_CEILING_S,
    Backoff,
    parse_retry_after,
    parse_retry_after_ms,
)

NOW = 1_800_000_000.0  # a fixed wall clock for the HTTP-date cases


def at(offset_s: float) -> str:
    return email.utils.formatdate(NOW + offset_s, usegmt=True)


@pytest.fixture(autouse=True)
def _backoff_on() -> Iterator[None]:
    backoff.set_testing(no_backoff=False)
    yield
    backoff.set_testing(no_backoff=False)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        ("0", 0.0),
        ("1.5", 1.5),
        (" 7 ", 7.0),
        ("-3", 0.0),  # a negative delta: due now, as a past date is
        (at(30), 30.0),
        (at(-30), 0.0),
        ("inf", RETRY_AFTER_CEILING_S),
        ("1e400", RETRY_AFTER_CEILING_S),
        ("100000", 100_000.0),
        ("40000000", RETRY_AFTER_CEILING_S),
        (at(10 * RETRY_AFTER_CEILING_S), RETRY_AFTER_CEILING_S),
        ("nan", None),
        ("soon", None),
        ("", None),
        ("   ", None),
        (None, None),
        ("Mon, 99 Oct 2026 07:28:00 GMT", None),
        ("Wed, 21 Oct 99999 07:28:00 GMT", None),
    ],
)
def test_retry_after_rules(value: str | None, seconds: float | None) -> None:
    """Mutants killed (each applied by hand, seen failing): the negative clamp dropped (`-3` is
    -3.0), the ceiling dropped (`inf` is inf), NaN let through, the date form not tried."""
    assert parse_retry_after(value, now=NOW) == pytest.approx(seconds)


def test_a_date_without_zone_is_utc_not_local_time() -> None:
    """Mutant: the `tzinfo is None` branch dropped (read as local time: off by the machine's
    UTC offset, which is zero here, so the test sets a zone that is not)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"  # UTC+05:30
    time.tzset()
    try:
        value = at(60).replace("GMT", "-0000")
        assert parse_retry_after(value, now=NOW) == pytest.approx(60.0)
    finally:
        if before is None:
            os.environ.pop("TZ")
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_retry_after_ms() -> None:
    assert parse_retry_after_ms("250") == 0.25
    assert parse_retry_after_ms("-5") == 0.0
    assert parse_retry_after_ms("later") is None
    assert parse_retry_after_ms(None) is None
    assert parse_retry_after_ms("1e12") == RETRY_AFTER_CEILING_S


@given(st.text())
def test_any_text_is_no_hint_or_a_bounded_wait(value: str) -> None:
    """Never raises; always None or a finite wait in [0, a year]."""
    seconds = parse_retry_after(value, now=NOW)
    assert seconds is None or 0.0 <= seconds <= RETRY_AFTER_CEILING_S


@given(st.integers(min_value=0, max_value=int(RETRY_AFTER_CEILING_S)))
def test_delta_seconds_are_read_exactly(seconds: int) -> None:
    assert parse_retry_after(str(seconds), now=NOW) == float(seconds)


@given(st.integers(min_value=-10 * 86_400, max_value=400 * 86_400))
def test_http_dates_are_the_seconds_until_them(offset: int) -> None:
    expected = min(max(float(offset), 0.0), RETRY_AFTER_CEILING_S)
    assert parse_retry_after(at(offset), now=NOW) == pytest.approx(expected)


# ---- the formula ---------------------------------------------------------------------------------

policies = st.builds(
    Backoff,
    initial=st.floats(min_value=0.0, max_value=1e6),
    cap=st.floats(min_value=0.0, max_value=1e6),
    retry_after_cap=st.none() | st.floats(min_value=0.0, max_value=1e6),
)


@given(policies, st.integers(min_value=-5, max_value=10**6))
def test_every_wait_is_within_the_capped_exponential_bound(policy: Backoff, failures: int) -> None:
    """0 <= wait <= min(cap, initial * 2**(failures-1)), for any count of failures: thousands
    too (mutant: the exponent unbounded, OverflowError)."""
    bound = policy.bound(failures)
    exponential = policy.initial * 2.0 ** min(max(failures - 1, 0), 1000)  # inf past 1e308
    assert 0.0 <= bound <= policy.cap and (bound <= exponential or math.isinf(exponential))
    assert 0.0 <= policy.wait_s(failures) <= bound


@given(policies, st.integers(min_value=1, max_value=2000))
def test_the_bound_grows_until_the_cap(policy: Backoff, failures: int) -> None:
    assert policy.bound(failures) <= policy.bound(failures + 1)


def test_the_bound_doubles_from_initial_up_to_the_cap() -> None:
    """Mutants: `2 ** failures` for `2 ** (failures - 1)`, the cap dropped (both seen failing)."""
    policy = Backoff(initial=1.0, cap=10.0, retry_after_cap=10.0)
    assert [policy.bound(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert policy.bound(0) == 1.0


def test_full_jitter_spreads_from_zero_to_the_bound() -> None:
    """Mutant: `uniform(bound / 2, bound)` (equal jitter) fails the low end."""
    policy = Backoff(initial=0.5, cap=4.0, retry_after_cap=4.0)
    waits = [policy.wait_s(3) for _ in range(300)]
    assert all(0.0 <= w <= 2.0 for w in waits)
    assert min(waits) < 0.2 and max(waits) > 1.8 and len(set(waits)) > 200


def test_retry_after_stretches_the_wait_up_to_its_cap() -> None:
    """Mutants: `min` for `max` (a shorter Retry-After shortens the wait), the cap ignored."""
    capped = Backoff(initial=1.0, cap=8.0, retry_after_cap=8.0)
    assert capped.wait_s(1, retry_after=5.0, jitter=lambda b: b) == 5.0
    assert capped.wait_s(3, retry_after=0.5, jitter=lambda b: b) == 4.0
    assert capped.wait_s(1, retry_after=600.0, jitter=lambda b: b) == 8.0
    honoured = Backoff(initial=1.0, cap=8.0, retry_after_cap=None)
    assert honoured.wait_s(1, retry_after=600.0, jitter=lambda b: b) == 600.0


def test_set_testing_zeroes_every_wait_and_back() -> None:
    """Mutant: `wait_s` not reading the switch (seen failing)."""
    policy = Backoff(initial=1.0, cap=8.0, retry_after_cap=None)
    backoff.set_testing()
    assert policy.wait_s(3, retry_after=60.0, jitter=lambda b: b) == 0.0
    assert backoff.effective_wait(5.0) == 0.0
    backoff.set_testing(no_backoff=False)
    assert policy.wait_s(3, jitter=lambda b: b) == 4.0
    assert backoff.effective_wait(5.0) == 5.0
