"""Low-temperature agreement: do repeated runs of one case give the same answer?

Each usable output is reduced to its *key*: the canonical JSON of the tuple of values at the
`agree_on` paths (the whole output when `agree_on` is empty). The share is the count of the
most common key divided by the number of runs attempted, so a run that errored or produced an
unusable output counts against agreement. The case passes when the share, in whole percent,
reaches `min_agreement` in whole percent: 2 of 3 runs (66.7 %, rounded to 67) pass at 0.67.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from jobrouter.contracts.fingerprint import canonical_json
from jobrouter.contracts.paths import MISSING, resolve


class Agreement(BaseModel):
    """How many of `runs` agreed on the most common `value` (canonical JSON of the key)."""

    model_config = ConfigDict(frozen=True)

    runs: int
    agreeing: int
    share: float
    value: str | None
    passed: bool


def agreement_key(output: Any, agree_on: Sequence[str]) -> str:
    """Canonical JSON of the values at `agree_on` (a missing path is its own distinct value)."""
    paths = agree_on or ("$",)
    values = [resolve(output, path) for path in paths]
    return canonical_json([{"missing": True} if v is MISSING else {"value": v} for v in values])


def meets(share: float, min_agreement: float) -> bool:
    """`share` >= `min_agreement`, both taken in whole percent."""
    return round(share * 100) >= round(min_agreement * 100)


def measure_agreement(
    outputs: Sequence[Any],
    agree_on: Sequence[str],
    min_agreement: float,
    *,
    runs: int | None = None,
) -> Agreement:
    """Agreement of `outputs` (the usable ones) out of `runs` attempted (default: len(outputs))."""
    total = len(outputs) if runs is None else runs
    if total < len(outputs):
        raise ValueError(f"runs={total} is less than the {len(outputs)} outputs given")
    counts = Counter(agreement_key(output, agree_on) for output in outputs)
    if not counts or total == 0:
        return Agreement(runs=total, agreeing=0, share=0.0, value=None, passed=False)
    value, agreeing = counts.most_common(1)[0]
    share = agreeing / total
    return Agreement(
        runs=total,
        agreeing=agreeing,
        share=share,
        value=value,
        passed=meets(share, min_agreement),
    )
