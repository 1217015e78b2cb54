"""Which delivery a config builds, and that NATS stays out of a router that does not ask for it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from jobrouter.bus_nats import NatsDelivery, message_id
from jobrouter.config import OutboxConfig, RouterConfig, WebhookConfig
from jobrouter.config_fleet import NATS_URL_ENV, DeliveryConfig
from jobrouter.fleet import build_delivery
from jobrouter.outbox import OutboxDeliverer
from jobrouter.store import SqlStore, open_store
from jobrouter.store.outbox import OutboxEvent

ROOT = Path(__file__).resolve().parents[2]
HOOKS = {"shop": WebhookConfig(url="http://127.0.0.1:9/hook", secret_env="SHOP_SECRET")}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    opened = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    yield opened
    await opened.close()


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_SECRET", "s")
    monkeypatch.delenv(NATS_URL_ENV, raising=False)


async def test_without_a_nats_url_the_database_outbox_delivers(store: SqlStore) -> None:
    assert isinstance(build_delivery(store, RouterConfig(webhooks=HOOKS)), OutboxDeliverer)


async def test_the_environment_variable_moves_delivery_onto_nats(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NATS_URL_ENV, "nats://127.0.0.1:4222")
    built = build_delivery(store, RouterConfig(webhooks=HOOKS))
    assert isinstance(built, NatsDelivery) and built.bus.url == "nats://127.0.0.1:4222"


def test_a_claim_longer_than_the_dedupe_window_is_refused() -> None:
    """The config model refuses it (it was refused only when the delivery was built), so
    `config check` reports it too (tests/unit/test_config_check.py)."""
    with pytest.raises(ValidationError, match="dedupe_window"):
        RouterConfig(
            webhooks=HOOKS,
            delivery=DeliveryConfig(nats_url="nats://127.0.0.1:4222", dedupe_window=30.0),
        )


def test_the_dedupe_rule_holds_only_for_webhooks_delivered_through_nats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """mutants seen failing: the rule without its `self.webhooks` condition; without the
    environment's URL (`on_bus` from the file only); `>=` written `>` (a claim as long as the
    window passes)."""
    short = DeliveryConfig(dedupe_window=30.0)
    RouterConfig(delivery=short)  # no URL: the database outbox, no dedupe window at all
    bus = DeliveryConfig(nats_url="nats://127.0.0.1:4222", dedupe_window=30.0)
    RouterConfig(delivery=bus)  # no webhooks: nothing is delivered
    RouterConfig(webhooks=HOOKS, delivery=bus, outbox=OutboxConfig(claim=29.0))
    with pytest.raises(ValidationError, match="dedupe_window"):
        RouterConfig(webhooks=HOOKS, delivery=bus, outbox=OutboxConfig(claim=30.0))
    monkeypatch.setenv(NATS_URL_ENV, "nats://127.0.0.1:4222")
    with pytest.raises(ValidationError, match="dedupe_window"):
        RouterConfig(webhooks=HOOKS, delivery=short)


def test_a_nats_url_must_be_one() -> None:
    with pytest.raises(ValidationError, match="nats://"):
        DeliveryConfig(nats_url="http://127.0.0.1:4222")


def test_a_replayed_dead_letter_gets_a_message_id_of_its_own() -> None:
    fresh = OutboxEvent(
        id="e1",
        job_id="j",
        owner="o",
        kind="job.succeeded",
        payload="{}",
        created_at=10.0,
        tries=0,
        next_attempt_at=10.0,
    )
    replayed = OutboxEvent(
        id="e1",
        job_id="j",
        owner="o",
        kind="job.succeeded",
        payload="{}",
        created_at=10.0,
        tries=0,
        next_attempt_at=99.5,
    )
    assert message_id(fresh) == "e1"
    assert message_id(replayed) == "e1:replay:99.5"


def test_a_router_without_the_setting_never_imports_nats(tmp_path: Path) -> None:
    """A router with webhooks and workers, opened and closed, in a fresh interpreter."""
    script = f"""
import asyncio, os, sys
os.environ["SHOP_SECRET"] = "s"
from jobrouter import Router
from jobrouter.config import OutboxConfig, RouterConfig, WebhookConfig
hooks = {{"shop": WebhookConfig(url="http://127.0.0.1:9/hook", secret_env="SHOP_SECRET")}}
async def main():
    async with Router.open("sqlite:///{tmp_path / "r.db"}", RouterConfig(webhooks=hooks)):
        pass
asyncio.run(main())
print(sorted(m for m in sys.modules if m == "nats" or m.startswith("nats.")))
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stderr
