"""Outbox delivery against a real webhook receiver (uvicorn on 127.0.0.1) and a real SQLite
file: signed requests with the event id as Idempotency-Key, retries with backoff whose state
lives in the row, dead letters and replay, a hanging receiver, a crash between send and mark
(at least once: the same event id again), parked owners, two deliverers, metrics, and the
Router end to end (deliver, purge, resubmit the same key)."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import itertools
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobrouter import Router
from jobrouter.config import OutboxConfig, RouterConfig, TaskConfig, WebhookConfig
from jobrouter.delivery import DeliverySettings
from jobrouter.errors import ConfigError
from jobrouter.fleet import build_delivery
from jobrouter.metrics import REGISTRY, set_outbox_gauges
from jobrouter.outbox import OutboxDeliverer
from jobrouter.providers.backoff import full_jitter, parse_retry_after
from jobrouter.retention import cutoff_for, purge
from jobrouter.states import JobState
from jobrouter.store import SqlStore, open_store
from jobrouter.store.outbox import OutboxCounts, OutboxEvent, OwnerDepth
from jobrouter.webhook import (
    Webhook,
    _read_capped,
    event_body,
    sign,
    verify_signature,
    webhooks_from_config,
)
from tests.support.fakes import FakeProvider
from tests.support.outbox_jobs import DAY_S, age_jobs, event_of, job_in, outbox_event_of_job
from tests.support.webhook_receiver import WebhookReceiver

SECRET = b"s3cret-for-tests"
INITIAL = 0.05  # backoff of the first retry, seconds; doubles per try
# Short waits between tries, but a try's own timeout (and the claim, longer than it) generous: a
# receiver answering late on a loaded machine must not turn into an extra, unexpected send.
FAST = DeliverySettings(
    max_tries=8,
    backoff_initial_s=INITIAL,
    backoff_max_s=1.0,
    timeout_s=30.0,
    claim_s=60.0,
    poll_s=0.02,
    batch=16,
)


def no_jitter(bound: float) -> float:
    return bound  # the full bound, so the waits are known


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    opened = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    async with WebhookReceiver().running() as running:
        yield running


def deliverer(store: SqlStore, receiver: WebhookReceiver, **changes: Any) -> OutboxDeliverer:
    settings = dataclasses.replace(FAST, **changes)
    hooks = {"shop": Webhook(owner="shop", url=receiver.url, secret=SECRET)}
    return OutboxDeliverer(store.outbox, hooks, settings, jitter=no_jitter)


async def until(predicate: Any, within: float = 60.0) -> None:
    async with asyncio.timeout(within):
        while True:
            if await predicate():
                return
            await asyncio.sleep(0.02)


def expected_signature(header: str, body: bytes) -> str:
    """The receiver's side, written out without router code: HMAC-SHA256 of "<t>.<body>"."""
    fields = dict(part.split("=", 1) for part in header.split(","))
    return hmac.new(SECRET, fields["t"].encode() + b"." + body, hashlib.sha256).hexdigest()


# ---- pure parts ----------------------------------------------------------------------------------


def test_signature_verifies_with_the_secret_only_and_only_while_fresh() -> None:
    body = b'{"id":"e1"}'
    header = sign(SECRET, body, int(time.time()))
    assert header.startswith("t=") and ",v1=" in header
    assert header.split(",v1=")[1] == expected_signature(header, body)
    assert verify_signature(SECRET, body, header)
    assert not verify_signature(b"other-secret", body, header)
    assert not verify_signature(SECRET, body + b" ", header)
    assert not verify_signature(SECRET, body, header, now=time.time() + 3600)
    assert not verify_signature(SECRET, body, "v1=abc")


class Chunks(httpx.AsyncByteStream):
    """A receiver's answer arriving in the given pieces; counts the pieces read."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.read += 1
            yield chunk


async def test_an_answer_in_pieces_is_read_up_to_the_cap_and_no_further() -> None:
    """The cap counts every piece read so far, the pieces are joined as they came, the piece
    that reaches the cap is the last one read, and a character cut at the cap is replaced,
    not an error. Kills mutants `outbox._read_capped` 3, 5, 6, 13, 15, 18, 19 (survived) and
    1, 2, 4, 9, 10, 11, 14, 16 (which the run recorded `timeout`)."""
    stream = Chunks(b"ab", b"cd", b"ef", b"gh")
    assert await _read_capped(httpx.Response(500, stream=stream), 5) == "abcde"
    assert stream.read == 3
    cut = Chunks(b"ab", "\u00e9".encode())  # a two-byte character, cut after its first byte
    assert await _read_capped(httpx.Response(500, stream=cut), 3) == "ab\ufffd"


def test_the_body_is_the_documented_envelope() -> None:
    """What a receiver gets (docs/operations.md): id, kind, created_at and the stored event as
    `data`. Kills mutants `outbox.event_body` 6, 7 (`created_at` renamed)."""
    event = OutboxEvent(
        id="e1",
        job_id="j1",
        owner="shop",
        kind="job.failed",
        payload='{"state": "failed"}',
        created_at=1767225600.5,
        tries=0,
    )
    assert json.loads(event_body(event)) == {
        "id": "e1",
        "kind": "job.failed",
        "created_at": 1767225600.5,
        "data": {"state": "failed"},
    }


def test_retry_delay_is_exponential_capped_and_fully_jittered() -> None:
    """The outbox's wait is `DeliverySettings.backoff` (before: its own `retry_delay`)."""
    settings = dataclasses.replace(FAST, backoff_initial_s=1.0, backoff_max_s=10.0)
    bounds = [settings.backoff.wait_s(n, jitter=no_jitter) for n in range(1, 7)]
    assert bounds == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    samples = [settings.backoff.wait_s(3) for _ in range(200)]
    assert all(0.0 <= s <= 4.0 for s in samples) and len(set(samples)) > 100
    # Full jitter starts at zero, even under one second (kills `uniform(1.0, bound)`).
    small = [full_jitter(0.5) for _ in range(200)]
    assert all(0.0 <= s <= 0.5 for s in small) and min(small) < 0.1


def test_signature_at_the_edge_of_the_tolerance_is_accepted() -> None:
    """`tolerance_s` is inclusive (kills `>=` for `>`)."""
    header = sign(SECRET, b"{}", 1_000_000)
    assert verify_signature(SECRET, b"{}", header, now=1_000_000 + 300.0, tolerance_s=300.0)
    assert not verify_signature(SECRET, b"{}", header, now=1_000_000 + 300.5, tolerance_s=300.0)


OCT_21 = 1792567680.0  # Wed, 21 Oct 2026 07:28:00 GMT


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("0", 0.0),
        ("0.5", 0.5),
        ("120", 120.0),
        ("-1", 0.0),  # was None (no hint); the wait is the backoff's either way
        ("soon", None),
        (None, None),
        ("Wed, 21 Oct 2026 07:28:00 GMT", 60.0),  # was None: the date form was ignored
    ],
)
def test_a_receivers_retry_after_is_read_in_seconds(
    value: str | None, seconds: float | None
) -> None:
    """Retry-After of a webhook, read by the one parser (providers/backoff.py): seconds, zero
    included, or an HTTP date; anything else is ignored (kills the mutants that drop zero,
    small values or the parse)."""
    assert parse_retry_after(value, now=OCT_21 - 60) == seconds


# ---- delivery ------------------------------------------------------------------------------------


async def test_an_event_is_posted_signed_with_its_id_as_idempotency_key(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    """Also names the sender (kills mutants `OutboxDeliverer.send` 7, 11: httpx's own
    User-Agent sent) and is a POST (kills `send` 44, the method "XXPOSTXX")."""
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    event = await event_of(store, job)
    sender = deliverer(store, receiver)
    try:
        assert await sender.deliver_due() == 1
    finally:
        await sender.stop()
    [request] = receiver.requests
    assert request.method == "POST"
    assert request.event_id == event.id
    assert request.headers["x-jobrouter-event"] == "job.succeeded"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"] == "jobrouter-outbox/1"
    signature = request.headers["x-jobrouter-signature"]
    assert signature.split(",v1=")[1] == expected_signature(signature, request.body)
    assert verify_signature(SECRET, request.body, signature)
    body = request.json
    assert body["id"] == event.id and body["kind"] == "job.succeeded"
    assert body["data"]["job_id"] == job.id and body["data"]["result"] == {"text": "order-1"}
    delivered = await event_of(store, job)
    assert delivered.delivered_at is not None and delivered.tries == 1


async def test_failures_are_retried_with_backoff_then_delivered(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    receiver.fail_first = 3
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    sender = deliverer(store, receiver)
    sender.start()
    try:
        requests = await receiver.wait_for(4)
        await until(lambda: delivered(store, job.id))
        # A later event delivered by a later round: the delivered one would have gone with it.
        later = await job_in(store, JobState.SUCCEEDED, key="order-2")
        sender.wake()
        await until(lambda: delivered(store, later.id))
    finally:
        await sender.stop()
    assert len({r.event_id for r in requests}) == 1  # one event, sent four times
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(requests)]
    for gap, wait in zip(gaps, [INITIAL, 2 * INITIAL, 4 * INITIAL], strict=True):
        assert gap >= wait * 0.9, (gaps, "the backoff doubles per try")
    row = await event_of(store, job)
    assert row.tries == 4 and row.last_error is None
    sent = [r.event_id for r in receiver.requests]
    assert sent.count(row.id) == 4 and len(sent) == 5  # delivered: never sent again


async def delivered(store: SqlStore, job_id: str) -> bool:
    event = await outbox_event_of_job(store, job_id)
    return event is not None and event.delivered_at is not None


async def test_retry_state_lives_in_the_row_and_survives_a_new_deliverer(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    receiver.always_fail = True
    job = await job_in(store, JobState.FAILED, key="order-1")
    first = deliverer(store, receiver, backoff_initial_s=60.0, backoff_max_s=600.0)
    began = time.time()
    try:
        assert await first.deliver_due() == 1
        row = await event_of(store, job)
        assert row.tries == 1 and (row.last_error or "").startswith("HTTP 500")
        assert row.claimed_by is None and row.next_attempt_at is not None
        assert began + 60.0 <= row.next_attempt_at <= time.time() + 60.0
        assert await first.deliver_due() == 0  # not due yet: nothing in memory decides that
    finally:
        await first.stop()  # the process goes away
    await make_due(store)  # a minute passes
    second = deliverer(store, receiver, backoff_initial_s=60.0, backoff_max_s=600.0)
    began = time.time()
    try:
        assert await second.deliver_due() == 1
    finally:
        await second.stop()
    row = await event_of(store, job)
    assert row.tries == 2 and row.next_attempt_at is not None
    assert row.next_attempt_at >= began + 120.0  # the new process doubled the row's wait
    assert receiver.delivered_ids == {row.id} and len(receiver.requests) == 2


async def make_due(store: SqlStore) -> None:
    async with store.connector.write() as tx:
        await tx.execute("UPDATE outbox SET next_attempt_at = 0 WHERE delivered_at IS NULL", {})


async def test_after_max_tries_an_event_is_a_dead_letter_and_replay_delivers_it(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    receiver.always_fail = True
    job = await job_in(store, JobState.CANCELLED, key="order-1")
    event = await event_of(store, job)
    sender = deliverer(store, receiver, max_tries=3)
    sender.start()
    try:
        await receiver.wait_for(3)
        await until(lambda: has_dead(store, 1))
        [dead] = await store.outbox.dead_letters()
        assert (dead.id, dead.job_id, dead.tries) == (event.id, job.id, 3)
        assert (dead.last_error or "").startswith("HTTP 500")
        assert await outbox_event_of_job(store, job.id) is None
        # A later event delivered by a later round: that round would have taken a dead letter.
        receiver.always_fail = False
        later = await job_in(store, JobState.SUCCEEDED, key="order-2")
        sender.wake()
        await until(lambda: delivered(store, later.id))
        sent = [r.event_id for r in receiver.requests]
        assert sent.count(event.id) == 3  # dead letters are not sent

        assert await store.outbox.replay_dead(event.id)
        sender.wake()
        await until(lambda: delivered(store, job.id))
    finally:
        await sender.stop()
    assert [r.event_id for r in receiver.requests].count(event.id) == 4
    assert (await store.outbox.outbox_counts()).dead == {}


async def has_dead(store: SqlStore, n: int) -> bool:
    return sum((await store.outbox.outbox_counts()).dead.values()) == n


async def test_a_hanging_receiver_times_out_and_the_event_is_sent_again(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    receiver.hang_first = 1
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    sender = deliverer(store, receiver, timeout_s=3.0, claim_s=6.0)  # the hang never answers
    sender.start()
    began = time.monotonic()
    try:
        await receiver.wait_for(2)
        await until(lambda: delivered(store, job.id))
    finally:
        await sender.stop()
    assert time.monotonic() - began >= 3.0
    first, second = receiver.requests
    assert first.event_id == second.event_id
    row = await event_of(store, job)
    assert row.tries == 2


async def test_a_crash_between_send_and_mark_resends_the_same_event_id(
    store: SqlStore, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    receiver.hang_first = 1  # the receiver has the request; the answer never comes back
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    crashed = deliverer(store, receiver, timeout_s=300.0, claim_s=600.0)  # expired by hand below
    attempt = asyncio.create_task(crashed.deliver_due())
    await receiver.wait_for(1)
    attempt.cancel()  # the process dies after the send, before marking the row delivered
    with pytest.raises(asyncio.CancelledError):
        await attempt
    row = await event_of(store, job)
    assert row.delivered_at is None and row.claimed_by == crashed.worker_id  # the claim stays

    restarted = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")  # a new process
    survivor = deliverer(restarted, receiver)
    try:
        assert await survivor.deliver_due() == 0  # the dead process's claim still holds
        async with restarted.connector.write() as tx:  # ... until it expires
            await tx.execute("UPDATE outbox SET claim_until = 0", {})
        assert await survivor.deliver_due() == 1
    finally:
        await survivor.stop()
        await crashed.stop()
        await restarted.close()
    first, second = receiver.requests
    assert first.event_id == second.event_id == row.id  # received twice ...
    assert first.body == second.body
    assert receiver.delivered_ids == {row.id}  # ... one event after de-duplication
    assert await delivered(store, job.id)


async def test_events_of_owners_without_a_webhook_are_parked_not_spun_on(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    parked = await job_in(store, JobState.SUCCEEDED, owner="nohook", key="order-1")
    sender = deliverer(store, receiver)
    sender.start()
    try:  # an event of an owner with a webhook delivered: the parked one was passed over
        later = await job_in(store, JobState.SUCCEEDED, key="order-2")
        await until(lambda: delivered(store, later.id))
    finally:
        await sender.stop()
    assert [r.event_id for r in receiver.requests] == [(await event_of(store, later)).id]
    row = await event_of(store, parked)
    assert (row.tries, row.claimed_by, row.delivered_at, row.last_error) == (0, None, None, None)


async def test_two_deliverers_send_each_event_once(
    store: SqlStore, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    receiver.delay = 0.02
    jobs = [await job_in(store, JobState.SUCCEEDED, key=f"order-{n}") for n in range(30)]
    other = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    senders = [deliverer(store, receiver, batch=4), deliverer(other, receiver, batch=4)]
    for sender in senders:
        sender.start()
    try:
        await receiver.wait_for(30)
        await until(lambda: all_delivered(store, [job.id for job in jobs]))
    finally:
        for sender in senders:
            await sender.stop()
        await other.close()
    ids = [request.event_id for request in receiver.requests]
    assert len(ids) == len(set(ids)) == 30


async def all_delivered(store: SqlStore, job_ids: list[str]) -> bool:
    return all([await delivered(store, job_id) for job_id in job_ids])


async def test_an_endless_answer_is_read_only_up_to_the_cap(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    """Issue 14: a receiver answering 800 MB was read whole (RSS 220 MB -> 3.3 GB). Here the
    answer never ends: read whole, the try would end only at the timeout ("no answer within");
    read up to the cap, it is an HTTP 500 with an excerpt (this fails on the old code)."""
    receiver.endless = True
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    sender = deliverer(store, receiver, timeout_s=5.0)  # the default cap, 4096 bytes
    sender.start()
    try:

        async def tried() -> bool:
            return (await event_of(store, job)).tries >= 1

        await until(tried, within=30.0)
    finally:
        await sender.stop()
    error = (await event_of(store, job)).last_error
    assert error is not None and error.startswith("HTTP 500: xxx"), error
    assert len(error) <= len("HTTP 500: ") + 200


# ---- metrics -------------------------------------------------------------------------------------


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_delivery_outcomes_are_counted(store: SqlStore, receiver: WebhookReceiver) -> None:
    """Each try is counted by outcome and its time observed: both tries took place within
    this test, so their times add up to no more than the test's own. Kills mutant
    `OutboxDeliverer._record_and_count` 12 (`monotonic() + began`); a finished try's
    recording task is not kept (mutant `_deliver` 13: one task kept per try, forever)."""
    receiver.fail_first = 1
    before = {
        o: sample("jobrouter_outbox_deliveries_total", outcome=o)
        for o in ("delivered", "retry", "dead")
    }
    timed = sample("jobrouter_outbox_delivery_duration_seconds_sum")
    began = time.monotonic()
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    sender = deliverer(store, receiver)
    sender.start()
    try:
        await until(lambda: delivered(store, job.id))
    finally:
        await sender.stop()
    took = time.monotonic() - began
    after = {o: sample("jobrouter_outbox_deliveries_total", outcome=o) for o in before}
    assert {o: after[o] - before[o] for o in before} == {"delivered": 1, "retry": 1, "dead": 0}
    assert 0 < sample("jobrouter_outbox_delivery_duration_seconds_sum") - timed <= took
    assert not sender._recording


async def test_a_round_that_fails_does_not_stop_the_delivery_loop(
    store: SqlStore,
    receiver: WebhookReceiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The store fails once while claiming (a dropped connection): the loop logs it and goes
    on. Kills the `_run` mutant that leaves the round's count unset when the round raises."""
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    real_claim = store.outbox.claim_outbox
    calls = 0

    async def claim_failing_once(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionResetError("the database went away")
        return await real_claim(*args, **kwargs)

    monkeypatch.setattr(store.outbox, "claim_outbox", claim_failing_once)
    sender = deliverer(store, receiver)
    sender.start()
    try:
        await until(lambda: delivered(store, job.id))
    finally:
        await sender.stop()
    assert calls >= 2
    assert any("delivering outbox events failed" in r.getMessage() for r in caplog.records)


async def test_a_stopped_deliverer_hands_its_claims_back_and_starts_again(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    """`stop` during a send hands the claimed event back at once, and the same deliverer can be
    started again and delivers it. Kills mutants `OutboxDeliverer.stop` 7 (the claims kept
    until they expire), 4 (a restart refused as "already running") and 9 (the closed client
    kept: the restarted deliverer cannot send)."""
    receiver.hang_first = 1
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    sender = deliverer(store, receiver)
    sender.start()
    try:
        await receiver.wait_for(1)  # the first send is in flight, and hangs
        assert (await event_of(store, job)).claimed_by == sender.worker_id
    finally:
        await sender.stop()
    assert (await event_of(store, job)).claimed_by is None
    sender.start()
    try:
        await until(lambda: delivered(store, job.id))
    finally:
        await sender.stop()


async def test_stop_between_the_delivered_write_and_the_counter_still_counts(
    store: SqlStore, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stop() lands right after the "delivered" row is written: the delivery is still counted.
    Fails on the old `_deliver` (write and count in the round that stop() cancels: the cancel
    arrives at the write's return and the counter is skipped), the race the issue saw under
    load in test_delivery_outcomes_are_counted."""
    before = sample("jobrouter_outbox_deliveries_total", outcome="delivered")
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    written, stopping = asyncio.Event(), asyncio.Event()
    real_write = store.outbox.outbox_delivered

    async def write_then_wait_for_stop(event_id: str) -> Any:
        done = await real_write(event_id)
        written.set()
        await stopping.wait()  # stop() cancels the round while the write's answer is on its way
        return done

    monkeypatch.setattr(store.outbox, "outbox_delivered", write_then_wait_for_stop)
    sender = deliverer(store, receiver)
    sender.start()
    try:
        await asyncio.wait_for(written.wait(), 60.0)  # a ceiling: no delivery, no write
        stopping.set()
    finally:
        await sender.stop()
    assert await delivered(store, job.id)
    after = sample("jobrouter_outbox_deliveries_total", outcome="delivered")
    assert after - before == 1


def test_depth_gauges_follow_the_store_and_drop_to_zero() -> None:
    set_outbox_gauges(
        OutboxCounts(
            pending=[OwnerDepth("g1", 3, 1, 0.0, 0.0), OwnerDepth("g2", 1, 0, 0.0, 0.0)],
            dead={"g1": 2},
        )
    )
    assert sample("jobrouter_outbox_pending") == 4  # summed: no owner's name on /metrics
    assert sample("jobrouter_outbox_dead") == 2
    assert sample("jobrouter_outbox_pending", owner="g1") == 0  # no such series
    set_outbox_gauges(OutboxCounts(pending=[], dead={}))
    assert sample("jobrouter_outbox_pending") == 0
    assert sample("jobrouter_outbox_dead") == 0


# ---- configuration -------------------------------------------------------------------------------


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("SHOP_WEBHOOK_SECRET", SECRET.decode())
    yield "SHOP_WEBHOOK_SECRET"


def test_settings_and_secrets_come_from_the_config_and_the_given_environment() -> None:
    """Every [outbox] key reaches the deliverer; the secret is read from the environment passed
    in (not os.environ) and the refusal names its key. Kills the DeliverySettings.from_config
    and webhooks_from_config mutants that drop a value or read the wrong environment
    (`DeliverySettings.from_config` 17: `max_response_bytes` left at its default)."""
    config = RouterConfig(
        webhooks={
            "shop": WebhookConfig(url="http://127.0.0.1:9/x", secret_env="JR_TEST_ONLY_HERE")
        },
        outbox=OutboxConfig(
            max_tries=5,
            backoff_initial=2.0,
            backoff_max=90.0,
            timeout=7.0,
            claim=40.0,
            poll_interval=0.5,
            batch=9,
            max_response_bytes=1000,
        ),
    )
    assert DeliverySettings.from_config(config) == DeliverySettings(
        max_tries=5,
        backoff_initial_s=2.0,
        backoff_max_s=90.0,
        timeout_s=7.0,
        claim_s=40.0,
        poll_s=0.5,
        batch=9,
        max_response_bytes=1000,
    )
    hooks = webhooks_from_config(config, {"JR_TEST_ONLY_HERE": "s3cret"})
    assert hooks == {"shop": Webhook(owner="shop", url="http://127.0.0.1:9/x", secret=b"s3cret")}
    with pytest.raises(ConfigError) as refused:
        webhooks_from_config(config, {"JR_TEST_ONLY_HERE": ""})
    assert refused.value.key == "webhooks.shop.secret_env"
    assert "JR_TEST_ONLY_HERE" in str(refused.value) and "not set or empty" in str(refused.value)


async def test_a_missing_secret_refuses_to_start(store: SqlStore) -> None:
    config = RouterConfig(
        webhooks={
            "shop": WebhookConfig(url="http://127.0.0.1:9/x", secret_env="JR_TEST_UNSET_SECRET")
        }
    )
    with pytest.raises(ConfigError, match="JR_TEST_UNSET_SECRET"):
        build_delivery(store, config)
    assert build_delivery(store, RouterConfig()) is None


# ---- the Router end to end -----------------------------------------------------------------------


async def test_router_delivers_then_purge_then_the_same_key_starts_a_new_job(
    tmp_path: Path, receiver: WebhookReceiver, secret_env: str
) -> None:
    config = RouterConfig(
        tasks={"caption": TaskConfig(certification="none", providers=["a"], side_effects="none")},
        webhooks={"shop": WebhookConfig(url=receiver.url, secret_env=secret_env)},
        outbox=OutboxConfig(poll_interval=0.02, timeout=30.0, claim=60.0),
    )
    url = f"sqlite:///{tmp_path / 'r.db'}"
    providers = {"a": FakeProvider("a")}
    async with Router.open(url, config, providers=providers) as router:
        assert router.deliverer is not None
        first = await router.submit("shop", "order-42", "caption", {"product": "tea"})
        assert (await router.wait(first.id, timeout=60)).state is JobState.SUCCEEDED
        [request] = await receiver.wait_for(1)
        assert request.json["data"]["job_id"] == first.id
        assert verify_signature(SECRET, request.body, request.headers["x-jobrouter-signature"])
        await until(lambda: delivered(router.store, first.id))

        await age_jobs(router.store, 8 * DAY_S)
        purged = await purge(
            router.store.outbox, cutoff_for(config.retention.days), owners=config.webhooks
        )
        assert purged.jobs == 1
        assert await router.find("shop", "order-42") is None

        again = await router.submit("shop", "order-42", "caption", {"product": "tea"})
        assert again.created and again.id != first.id
        assert (await router.wait(again.id, timeout=60)).state is JobState.SUCCEEDED
        second = (await receiver.wait_for(2))[1]
        assert second.json["data"]["job_id"] == again.id
        assert second.event_id != request.event_id
    assert json.loads(request.body)["data"]["idempotency_key"] == "order-42"


async def test_an_event_committed_here_is_sent_at_once_not_at_the_next_poll(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    """Issue 17: the outbox wakes on commit. The poll is an hour: after the deliverer's first
    (empty) round only the wake from the commit can bring the event to the receiver."""
    rounds: list[int] = []
    first_round, second_round = asyncio.Event(), asyncio.Event()
    sender = deliverer(store, receiver, poll_s=3600.0)
    real_round = sender.deliver_due

    async def counted() -> int:
        claimed = await real_round()
        rounds.append(claimed)
        (second_round if first_round.is_set() else first_round).set()
        return claimed

    sender.deliver_due = counted  # type: ignore[method-assign]
    sender.start()
    try:
        await asyncio.wait_for(first_round.wait(), 60.0)
        assert rounds == [0]
        job = await job_in(store, JobState.SUCCEEDED, key="woken")
        # The round's end, not the delivered row: the row commits inside the round, before
        # the round is counted.
        await asyncio.wait_for(second_round.wait(), 60.0)
        assert await _delivered(store, job)
        assert [request.event_id for request in receiver.requests] == [
            (await event_of(store, job)).id
        ]
        assert rounds == [0, 1]
    finally:
        await sender.stop()
    job = await job_in(store, JobState.SUCCEEDED, key="after-stop")  # no deliverer: no wake
    assert len(receiver.requests) == 1


async def _delivered(store: SqlStore, job: Any) -> bool:
    return (await event_of(store, job)).delivered_at is not None
