"""The periodic work of a router fleet, run by its leader only (router/leader.py):

sweep                 attempts whose lease expired become `unknown` (I7);
                      every [engine] sweep_interval
outbox-reclaim        claims of delivery processes that died are freed; every [outbox] claim/2
                      (with webhooks only)
retention-purge       `jobrouter purge` with the configured retention; every [retention]
                      purge_interval hours (off unless set)
certification-expiry  a warning before a passed certification expires (within [certification]
                      warn_before_days); hourly
live-watch            live verdicts folded into each pair's watch; a drifting pair suspended
                      (router/watch.py); every [certification.watch] interval (unless disabled)
golden-probe          a golden case to each certified provider (router/probes.py), each due
                      3600 / [certification.watch] probes_per_hour seconds after the last in
                      the store's schedule (0: never); looked at every minute
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import datetime

from prometheus_client import Gauge

from jobrouter import retention
from jobrouter.config import RouterConfig
from jobrouter.leader import PeriodicTask
from jobrouter.metrics import REGISTRY
from jobrouter.probes import Prober
from jobrouter.store.certifications import CertificationStore
from jobrouter.store.sqlstore import SqlStore

log = logging.getLogger("jobrouter.periodic")
CERT_CHECK_S = 3600.0
HOUR_S = 3600.0
PROBE_POLL_S = 60.0  # how often the leader looks for a due golden probe

CERT_EXPIRY = Gauge(
    "jobrouter_certification_expiry_seconds",
    "Seconds until each passed certification expires (negative: expired), refreshed by the leader.",
    ["provider", "contract"],
    registry=REGISTRY,
)


def periodic_tasks(
    store: SqlStore,
    config: RouterConfig,
    *,
    wake_engine: Callable[[], None],
    forget: Callable[[], None] = lambda: None,
    prober: Prober | None = None,
) -> list[PeriodicTask]:
    """`forget`: the gate of this process reads certification states again (a suspension
    made here decides this process's next attempt; the others' within their refresh)."""

    async def sweep() -> int:
        expired = await store.jobs.expire_attempts()
        if expired:
            log.warning("%d attempts had an expired lease and are now unknown", len(expired))
            wake_engine()
        return len(expired)

    async def reclaim() -> int:
        freed = await store.outbox.bus.reclaim_outbox()
        if freed:
            log.warning("%d outbox events were claimed by a process that died; freed", freed)
        return freed

    async def purge() -> int:
        cutoff = retention.cutoff_for(config.retention.days)
        done = await retention.purge(
            store.outbox, cutoff, owners=config.webhooks, drop_parked=config.retention.drop_parked
        )
        if done.jobs:
            log.info(
                "retention purge: %d jobs deleted (%d parked events with them)",
                done.jobs,
                done.parked,
            )
        return done.jobs

    async def certifications() -> int:
        return await warn_expiring(
            store.certifications, config.certification.warn_before_days * 86_400.0
        )

    tasks = [
        PeriodicTask("sweep", config.engine.sweep_interval, sweep),
        PeriodicTask("certification-expiry", CERT_CHECK_S, certifications),
    ]
    tasks += watch_tasks(store, config, forget, prober)
    if config.webhooks:  # only delivery claims outbox events
        tasks.append(PeriodicTask("outbox-reclaim", config.outbox.claim / 2, reclaim))
    if config.retention.purge_interval is not None:
        tasks.append(
            PeriodicTask("retention-purge", config.retention.purge_interval * HOUR_S, purge)
        )
    return tasks


def watch_tasks(
    store: SqlStore, config: RouterConfig, forget: Callable[[], None], prober: Prober | None
) -> list[PeriodicTask]:
    """The fold of live verdicts and the golden probes (`[certification.watch]`)."""
    watch = config.certification.watch
    if not watch.enabled:
        return []

    async def live_watch() -> int:
        from jobrouter.watch import fold_backlog

        # every owner with a webhook hears of a suspension: its jobs route elsewhere now
        return await fold_backlog(store.certifications, watch, forget, sorted(config.webhooks))

    tasks = [PeriodicTask("live-watch", watch.interval, live_watch)]
    if prober is not None and watch.probes_per_hour > 0:
        # the schedule is the store's (probe_schedule): a round sends only what is due, so the
        # leader can look often and a new one goes on where the last stopped
        poll = min(PROBE_POLL_S, prober.interval_s)
        tasks.append(PeriodicTask("golden-probe", poll, prober.round))
    return tasks


async def warn_expiring(
    store: CertificationStore, window_s: float, now: float | None = None
) -> int:
    """Set the expiry gauge of every passed certification and log a warning for each that
    expires within `window_s`. Returns how many are that close (or expired)."""
    now = time.time() if now is None else now
    close = 0
    for row in await store.list_certifications():
        record = json.loads(row.record)
        if not record.get("passed"):
            continue
        left = datetime.fromisoformat(record["expires_at"]).timestamp() - now
        CERT_EXPIRY.labels(provider=row.provider, contract=row.contract).set(left)
        if left <= window_s:
            close += 1
            log.warning(
                "certification of provider %s for contract %s expires in %.1f hours; "
                "run `jobrouter contracts run` before then",
                row.provider,
                row.contract,
                left / HOUR_S,
            )
    return close
