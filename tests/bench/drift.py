"""The sequential rule's figures (docs/certification.md): `python -m tests.bench.drift`.

Detection: answers until the rule fires, over seeded runs of `jobrouter.drift.observe` from a
2% baseline; false alarms: the exact probability that a provider at its baseline is suspended
within a window of 1,000 answers (tests/unit/test_drift.py's Markov chain); the CPU time of
one `observe` + `verdict`."""

from __future__ import annotations

import argparse
import timeit

from jobrouter.drift import Watch, WatchRule, observe, verdict
from tests.unit.test_drift import BASELINE, detection, windows_with_a_false_alarm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2000, help="seeded runs per rise")
    runs = parser.parse_args().runs
    rule = WatchRule()
    print("| live failure rate | answers to suspension: median | 90th percentile | target |")
    print("|---|---|---|---|")
    for rise, target in ((0.20, "within 50"), (0.05, "within 400")):
        median, p90 = detection(rule, BASELINE + rise, runs=runs, seed=1)
        print(f"| {BASELINE:.0%} + {rise * 100:.0f} points | {median} | {p90} | {target} |")
    rate = windows_with_a_false_alarm(rule)
    print(
        f"| {BASELINE:.0%} (the baseline) | windows of 1,000 answers with a false suspension: "
        f"{rate:.1e} (1 in {1 / rate:,.0f}) | | fewer than 1 in 10,000 |"
    )
    watch = Watch()
    seconds = timeit.timeit(
        lambda: verdict(rule, observe(rule, watch, BASELINE, failed=False, rendering_off=None)),
        number=100_000,
    )
    print(f"\none observe + verdict: {seconds / 100_000 * 1e6:.1f} µs of CPU")


if __name__ == "__main__":
    main()
