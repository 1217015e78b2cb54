"""When the store reads the settled jobs of its open waits (router/store/waits.py `Cadence`):
pure arithmetic on the open waits and what earlier reads found, no clock read here."""

from __future__ import annotations

from jobrouter.store.waits import BATCH, MAX_S, MIN_S, NEAR_S, Cadence, Wait


def waits(*items: Wait) -> dict[int, Wait]:
    return {id(w): w for w in items}


def test_waits_on_jobs_driven_here_are_read_only_as_a_safety_net() -> None:
    assert Cadence().due(waits(Wait("a", near=True, opened=0.0)), last=10.0) == 10.0 + NEAR_S


def test_a_fresh_wait_is_first_read_at_the_age_waits_usually_settle() -> None:
    cadence = Cadence(expect=0.08)
    assert cadence.due(waits(Wait("a", opened=100.0)), last=99.0) == 100.08


def test_first_reads_learn_the_age_mostly_hitting() -> None:
    cadence = Cadence(expect=0.1)
    hit, miss = Wait("a", reads=1), Wait("b", reads=1)
    cadence.learn([miss], set(), since=0.1)
    assert cadence.expect == 0.1 * 1.25
    cadence.learn([hit], {"a"}, since=0.1)
    assert cadence.expect == 0.1 * 1.25 * 0.9
    later = Wait("c", reads=2)  # not a first read: the age is not learnt from it
    cadence.learn([later], set(), since=0.1)
    assert cadence.expect == 0.1 * 1.25 * 0.9


def test_one_read_of_many_fresh_waits_moves_the_age_one_step() -> None:
    """A read of 64 first reads, 50 of them misses, lengthens `expect` once (by a quarter),
    not 50 times: stepping per wait sent it to MAX_EXPECT_S in one read, and waits opened
    next, all fresh, were not read for 5 s (every waiter of a c=64 PostgreSQL run stalled)."""
    cadence = Cadence(expect=0.1)
    fresh = [Wait(str(i), reads=1) for i in range(64)]
    cadence.learn(fresh, {str(i) for i in range(14)}, since=0.1)
    assert cadence.expect == 0.1 * 1.25
    cadence.learn(fresh, {str(i) for i in range(43)}, since=0.1)  # 43 of 64: two in three
    assert cadence.expect == 0.1 * 1.25 * 0.9


def test_a_wait_that_missed_is_read_again_no_sooner_than_a_quarter_of_the_age() -> None:
    cadence = Cadence(expect=0.2, interval=MIN_S)
    assert cadence.due(waits(Wait("a", opened=0.0, reads=1)), last=5.0) == 5.0 + 0.05


def test_a_long_usual_age_still_reads_again_within_max_s() -> None:
    cadence = Cadence(expect=4.0, interval=MIN_S)
    assert cadence.due(waits(Wait("a", opened=0.0, reads=1)), last=5.0) == 5.0 + MAX_S


def test_with_many_waits_open_reads_are_spaced_to_find_a_batch_each() -> None:
    cadence = Cadence(expect=0.8, rate=40.0)  # 40 settles a second; waits usually take 0.8 s
    many = waits(*(Wait(str(i), opened=0.0, reads=1) for i in range(BATCH + 60)))
    assert cadence.due(many, last=1.0) == 1.0 + BATCH / 40.0
    slow = Cadence(expect=0.01, rate=1.0)
    assert slow.due(many, last=1.0) == 1.0 + MAX_S  # never further apart than MAX_S


def test_reads_that_find_nothing_drift_apart_and_one_that_finds_resets() -> None:
    cadence = Cadence(interval=MIN_S)
    for _ in range(20):
        cadence.learn([], set(), since=0.1)
    assert cadence.interval == MAX_S
    cadence.learn([], {"x"}, since=0.1)
    assert cadence.interval == MIN_S
