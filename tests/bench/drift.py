"""The figures of the sequential rule (jobrouter.drift) that docs/certification.md states:

    python -m tests.bench.drift [--runs 2000]

Prints a markdown table: each target, the exact probability where it is computed (a Markov chain
over the integer statistic, tests/support/drift_sim.py) or the seeded runs' median, 99th
percentile and share caught within the bound, the best any rule could do at this false-alarm
rate (Neyman-Pearson), and the CPU time of one observe + verdict (process time, best of 5).
"""

from __future__ import annotations

import argparse
import os

from jobrouter.drift import WatchRule
from tests.support import drift_sim

BASE = 0.02


def rows(runs: int) -> list[str]:
    rule = WatchRule()
    out = ["| target | measured | best any rule can do |", "|---|---|---|"]
    for rise, bound, seed in ((0.20, 50, 20), (0.05, 400, 5)):
        d = drift_sim.delays(rule, BASE, BASE + rise, bound, runs, seed)
        best = drift_sim.best_power(bound, BASE, BASE + rise, 1e-4)
        out.append(
            f"| 2% -> {(BASE + rise):.0%}: caught within {bound} | median {d.median:.0f},"
            f" p99 {d.p99:.0f}, {d.within:.1%} of {runs} runs within {bound} |"
            f" {best:.1%} within {bound} |"
        )
    for p0 in (0.02, 0.05, 0.10):
        large, small = drift_sim.false_alarm_bound(rule, p0, 1000)
        out.append(
            f"| false alarm in a window of 1,000 at {p0:.0%} (exact) |"
            f" <= {large + small:.1e} (large {large:.1e} + small {small:.1e}) | |"
        )
    rend = drift_sim.rendering_false_alarm(0.05, rule.rendering_run, 10_000)
    out.append(f"| rendering, every answer off: suspended at answer | {rule.rendering_run} | |")
    out.append(f"| rendering, 5% odd answers: suspended within 10,000 (exact) | {rend:.2%} | |")
    cost = drift_sim.observe_cost()
    out.append(f"| CPU per observe + verdict | {cost * 1e6:.1f} us | |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("\n".join(rows(args.runs)))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
