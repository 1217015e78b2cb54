"""The leader's periodic tasks against each store: certification expiry warnings, the outbox
re-claim, and which tasks a config asks for."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from jobrouter.config import (
    CertificationConfig,
    RetentionConfig,
    RouterConfig,
    WatchConfig,
    WebhookConfig,
)
from jobrouter.contracts import CaseEvidence, Certification, RenderingEvidence
from jobrouter.leader import PeriodicTask
from jobrouter.periodic import CERT_EXPIRY, periodic_tasks, warn_expiring
from jobrouter.probes import Prober
from jobrouter.states import JobState
from jobrouter.store import SqlStore
from tests.support.outbox_jobs import DAY_S, age_jobs, event_of, job_in

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


async def save(store: SqlStore, provider: str, expires_in: timedelta, passed: bool) -> None:
    case = CaseEvidence(
        name="tea",
        passed=passed,
        verdict="pass" if passed else "fail",
        rendering=RenderingEvidence(ok=True),
        runs=1,
    )
    record = Certification(
        provider=provider,
        provider_fingerprint="p",
        contract="caption",
        contract_version=1,
        contract_fingerprint="c",
        passed=passed,
        cases=(case,),
        certified_at=NOW - timedelta(days=5),
        expires_at=NOW + expires_in,
    )
    await store.certifications.save_certification(
        provider=provider,
        contract="caption",
        provider_fingerprint="p",
        contract_fingerprint="c",
        passed=passed,
        record=record.model_dump_json(),
        certified_at=record.certified_at.timestamp(),
        expires_at=record.expires_at.timestamp(),
    )


async def test_certifications_close_to_expiry_are_warned_about_and_measured(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    await save(store, "soon", timedelta(hours=20), passed=True)
    await save(store, "later", timedelta(days=6), passed=True)
    await save(store, "failed", timedelta(hours=1), passed=False)  # not certified: no warning
    caplog.set_level(logging.WARNING, logger="jobrouter.periodic")
    close = await warn_expiring(store.certifications, window_s=2 * 86_400.0, now=NOW.timestamp())
    assert close == 1
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "provider soon" in warned[0] and "20.0 hours" in warned[0]
    assert CERT_EXPIRY.labels(provider="soon", contract="caption")._value.get() == 20 * 3600.0
    assert CERT_EXPIRY.labels(provider="later", contract="caption")._value.get() == 6 * 86_400.0


async def test_the_reclaim_frees_only_expired_claims(store: SqlStore) -> None:
    first = await event_of(store, await job_in(store, JobState.SUCCEEDED, key="a"))
    second = await event_of(store, await job_in(store, JobState.SUCCEEDED, key="b"))
    await store.outbox.claim_outbox(["shop"], "live-worker", claim_s=60.0, limit=1)
    await store.outbox.claim_outbox(
        ["shop"], "dead-worker", claim_s=-1.0, limit=1
    )  # expired at once
    assert await store.outbox.bus.reclaim_outbox() == 1
    rows = {e.id: await store.outbox.outbox_event(e.id) for e in (first, second)}
    claimed = {row.claimed_by for row in rows.values() if row is not None}
    assert claimed == {None, "live-worker"}


def test_the_config_decides_which_tasks_run() -> None:
    hooks = {"shop": WebhookConfig(url="http://127.0.0.1:9/h", secret_env="X")}
    plain = periodic_tasks(None, RouterConfig(), wake_engine=lambda: None)  # type: ignore[arg-type]
    full = periodic_tasks(
        None,
        RouterConfig(
            webhooks=hooks,  # type: ignore[arg-type]
            retention=RetentionConfig(purge_interval=24),
        ),
        wake_engine=lambda: None,
    )
    unwatched = periodic_tasks(
        None,  # type: ignore[arg-type]
        RouterConfig(certification=CertificationConfig(watch=WatchConfig(enabled=False))),
        wake_engine=lambda: None,
    )
    assert [t.name for t in plain] == ["sweep", "certification-expiry", "live-watch"]
    assert [t.name for t in unwatched] == ["sweep", "certification-expiry"]
    assert [t.name for t in full] == [
        "sweep",
        "certification-expiry",
        "live-watch",
        "outbox-reclaim",
        "retention-purge",
    ]
    assert {t.name: t.interval_s for t in full}["live-watch"] == 2.0
    probing = periodic_tasks(
        None,  # type: ignore[arg-type]
        RouterConfig(),
        wake_engine=lambda: None,
        prober=Prober(None, {}, {}, 1800.0),  # type: ignore[arg-type]
    )
    [probe] = [t for t in probing if t.name == "golden-probe"]
    # looked at every minute; each provider's probe is due 1800 s (2 an hour) after its last,
    # in the store (tests/store/test_probes.py)
    assert probe.interval_s == 60.0
    assert {t.name: t.interval_s for t in full}["retention-purge"] == 24 * 3600.0


async def test_the_purge_task_deletes_what_the_retention_allows(store: SqlStore) -> None:
    """A parked event (no webhook for "shop", never tried) keeps its job unless the config
    says `drop_parked`, as `jobrouter purge` needs `--drop-parked`."""
    old = await job_in(store, JobState.SUCCEEDED, key="old")  # parked: no webhook for "shop"
    await age_jobs(store, 8 * DAY_S)
    fresh = await job_in(store, JobState.SUCCEEDED, key="fresh")

    def purge_task(drop_parked: bool) -> PeriodicTask:
        config = RouterConfig(
            retention=RetentionConfig(days=7, purge_interval=1, drop_parked=drop_parked)
        )
        (task,) = [
            t
            for t in periodic_tasks(store, config, wake_engine=lambda: None)
            if t.name == "retention-purge"
        ]
        return task

    assert await purge_task(drop_parked=False).run() == 0
    assert await store.jobs.get_job(old.id) is not None
    assert await purge_task(drop_parked=True).run() == 1
    assert await store.jobs.get_job(old.id) is None
    assert await store.jobs.get_job(fresh.id) is not None
