"""Prometheus metrics of the router, on one module-level registry served at `/metrics`.

Counters and histograms are updated as things happen (`record_attempt` is the engine's metric
hook: an ended attempt's row as written, so its spend is counted from the same figures the
attempt stores, with no read of its own); the gauges of current state (queue depth, circuit
states, each budget's charge in its current period) are refreshed from the store when
`/metrics` is scraped, so every process shows the shared truth rather than its own share of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from jobrouter.budgets import period_at
from jobrouter.config_budgets import BudgetConfig
from jobrouter.models import Attempt
from jobrouter.states import AttemptState, CircuitState

if TYPE_CHECKING:
    from jobrouter.store.outbox import OutboxCounts
    from jobrouter.store.spend import SpendLedger

REGISTRY = CollectorRegistry(auto_describe=True)
CIRCUIT_STATES = [state.value for state in CircuitState]
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)

ATTEMPTS = Counter(
    "jobrouter_attempts",
    "Attempts that ended, by provider and outcome (attempt state).",
    ["provider", "outcome"],
    registry=REGISTRY,
)
UNKNOWNS = Counter(
    "jobrouter_attempts_unknown",
    "Attempts whose outcome is unknown (timeout, lost connection).",
    ["provider"],
    registry=REGISTRY,
)
RACES_LOST = Counter(
    "jobrouter_races_lost",
    "Attempts that finished after another attempt of the job had won.",
    ["provider"],
    registry=REGISTRY,
)
RETRIES = Counter(
    "jobrouter_retries",
    "Attempts beyond a job's first (retries, fallbacks and hedges).",
    ["provider"],
    registry=REGISTRY,
)
TIMEOUTS = Counter(
    "jobrouter_attempt_timeouts",
    "Attempts that got no answer within their timeout.",
    ["provider"],
    registry=REGISTRY,
)
LIVE_VERDICTS = Counter(
    "jobrouter_live_verdicts",
    "Answers judged against their contract, by provider, contract and verdict (counted by the "
    "leader's fold: each answer of the fleet once).",
    ["provider", "contract", "verdict"],
    registry=REGISTRY,
)
SUSPENDED = Gauge(
    "jobrouter_certification_suspended",
    "1 while live answers keep a provider suspended for a contract, as this process's gate "
    "last read it.",
    ["provider", "contract"],
    registry=REGISTRY,
)
ATTEMPT_LATENCY = Histogram(
    "jobrouter_attempt_duration_seconds",
    "Time from an attempt's start to its end.",
    ["provider", "outcome"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
HTTP_LATENCY = Histogram(
    "jobrouter_http_request_duration_seconds",
    "HTTP requests served, by route template.",
    ["method", "route", "status"],
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "jobrouter_jobs_open",
    "Jobs not yet finished, by state (refreshed on scrape).",
    ["state"],
    registry=REGISTRY,
)
CIRCUITS = Enum(
    "jobrouter_circuit",
    "Circuit breaker state per provider (refreshed on scrape).",
    ["provider"],
    states=CIRCUIT_STATES,
    registry=REGISTRY,
)

# Label values come only from the configuration or a fixed list, never from a caller: /metrics
# needs no token, so an owner's name must not show there, and a random HTTP method or path must
# not make a new series (3,000 methods made 3,021 series before issue 14). Per-owner outbox
# depth is `jobrouter outbox` (an operator's command).
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OUTBOX_PENDING = Gauge(
    "jobrouter_outbox_pending",
    "Undelivered completion events, parked ones included (refreshed on scrape).",
    registry=REGISTRY,
)
OUTBOX_DEAD = Gauge(
    "jobrouter_outbox_dead",
    "Dead-lettered completion events (refreshed on scrape).",
    registry=REGISTRY,
)
OUTBOX_DELIVERIES = Counter(
    "jobrouter_outbox_deliveries",
    "Webhook delivery tries by outcome: delivered, retry "
    "(failed, due again later), dead (failed for the last time).",
    ["outcome"],
    registry=REGISTRY,
)
OUTBOX_LATENCY = Histogram(
    "jobrouter_outbox_delivery_duration_seconds",
    "Time of one webhook request, any outcome.",
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)

# Spend, by task and provider: both come from the configuration (a job's task is a configured
# task, an attempt's provider one of its providers), so the series are bounded by it. Never by
# owner or job: /metrics needs no token, and a series per job would grow without end.
SPEND_USD = Counter(
    "jobrouter_spend_usd",
    "USD that ended attempts cost (their recorded cost_usd), by task and provider.",
    ["task", "provider"],
    registry=REGISTRY,
)
PROMPT_TOKENS = Counter(
    "jobrouter_prompt_tokens",
    "Prompt tokens that ended attempts reported, by task and provider.",
    ["task", "provider"],
    registry=REGISTRY,
)
COMPLETION_TOKENS = Counter(
    "jobrouter_completion_tokens",
    "Completion tokens that ended attempts reported, by task and provider.",
    ["task", "provider"],
    registry=REGISTRY,
)
COST_UNKNOWN = Counter(
    "jobrouter_attempts_cost_unknown",
    "Ended attempts whose cost is unknown (no answer, no usage reported, or no price), by "
    "task and provider: spend the USD counter cannot show.",
    ["task", "provider"],
    registry=REGISTRY,
)
# Each budget's current period, read from the ledger on scrape (`collect_budgets`); labelled by
# the budget's name, a key of the configuration. A cap the budget does not have is not set.
BUDGET_CHARGED_USD = Gauge(
    "jobrouter_budget_charged_usd",
    "USD charged to a budget in its current period: reservations in flight plus settled "
    "actuals (refreshed on scrape).",
    ["budget"],
    registry=REGISTRY,
)
BUDGET_CHARGED_TOKENS = Gauge(
    "jobrouter_budget_charged_tokens",
    "Tokens charged to a budget in its current period, reserved plus actual (refreshed on scrape).",
    ["budget"],
    registry=REGISTRY,
)
BUDGET_CAP_USD = Gauge(
    "jobrouter_budget_cap_usd",
    "A budget's USD cap per period, for a budget that caps USD.",
    ["budget"],
    registry=REGISTRY,
)
BUDGET_CAP_TOKENS = Gauge(
    "jobrouter_budget_cap_tokens",
    "A budget's token cap per period, for a budget that caps tokens.",
    ["budget"],
    registry=REGISTRY,
)


def http_method_label(method: str) -> str:
    """The request's method as a label value: one of the methods the API knows, else `other`."""
    return method if method in HTTP_METHODS else "other"


def record_attempt(attempt: Attempt, task: str, timed_out: bool) -> None:
    """The engine's metric hook: an attempt of a job of `task` ended (its row as written)."""
    provider, state = attempt.provider, attempt.state
    ATTEMPTS.labels(provider=provider, outcome=state.value).inc()
    record_spend(attempt, task)
    if state is AttemptState.UNKNOWN:
        UNKNOWNS.labels(provider=provider).inc()
    elif state is AttemptState.LOST:
        RACES_LOST.labels(provider=provider).inc()
    if attempt.seq > 1:
        RETRIES.labels(provider=attempt.provider).inc()
    if timed_out:
        TIMEOUTS.labels(provider=attempt.provider).inc()
    if attempt.latency_ms is not None:
        ATTEMPT_LATENCY.labels(provider=attempt.provider, outcome=attempt.state.value).observe(
            attempt.latency_ms / 1000
        )


def record_spend(attempt: Attempt, task: str) -> None:
    """Count what an ended attempt cost, from the figures its row records: the tokens it
    reported, and its USD, or that its USD is unknown (never counted as 0)."""
    provider = attempt.provider
    PROMPT_TOKENS.labels(task=task, provider=provider).inc(attempt.prompt_tokens or 0)
    COMPLETION_TOKENS.labels(task=task, provider=provider).inc(attempt.completion_tokens or 0)
    if attempt.cost_usd is None:
        COST_UNKNOWN.labels(task=task, provider=provider).inc()
    else:
        SPEND_USD.labels(task=task, provider=provider).inc(attempt.cost_usd)


async def collect_budgets(
    ledger: SpendLedger, budgets: Mapping[str, BudgetConfig], now: float
) -> None:
    """Set each budget's gauges from the ledger: its charge in the period that holds `now`
    (read when `/metrics` is scraped, never on a job's path) and its caps."""
    periods = [(name, period_at(budget, now).start) for name, budget in budgets.items()]
    rolling = {name for name, budget in budgets.items() if budget.period == "rolling"}
    charged = await ledger.charged(periods, rolling)
    for name, (usd, tokens) in charged.items():
        budget = budgets[name]
        BUDGET_CHARGED_USD.labels(budget=name).set(usd)
        BUDGET_CHARGED_TOKENS.labels(budget=name).set(tokens)
        if budget.usd is not None:
            BUDGET_CAP_USD.labels(budget=name).set(budget.usd)
        if budget.tokens is not None:
            BUDGET_CAP_TOKENS.labels(budget=name).set(budget.tokens)


def set_gauges(open_jobs: dict[str, int], circuits: Iterable[tuple[str, CircuitState]]) -> None:
    """Current state from the store: queue depth by job state, and each provider's circuit."""
    for state, count in open_jobs.items():
        QUEUE_DEPTH.labels(state=state).set(count)
    for provider, state in circuits:
        CIRCUITS.labels(provider=provider).state(state.value)


def record_delivery(owner: str, outcome: str, seconds: float) -> None:
    """The outbox deliverer's metric hook: one webhook try ended (delivered, retry or dead).
    `owner` is not a label (see above): the hook keeps it for the deliverer's log lines."""
    del owner
    OUTBOX_DELIVERIES.labels(outcome=outcome).inc()
    OUTBOX_LATENCY.observe(seconds)


def set_outbox_gauges(counts: OutboxCounts) -> None:
    """Outbox depth from the store, summed over owners."""
    OUTBOX_PENDING.set(sum(depth.pending for depth in counts.pending))
    OUTBOX_DEAD.set(sum(counts.dead.values()))


def exposition() -> bytes:
    return generate_latest(REGISTRY)
