"""The webhook deliverer's try, its recording and its stop, told apart where
tests/unit/test_outbox.py only looked at the end result: what `send` returns for each kind of
answer (a late one, a redirect, one that trickles in, a transport error, a Retry-After), what
`_record` makes of it (the wait, the count, the log line), and a `stop` that lands while an
answer is being recorded.

Each test names the mutmut mutants it kills (docs/testing.md, "Mutation testing"); every one
was checked by applying the mutant by hand and seeing the test fail. `OutboxDeliverer.send` is
now `WebhookSender.send` (router/webhook.py), and `next_try_in` is `decide_delivery`
(router/delivery.py); the mutants keep the numbers they had when they were killed."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import time
import weakref
from typing import Any

import httpx
import pytest

import jobrouter.outbox
from jobrouter.outbox import OutboxDeliverer
from jobrouter.states import JobState
from jobrouter.store import SqlStore
from jobrouter.webhook import Outcome, Webhook
from tests.support.outbox_jobs import event_of, job_in
from tests.support.webhook_receiver import WebhookReceiver
from tests.unit.test_outbox import FAST, INITIAL, SECRET, deliverer, no_jitter, sample
from tests.unit.test_outbox import receiver as receiver  # a fixture, used by name
from tests.unit.test_outbox import store as store  # a fixture, used by name

GUARD_S = 60.0  # a ceiling only: every wait below ends on an event


def through(
    store: SqlStore, transport: httpx.AsyncBaseTransport, **changes: Any
) -> OutboxDeliverer:
    """A deliverer whose requests go to `transport` instead of the network."""
    hooks = {"shop": Webhook(owner="shop", url="http://127.0.0.1:9/hook", secret=SECRET)}
    settings = dataclasses.replace(FAST, **changes)
    return OutboxDeliverer(store.outbox, hooks, settings, jitter=no_jitter, transport=transport)


def counts() -> dict[str, float]:
    return {
        outcome: sample("jobrouter_outbox_deliveries_total", outcome=outcome)
        for outcome in ("delivered", "retry", "dead")
    }


def counted_since(before: dict[str, float]) -> dict[str, float]:
    return {outcome: value - before[outcome] for outcome, value in counts().items()}


# ---- what one try returns ------------------------------------------------------------------------


async def test_an_answer_later_than_httpx_default_timeout_but_within_ours_is_delivered(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    """The configured `timeout_s` is the client's too: httpx's own default (5 s per read)
    would give up on a receiver that answers after it but within `timeout_s`. The receiver holds
    the request until the sender has been waiting longer than httpx's default (measured from the
    request's arrival), then answers. Kills `OutboxDeliverer.send` 8 (no `timeout=` given to the
    client: a ReadTimeout after 5 s, a failed try)."""
    async with httpx.AsyncClient() as plain:
        httpx_default = plain.timeout.read
    assert httpx_default is not None and httpx_default < FAST.timeout_s
    receiver.hang_first = 1
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    sender = deliverer(store, receiver)
    round_ = asyncio.create_task(sender.deliver_due())
    try:
        [held] = await receiver.wait_for(1)
        # The answer's earliest time, not a verdict: the client has waited longer than httpx's
        # default by then (checked), and the outcome decides.
        await asyncio.sleep(held.at + httpx_default + 0.5 - time.monotonic())
        assert time.monotonic() - held.at > httpx_default
        receiver.release()
        assert await asyncio.wait_for(round_, GUARD_S) == 1
    finally:
        round_.cancel()
        await sender.stop()
    row = await event_of(store, job)
    assert (row.tries, row.last_error) == (1, None)
    assert row.delivered_at is not None
    assert len(receiver.requests) == 1


async def test_a_redirect_is_a_failed_try_and_is_not_followed(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    """docs/operations.md: "Redirects are not followed": a signed event goes to the URL its
    owner configured and nowhere else. A 307 to another receiver is a failed try, and the other
    receiver gets nothing (the try is recorded when the round returns, after any follow would
    have happened). Kills `OutboxDeliverer.send` 13 (`follow_redirects=True`)."""
    async with WebhookReceiver().running() as elsewhere:
        receiver.redirect_to = elsewhere.url
        job = await job_in(store, JobState.SUCCEEDED, key="order-1")
        sender = deliverer(store, receiver)
        try:
            assert await sender.deliver_due() == 1
        finally:
            await sender.stop()
        assert elsewhere.requests == []
    row = await event_of(store, job)
    assert row.delivered_at is None and row.tries == 1
    assert (row.last_error or "").startswith("HTTP 307"), row.last_error
    assert [r.method for r in receiver.requests] == ["POST"]


async def test_an_answer_that_trickles_in_is_cut_at_the_timeout_of_the_whole_request(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    """A 500 whose body comes one byte every 50 ms never trips httpx's per-read timeout; only
    the bound on the whole request ends the try, as "no answer within", a failed try. The
    body lasts at least 10 s (200 bytes), ten times the timeout. Kills `OutboxDeliverer.send`
    35 (`asyncio.timeout(None)`: the body read to its end, "HTTP 500: xxx..."), 54, 56 (the
    error dropped), 55, 57 (the timed-out try recorded as delivered) and 53 (`delivered` None:
    the same to every caller, which only tests it for truth; told apart by the exact value)."""
    receiver.trickle = 200
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    sender = deliverer(store, receiver, timeout_s=1.0)
    try:
        outcome = await asyncio.wait_for(sender.sender.send(await event_of(store, job)), GUARD_S)
        assert outcome == Outcome(False, "no answer within 1.0s", None)
        assert await asyncio.wait_for(sender.deliver_due(), GUARD_S) == 1
    finally:
        await sender.stop()
    row = await event_of(store, job)
    assert row.delivered_at is None and row.tries == 1
    assert row.last_error == "no answer within 1.0s"


class Refusing(httpx.AsyncBaseTransport):
    """A transport whose every request fails to connect, with a long message."""

    message = "refused: " + "x" * 600

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(self.message, request=request)


async def test_a_transport_error_is_a_failed_try_named_by_its_class_cut_at_500(
    store: SqlStore,
) -> None:
    """What `send` returns when the request fails below HTTP, exactly: not delivered, the
    error's class and message cut at 500 characters, no Retry-After; and the transport given to
    the deliverer is the one used (the URL, port 9 of 127.0.0.1, would refuse with another
    message). Kills `OutboxDeliverer.send` 58-64 (the error dropped, `delivered` true or None,
    `type(None)`, a cut at 501), 5, 9 and `OutboxDeliverer.__init__` 7 (the transport dropped:
    only router/bus_nats.py passes one in production)."""
    job = await job_in(store, JobState.FAILED, key="order-1")
    event = await event_of(store, job)
    sender = through(store, Refusing())
    try:
        outcome = await sender.sender.send(event)
    finally:
        await sender.stop()
    assert outcome == Outcome(False, f"ConnectError: {Refusing.message}"[:500], None)
    assert len(outcome.error) == 500


def reply(status: int, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    """An answer streamed as from the network (`send` reads it with `aiter_raw`)."""
    return httpx.Response(status, headers=headers, stream=httpx.ByteStream(body))


def answering(status: int, headers: dict[str, str]) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: reply(status, b"busy", headers))


@pytest.mark.parametrize(
    ("retry_after", "wait_s"),
    [
        ("120", 120.0),  # the receiver's wait, longer than the backoff
        ("100000", 600.0),  # capped at backoff_max_s
        ("0.01", INITIAL),  # shorter than the backoff: the backoff
        (None, INITIAL),
    ],
)
async def test_a_receivers_retry_after_sets_the_next_try_and_is_logged(
    store: SqlStore, caplog: pytest.LogCaptureFixture, retry_after: str | None, wait_s: float
) -> None:
    """The next try is due after the longer of the backoff and the receiver's Retry-After,
    capped at `backoff_max_s`, and the retry is logged with that wait. `send` returns the
    header's value exactly. Kills `OutboxDeliverer.send` 65 (`delivered` None), 67, 70, 73, 75
    (Retry-After dropped or read under another name), `OutboxDeliverer._record` 26-34 (the
    max/min broken: a TypeError, nothing recorded) and 35 (`if await outbox_retry(...)`: a
    retry not logged). `_record`'s numbers are those of main a6a1ed5; since the wait and the
    line moved into `next_try_in` and `log_retry`: `next_try_in` 11-19, `_record` 26 (the
    Retry-After not passed on), 33 and 45-56 (the line's arguments)."""
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    event = await event_of(store, job)
    sender = through(store, answering(503, headers), backoff_max_s=600.0)
    try:
        outcome = await sender.sender.send(event)
        expected = None if retry_after is None else float(retry_after)
        assert outcome == Outcome(False, "HTTP 503: busy", expected)
        began = time.time()
        with caplog.at_level(logging.WARNING, logger="jobrouter.outbox"):
            assert await sender.deliver_due() == 1
        ended = time.time()
    finally:
        await sender.stop()
    row = await event_of(store, job)
    assert row.tries == 1 and row.last_error == "HTTP 503: busy" and row.claimed_by is None
    assert row.next_attempt_at is not None
    assert began + wait_s <= row.next_attempt_at <= ended + wait_s
    [logged] = [r.getMessage() for r in caplog.records if "again in" in r.getMessage()]
    assert f"(try 1 of 8), again in {wait_s:.1f}s: HTTP 503: busy" in logged


# ---- what a try is counted as --------------------------------------------------------------------


async def test_a_try_that_makes_a_dead_letter_is_counted_dead_and_logged(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Kills `OutboxDeliverer._record` 14, 15 (the outcome label "XXdeadXX", "DEAD"), numbered as
    at main a6a1ed5. Since the line is written by `log_dead`, whose call mutmut mutates (it
    leaves only `log.<level>(` calls alone): `_record` 22, 23 (the labels) and 14-21 (the
    line's arguments: 17, the error None, changes only the line)."""
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    sender = through(store, answering(500, {}), max_tries=1)
    before = counts()
    try:
        with caplog.at_level(logging.ERROR, logger="jobrouter.outbox"):
            assert await sender.deliver_due() == 1
    finally:
        await sender.stop()
    assert counted_since(before) == {"delivered": 0, "retry": 0, "dead": 1}
    [dead] = await store.outbox.dead_letters()
    assert dead.job_id == job.id and dead.tries == 1
    [logged] = [r.getMessage() for r in caplog.records if "dead letter" in r.getMessage()]
    assert logged == (
        f"outbox event {dead.id} (job {job.id}, owner shop) failed 1 times and is a dead "
        "letter: HTTP 500: busy"
    )


async def test_a_retry_whose_claim_was_taken_over_is_counted_and_left_to_the_new_owner(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The claim expired during the try and another process took the event over: this try is
    counted as a retry, the row is the new owner's (untouched here) and no "again in" line is
    logged for a wait this process did not set. Kills `OutboxDeliverer._record` 45, 46 (the
    label "XXretryXX", "RETRY") and 35 (the line logged for the lost claim), numbered as at main
    a6a1ed5; 43, 44 and 33 since `next_try_in` and `log_retry`."""
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")

    async def taken_over_meanwhile(request: httpx.Request) -> httpx.Response:
        async with store.connector.write() as tx:
            await tx.execute("UPDATE outbox SET claimed_by = 'another-process'", {})
        return reply(500, b"no")

    sender = through(store, httpx.MockTransport(taken_over_meanwhile))
    before = counts()
    try:
        with caplog.at_level(logging.WARNING, logger="jobrouter.outbox"):
            assert await sender.deliver_due() == 1
    finally:
        await sender.stop()
    assert counted_since(before) == {"delivered": 0, "retry": 1, "dead": 0}
    row = await event_of(store, job)
    assert (row.tries, row.last_error, row.claimed_by) == (0, None, "another-process")
    assert not [r for r in caplog.records if "again in" in r.getMessage()]


# ---- the loop and its stop -----------------------------------------------------------------------


async def test_after_a_full_batch_the_next_round_follows_at_once(
    store: SqlStore, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three events due, batches of two, a poll of an hour: the loop first waits only after a
    round that was not full, so both rounds come before its first wait. Kills
    `OutboxDeliverer._run` 5 (`claimed <= batch`: a wait of one poll after a full batch)."""
    for n in range(3):  # before start(): no commit wakes the deliverer
        await job_in(store, JobState.SUCCEEDED, key=f"order-{n}")
    sender = deliverer(store, receiver, batch=2, poll_s=3600.0)
    rounds: list[int] = []
    rounds_at_first_wait: list[int] = []
    waiting = asyncio.Event()
    real_round, real_wait = sender.deliver_due, jobrouter.outbox.wait_event

    async def counted_round() -> int:
        claimed = await real_round()
        rounds.append(claimed)
        return claimed

    async def noted_wait(event: asyncio.Event, timeout_s: float) -> bool:
        if not waiting.is_set():
            rounds_at_first_wait.extend(rounds)
            waiting.set()
        return await real_wait(event, timeout_s)

    sender.deliver_due = counted_round  # type: ignore[method-assign]
    monkeypatch.setattr(jobrouter.outbox, "wait_event", noted_wait)
    sender.start()
    try:
        await asyncio.wait_for(waiting.wait(), GUARD_S)
    finally:
        await sender.stop()
    assert rounds_at_first_wait == [2, 1]
    assert len(receiver.delivered_ids) == 3


async def test_stop_while_an_answer_is_being_recorded_waits_for_it(
    store: SqlStore, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`stop` finds an answer's recording still running after the loop has ended (its row write
    waits for the loop's end): it waits for that recording, which writes and counts the
    delivery, then hands the claims back. Kills `OutboxDeliverer.stop` 5, 6
    (`asyncio.wait(None)`, `set(None)`: a ValueError or TypeError out of `stop`, claims kept)."""
    job = await job_in(store, JobState.SUCCEEDED, key="order-1")
    writing, loop_ended = asyncio.Event(), asyncio.Event()
    real_write = store.outbox.outbox_delivered

    async def write_after_the_loop_ended(event_id: str) -> Any:
        writing.set()
        await loop_ended.wait()
        return await real_write(event_id)

    monkeypatch.setattr(store.outbox, "outbox_delivered", write_after_the_loop_ended)
    sender = deliverer(store, receiver)
    before = counts()
    sender.start()
    try:
        await asyncio.wait_for(writing.wait(), GUARD_S)
        assert sender._loop is not None
        sender._loop.add_done_callback(lambda _: loop_ended.set())  # runs before stop() resumes
    finally:
        await sender.stop()
    assert loop_ended.is_set()
    assert counted_since(before) == {"delivered": 1, "retry": 0, "dead": 0}
    row = await event_of(store, job)
    assert row.delivered_at is not None and row.claimed_by is None


async def test_a_stopped_deliverer_is_not_kept_by_the_store(
    store: SqlStore, receiver: WebhookReceiver
) -> None:
    """`stop` unregisters the deliverer from the store's write notices: the store holds no
    reference to a stopped deliverer (one kept per start and stop, each woken by every outbox
    write, otherwise). Kills `OutboxDeliverer.stop` 1 (`forget_outbox(None)`)."""
    sender = deliverer(store, receiver)
    sender.start()
    await sender.stop()
    gone = weakref.ref(sender)
    del sender
    gc.collect()
    assert gone() is None
