"""Assembly of what a router with workers runs: the engine, the delivery of completion events
(the database outbox, or the NATS bus when `[delivery] nats_url` or `JOBROUTER_NATS_URL` is
set) and the leader election with the periodic work it runs. `Router.open` imports this module
only when it runs workers: a router that runs nothing (the CLI's quick commands) never loads the
engine, the outbox's HTTP client or the leader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from jobrouter.breaker import Breakers
from jobrouter.config import RouterConfig
from jobrouter.delivery import DeliverySettings
from jobrouter.engine import Engine, EngineSettings
from jobrouter.errors import ConfigError
from jobrouter.gate import Gate
from jobrouter.health import ProviderHealth
from jobrouter.leader import Leader
from jobrouter.metrics import record_attempt
from jobrouter.outbox import OutboxDeliverer
from jobrouter.periodic import HOUR_S, periodic_tasks
from jobrouter.probes import Prober
from jobrouter.providers import Provider
from jobrouter.spending import Spending
from jobrouter.store.leader_lock import leader_lock
from jobrouter.store.sqlstore import SqlStore
from jobrouter.tasks import TaskRuntime
from jobrouter.webhook import webhooks_from_config

ACK_WAIT_MARGIN_S = 30.0


class Delivery(Protocol):
    def start(self) -> None: ...

    async def stop(self) -> None: ...


def build_engine(
    store: SqlStore,
    config: RouterConfig,
    tasks: Mapping[str, TaskRuntime],
    providers: Mapping[str, Provider],
    gate: Gate,
    breakers: Breakers,
    spending: Spending,
) -> Engine:
    """The engine over `tasks` and `providers`, asking `gate` who may be tried and recording
    each outcome in the gate's `breakers`; every start reserves what `spending` says."""
    settings = EngineSettings(
        workers=config.engine.workers,
        claim_s=config.engine.claim,
        lease_s=config.engine.lease,
        poll_s=config.engine.poll_interval,
    )
    timeouts = {name: cfg.timeout.read for name, cfg in config.providers.items()}
    health = ProviderHealth(gate.eligibility, breakers.acquire, breakers.record)
    return Engine(
        store.jobs,
        tasks,
        providers,
        settings=settings,
        health=health,
        provider_timeouts=timeouts,
        metric=record_attempt,
        spending=spending,
    )


def build_delivery(store: SqlStore, config: RouterConfig) -> Delivery | None:
    """The delivery for this config: None without webhooks; through NATS when a URL is set
    (nats-py is imported only then); else the database outbox."""
    if not config.webhooks:
        return None
    hooks = webhooks_from_config(config)
    settings = DeliverySettings.from_config(config)
    url = config.delivery.resolved_nats_url()
    if url is None:
        return OutboxDeliverer(store.outbox, hooks, settings)
    delivery = config.delivery
    if config.outbox.claim >= delivery.dedupe_window:
        raise ConfigError(
            f"[outbox] claim ({config.outbox.claim}s) must be shorter than [delivery] "
            f"dedupe_window ({delivery.dedupe_window}s), or an event whose relay died before "
            "marking it published could reach the receiver twice",
            key="delivery.dedupe_window",
        )
    try:
        import nats  # noqa: F401  (fail here, with the remedy, not in the background)

        from jobrouter.bus_nats import BusSettings, NatsDelivery
    except ImportError as exc:
        raise ConfigError(
            "delivery through NATS needs the extra: pip install 'jobrouter[nats]'",
            key="delivery.nats_url",
        ) from exc
    bus = BusSettings(
        url=url,
        stream=delivery.stream,
        subject=delivery.subject,
        consumer=delivery.consumer,
        dedupe_window_s=delivery.dedupe_window,
        ack_wait_s=delivery.ack_wait or config.outbox.timeout + ACK_WAIT_MARGIN_S,
    )
    return NatsDelivery(store.outbox, hooks, settings, bus)


def build_leader(
    store: SqlStore, config: RouterConfig, dsn: str, engine: Engine, gate: Gate
) -> Leader:
    """The leader election of this process (PostgreSQL: advisory lock and lease; SQLite:
    itself)."""
    heartbeat = config.leader.heartbeat
    lock = leader_lock(store.connector, dsn, engine.worker_id, heartbeat_s=heartbeat)
    per_hour = config.certification.watch.probes_per_hour
    interval = HOUR_S / per_hour if per_hour > 0 else HOUR_S  # 0: no probe task at all
    prober = Prober(store.certifications, engine.tasks, engine.providers, interval)
    tasks = periodic_tasks(
        store, config, wake_engine=engine.wake, forget=gate.forget, prober=prober
    )
    return Leader(lock, engine.worker_id, tasks, heartbeat_s=heartbeat)
