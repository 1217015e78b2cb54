"""Exact and simulated figures of jobrouter.drift (the simulation test and the bench share them).

Exact: each CUSUM is a Markov chain over its integer statistic (0 .. threshold-1, plus the alarm),
so the probability of an alarm within n answers is computed, not sampled. Simulated: seeded runs
of the real `observe` / `verdict`.
"""

from __future__ import annotations

import math
import random
import statistics
import timeit
from dataclasses import dataclass

from jobrouter.drift import SCALE, Watch, WatchRule, observe, steps, verdict


def alarm_within(p: float, step: tuple[int, int], threshold: float, n: int) -> float:
    """P(one CUSUM with these integer steps reaches `threshold` nats within n answers), failures
    independent with probability p, from a fresh watch."""
    up, down = step
    h = round(threshold * SCALE)
    mass = [0.0] * h
    mass[0] = 1.0
    alarmed, q = 0.0, 1 - p
    for _ in range(n):
        alarmed += p * sum(mass[max(h - up, 0) :])
        passed = [q * sum(mass[: down + 1]), *(q * m for m in mass[down + 1 :])]
        passed += [0.0] * (h - len(passed))
        failed = [0.0] * min(up, h) + [p * m for m in mass[: max(h - up, 0)]]
        mass = [a + b for a, b in zip(passed, failed, strict=True)]
    return alarmed


def false_alarm_bound(rule: WatchRule, p0: float, n: int = 1000) -> tuple[float, float]:
    """(large, small): each CUSUM's exact false-alarm probability over n answers at p0; their
    sum bounds the rule's (union bound)."""
    base = max(p0, rule.baseline_floor)
    large = alarm_within(p0, steps(base, rule.large_rise), rule.large_threshold, n)
    small = alarm_within(p0, steps(base, rule.small_rise), rule.small_threshold, n)
    return large, small


def best_power(n: int, p0: float, p1: float, alpha: float) -> float:
    """Neyman-Pearson: the highest P(alarm within n | p1) ANY rule can have whose alarm within
    those n answers has probability <= alpha at p0 (a randomized count test)."""

    def tail(p: float, c: int) -> float:
        return sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(c, n + 1))

    c = next(c for c in range(n + 2) if tail(p0, c) <= alpha)
    at = math.comb(n, c - 1) * p0 ** (c - 1) * (1 - p0) ** (n - c + 1)
    share = (alpha - tail(p0, c)) / at  # randomize on a count of c - 1
    return tail(p1, c) + share * math.comb(n, c - 1) * p1 ** (c - 1) * (1 - p1) ** (n - c + 1)


@dataclass(frozen=True)
class Delays:
    runs: int
    median: float
    p99: float
    within: float  # share of runs caught within the bound
    never: int  # runs not caught within the cap


def delays(rule: WatchRule, p0: float, p: float, bound: int, runs: int, seed: int) -> Delays:
    """Answers until the rule fires, rate p from the first answer on (a fresh watch)."""
    rng = random.Random(seed)
    cap = 4 * bound
    found: list[int] = []
    for _ in range(runs):
        watch = Watch()
        for answered in range(1, cap + 1):
            watch = observe(rule, watch, p0, failed=rng.random() < p, rendering_off=None)
            if verdict(rule, watch) is not None:
                found.append(answered)
                break
        else:
            found.append(cap + 1)
    cuts = statistics.quantiles(found, n=100, method="inclusive")
    return Delays(
        runs,
        statistics.median(found),
        cuts[98],
        sum(d <= bound for d in found) / runs,
        sum(d > cap for d in found),
    )


def windows_alarmed(rule: WatchRule, p0: float, windows: int, n: int, seed: int) -> int:
    """Monte Carlo: windows of n answers at p0 in which the rule fired."""
    rng = random.Random(seed)
    fired = 0
    for _ in range(windows):
        watch = Watch()
        for _ in range(n):
            watch = observe(rule, watch, p0, failed=rng.random() < p0, rendering_off=None)
        fired += verdict(rule, watch) is not None
    return fired


def rendering_false_alarm(odd: float, run: int, n: int) -> float:
    """Exact P(a run of `run` odd answers somewhere in n), each odd with probability `odd`."""
    mass = [1.0] + [0.0] * (run - 1)
    alarmed = 0.0
    for _ in range(n):
        alarmed += odd * mass[-1]
        mass = [(1 - odd) * sum(mass), *(odd * m for m in mass[:-1])]
    return alarmed


def observe_cost(number: int = 100_000) -> float:
    """Seconds of CPU per observe + verdict (process time, best of 5)."""
    rule, watch = WatchRule(), Watch()

    def one() -> None:
        verdict(rule, observe(rule, watch, 0.02, failed=False, rendering_off=False))

    timer = timeit.Timer(one, timer=__import__("time").process_time)
    return min(timer.repeat(5, number)) / number
