"""Certification that keeps watching (issue 27): every answered attempt is evidence, and a
certified provider whose live answers drift from what certification saw loses the contract's
traffic until it is certified again (or an operator reinstates it, on the record).

    attempt ends (answered) ──the same UPDATE──> its verdict on the attempt's row
                                                                    (router/attempt_call.py)
    leader, every [certification.watch] interval:
        oldest verdicts ─> each pair's sequential rule (jobrouter.drift) against its certified
        baseline ─> live_watch (counts, state, suspension), the verdicts marked folded, at once
    gate, every refresh, every process: a suspended pair is not eligible (router/gate.py)

Only a verdict the router computes anyway counts (JSON, schema, the contract's checks): no
extra provider call. A pair without a passed certification is counted but never suspended
(the gate refuses it already). A job in flight is not touched: the gate decides only new
attempts, under the policy's rules (an exclusive job's attempt that may have acted is never
followed by a second one, suspended provider or not).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from jobrouter.config import WatchConfig
from jobrouter.drift import (
    PromptCalibration,
    Watch,
    WatchRule,
    certified_baseline,
    observe,
    verdict,
)
from jobrouter.errors import ReinstateRefused
from jobrouter.metrics import LIVE_VERDICTS
from jobrouter.store.certifications import CertificationStore
from jobrouter.store.live_watch import (
    RECENT_FAILURES,
    LiveVerdict,
    StoredVerdict,
    Suspension,
    Watches,
    WatchRow,
)

if TYPE_CHECKING:
    from jobrouter.contracts import Certification

log = logging.getLogger("jobrouter.watch")


@dataclass(frozen=True)
class Certified:
    """What a pair's passed certification says the live answers are compared with."""

    baseline: float
    calibration: PromptCalibration | None  # None: no counts to compare the live ones with


@dataclass(frozen=True)
class Fold:
    """One fold's outcome: verdicts counted, and the pairs it suspended."""

    counted: int
    suspended: tuple[WatchRow, ...] = ()


def watch_rule(config: WatchConfig) -> WatchRule:
    """The sequential rule as `[certification.watch]` sets it (docs/certification.md has
    the figures measured for the defaults)."""
    return WatchRule(
        baseline_floor=config.baseline_floor,
        large_rise=config.large_rise,
        large_threshold=config.large_threshold,
        small_rise=config.small_rise,
        small_threshold=config.small_threshold,
        rendering_run=config.rendering_run,
    )


async def fold_backlog(
    store: CertificationStore,
    config: WatchConfig,
    suspended: Callable[[], None],
    notify: Sequence[str] = (),
) -> int:
    """Fold until fewer than a batch are left (a leader that was away catches up at once);
    `suspended()` after a fold that suspended a pair."""
    rule, total = watch_rule(config), 0
    while True:
        folded = await fold_verdicts(store, rule, config.batch, notify)
        if folded.suspended:
            suspended()
        total += folded.counted
        if folded.counted < config.batch:
            return total


async def fold_verdicts(
    store: CertificationStore, rule: WatchRule, batch: int, notify: Sequence[str] = ()
) -> Fold:
    """Count the oldest `batch` verdicts into their pairs' watches, in one transaction with
    their deletion (and, for a pair suspended, the event to each owner of `notify`); nothing
    counted when another fold took them first."""
    pending = await store.live.pending(batch)
    if not pending:
        return Fold(0)
    certified = await certified_pairs(store, rule)
    fired: list[WatchRow] = []

    def decide(watches: Watches) -> Iterable[WatchRow]:
        fired.clear()  # a transaction tried again decides again
        changed: Watches = {}
        now = time.time()
        for stored in pending:
            key = (stored.verdict.provider, stored.verdict.contract)
            row = changed.get(key) or watches.get(key) or WatchRow(*key)
            row, suspended = counted(rule, row, certified.get(key), stored, now)
            changed[key] = row
            if suspended:
                fired.append(row)
        return changed.values()

    if not await store.live.fold(pending, decide, notify):
        return Fold(0)
    for stored in pending:
        seen = stored.verdict
        verdict_label = "fail" if seen.failed else "pass"
        LIVE_VERDICTS.labels(seen.provider, seen.contract, verdict_label).inc()
    for row in fired:
        assert row.suspension is not None
        log.warning(
            "provider %s suspended for contract %s by its live answers: %s (sample attempts: "
            "%s); certify it again once fixed",
            row.provider,
            row.contract,
            row.suspension.reason,
            ", ".join(row.suspension.sample_attempts) or "none",
        )
    return Fold(len(pending), tuple(fired))


def counted(
    rule: WatchRule, row: WatchRow, certified: Certified | None, stored: StoredVerdict, now: float
) -> tuple[WatchRow, bool]:
    """`row` with one more verdict, and whether that suspended the pair (`certified` None:
    the pair holds no passed certification, so it is counted and never suspended)."""
    seen = stored.verdict
    if seen.probe:
        return probed(row, certified, seen, now)
    seen = replace(seen, rendering_off=rendering_off(seen, certified))
    recent = row.recent_failures
    if seen.failed:
        recent = (*recent, (seen.attempt_id, seen.failure or ""))[-RECENT_FAILURES:]
    row = replace(
        row,
        answered=row.answered + 1,
        failed=row.failed + int(seen.failed),
        rendering_checked=row.rendering_checked + int(seen.rendering_off is not None),
        rendering_off=row.rendering_off + int(bool(seen.rendering_off)),
        recent_failures=recent,
    )
    if certified is None or row.suspension is not None:
        return row, False
    state = Watch.from_json(json.loads(row.state)) if row.state else Watch()
    state = observe(
        rule, state, certified.baseline, failed=seen.failed, rendering_off=seen.rendering_off
    )
    row = replace(row, state=json.dumps(state.to_json(), separators=(",", ":")))
    alarm = verdict(rule, state)
    if alarm is None:
        return row, False
    suspension = Suspension(
        at=now,
        rule=alarm.rule,
        reason=alarm.reason,
        answered=row.answered,
        failed=row.failed,
        sample_attempts=tuple(attempt for attempt, _ in recent),
    )
    return replace(row, suspension=suspension), True


def rendering_off(seen: LiveVerdict, certified: Certified | None) -> bool | None:
    """Whether the answer's prompt count is out of what certification saw (None: not
    compared, for want of a count on either side)."""
    if seen.rendering_off is not None:
        return seen.rendering_off
    if certified is None or certified.calibration is None:
        return None
    if seen.prompt_tokens is None or seen.prompt_chars is None:
        return None
    return certified.calibration.off(seen.prompt_chars, seen.prompt_tokens)


def probed(
    row: WatchRow, certified: Certified | None, seen: LiveVerdict, now: float
) -> tuple[WatchRow, bool]:
    """A golden probe (router/probes.py): a wrong answer to a case certification passed
    suspends at once, since a valid JSON with a wrong value passes every live check. Probes
    are not live traffic: they are not counted as answers."""
    if not seen.failed or certified is None or row.suspension is not None:
        return row, False
    suspension = Suspension(
        at=now,
        rule="golden probe",
        reason=f"a golden case answered wrong: {seen.failure}",
        answered=row.answered,
        failed=row.failed,
        sample_attempts=(seen.attempt_id,),
    )
    return replace(row, suspension=suspension), True


async def certified_pairs(
    store: CertificationStore, rule: WatchRule
) -> dict[tuple[str, str], Certified]:
    """Each passed certification's failure rate over its golden runs (floored by the rule)
    and the prompt counts its provider reported."""
    from jobrouter.contracts import Certification

    pairs = {}
    for row in await store.list_certifications():
        cert = Certification.parse_stored(row.record)
        if cert is not None and cert.passed:
            runs, failures = golden_runs(cert)
            pairs[(row.provider, row.contract)] = Certified(
                certified_baseline(rule, runs, failures), calibration(cert)
            )
    return pairs


def calibration(cert: Certification) -> PromptCalibration | None:
    """(characters sent, tokens reported) of every golden run that reported its usage."""
    points = []
    for case in cert.cases:
        chars = sum(len(message.content) for message in case.rendering.messages)
        if chars:
            points += [(chars, n) for n in case.rendering.reported_prompt_tokens if n is not None]
    return PromptCalibration.from_points(tuple(points))


def golden_runs(cert: Certification) -> tuple[int, int]:
    """(runs, runs with a failure) over a certification's cases."""
    runs = sum(case.runs for case in cert.cases)
    failed = sum(len({f.run for f in case.failures}) for case in cert.cases)
    return runs, min(failed, runs)


async def reinstate(
    store: CertificationStore,
    routed: Iterable[tuple[str, str]],
    *,
    provider: str,
    contract: str,
    reason: str,
    by: str,
) -> None:
    """An operator brings a suspended pair back without a new certification: `reason` (what
    was checked) and `by` are kept on the pair's watch, which starts again from zero."""
    if not reason.strip():
        raise ReinstateRefused(
            field="reason", reason="say what you checked (it is kept with the reinstatement)"
        )
    pairs = set(routed)
    if (provider, contract) not in pairs:
        known = ", ".join(f"{p} x {c}" for p, c in sorted(pairs)) or "none"
        raise ReinstateRefused(
            field="provider",
            reason=f"{provider} x {contract} is not routed; the config routes: {known}",
        )
    if not await store.reinstate(provider=provider, contract=contract, by=by, reason=reason):
        raise ReinstateRefused(
            field="provider", reason=f"{provider} is not suspended for contract {contract!r}"
        )
    log.warning("provider %s reinstated for contract %s by %s: %s", provider, contract, by, reason)
