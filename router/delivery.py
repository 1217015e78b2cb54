"""What one try of an outbox event leads to, for both deliverers: delivered, tried again after a
backoff, or a dead letter. `decide_delivery` is a pure function of the try's outcome, the tries
so far, the policy (`DeliverySettings`, from `[outbox]`), the receiver's Retry-After and the
clock; `router/outbox.py` (the database poller) writes its decision into the row,
`router/bus_nats.py` (the NATS consumer) acks, naks or terms the message by it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from jobrouter.config import RouterConfig
from jobrouter.providers.backoff import Backoff, Jitter, full_jitter
from jobrouter.store.outbox import OutboxEvent
from jobrouter.webhook import Outcome


@dataclass(frozen=True)
class DeliverySettings:
    max_tries: int = 8
    backoff_initial_s: float = 30.0
    backoff_max_s: float = 3600.0
    timeout_s: float = 10.0
    claim_s: float = 60.0
    poll_s: float = 1.0
    batch: int = 16
    max_response_bytes: int = 4096

    @classmethod
    def from_config(cls, config: RouterConfig) -> DeliverySettings:
        o = config.outbox
        return cls(
            max_tries=o.max_tries,
            backoff_initial_s=o.backoff_initial,
            backoff_max_s=o.backoff_max,
            timeout_s=o.timeout,
            claim_s=o.claim,
            poll_s=o.poll_interval,
            batch=o.batch,
            max_response_bytes=o.max_response_bytes,
        )

    @property
    def backoff(self) -> Backoff:
        """The wait before the next try: full jitter over a doubling bound, or the receiver's
        Retry-After when that is longer, both capped at `backoff_max_s`."""
        return Backoff(
            initial=self.backoff_initial_s,
            cap=self.backoff_max_s,
            retry_after_cap=self.backoff_max_s,
        )


class Verdict(StrEnum):
    """What became of a try; the values are the deliveries metric's `outcome` label."""

    DELIVERED = "delivered"
    RETRY = "retry"
    DEAD = "dead"


@dataclass(frozen=True)
class DeliveryDecision:
    verdict: Verdict
    tries: int  # the tries made, the one decided on included
    delay_s: float = 0.0  # RETRY: seconds until the next try
    due_at: float = 0.0  # RETRY: when the next try is due (the clock's `now` plus `delay_s`)


def decide_delivery(
    outcome: Outcome,
    tries: int,
    settings: DeliverySettings,
    *,
    now: float,
    jitter: Jitter = full_jitter,
) -> DeliveryDecision:
    """The decision after a try: `tries` counts the tries made, this one included; a retry's
    `due_at` counts from `now` (the wall clock: a row's `next_attempt_at` is on it)."""
    if outcome.delivered:
        return DeliveryDecision(Verdict.DELIVERED, tries)
    if tries >= settings.max_tries:
        return DeliveryDecision(Verdict.DEAD, tries)
    delay = settings.backoff.wait_s(tries, outcome.retry_after_s, jitter)
    return DeliveryDecision(Verdict.RETRY, tries, delay_s=delay, due_at=now + delay)


def log_retry(
    log: logging.Logger, event: OutboxEvent, decision: DeliveryDecision, max_tries: int, error: str
) -> None:
    """The line of a failed try that will be tried again (each deliverer logs to its own logger)."""
    log.warning(
        "outbox event %s to owner %s failed (try %d of %d), again in %.1fs: %s",
        event.id,
        event.owner,
        decision.tries,
        max_tries,
        decision.delay_s,
        error,
    )


def log_dead(log: logging.Logger, event: OutboxEvent, tries: int, error: str) -> None:
    """The line of an event that became a dead letter."""
    log.error(
        "outbox event %s (job %s, owner %s) failed %d times and is a dead letter: %s",
        event.id,
        event.job_id,
        event.owner,
        tries,
        error,
    )
