"""`jobrouter.providers.backoff.set_testing()` is the one test switch, and every retry of the
product obeys it: each former caller (store writes, provider retries and the rate limiter, the
HTTP client, the outbox deliverers, the NATS and PostgreSQL LISTEN reconnects) waits zero while
it is on, and its own wait when it is off. Before, persist and resilience had a switch each,
the client and the outbox none."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tenacity import AsyncRetrying, RetryCallState

from jobrouter import persist
from jobrouter.client import RetryPolicy as ClientRetryPolicy
from jobrouter.client import _RetryableStatus
from jobrouter.delivery import DeliverySettings, decide_delivery
from jobrouter.providers import backoff, resilience
from jobrouter.providers.classify import from_status
from jobrouter.providers.config import RetryPolicy
from jobrouter.providers.resilience import RateLimiter, retrying
from jobrouter.webhook import Outcome


@pytest.fixture(autouse=True)
def _switch_restored() -> Iterator[None]:
    yield
    backoff.set_testing(no_backoff=False)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every asyncio.sleep's delay, recorded and not slept."""
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def record(delay: float, result: Any = None) -> Any:
        waits.append(delay)
        return await real_sleep(0, result)

    monkeypatch.setattr(asyncio, "sleep", record)
    return waits


def failed_state(attempt_number: int, error: BaseException) -> RetryCallState:
    state = RetryCallState(AsyncRetrying(), None, (), {})
    state.attempt_number = attempt_number
    state.set_exception((type(error), error, None))
    return state


def test_the_old_switches_are_the_one_switch() -> None:
    """The names tests used (persist's, resilience's) are the one function, not copies."""
    assert persist.set_testing is backoff.set_testing
    assert resilience.set_testing is backoff.set_testing


@pytest.mark.parametrize("on", [True, False])
def test_store_write_retries_obey_it(on: bool) -> None:
    """Mutant: persist's `_wait` built from tenacity's `wait_random_exponential` again (seen
    failing: a wait while the switch is on)."""
    backoff.set_testing(no_backoff=on)
    waits = [persist._wait(failed_state(8, RuntimeError("lost"))) for _ in range(30)]
    assert (max(waits) == 0.0) is on


@pytest.mark.parametrize("on", [True, False])
async def test_provider_retries_obey_it(on: bool, sleeps: list[float]) -> None:
    """A 429 asking for 60 s: no wait at all when on, the 60 s when off."""
    backoff.set_testing(no_backoff=on)
    errors = [from_status(429, "slow", "p", retry_after=60.0)]

    async def call() -> str:
        if errors:
            raise errors.pop()
        return "done"

    deadline = asyncio.get_running_loop().time() + 3600
    assert await retrying(call, RetryPolicy(attempts=2), deadline=deadline) == "done"
    assert sleeps == ([0.0] if on else [60.0])


@pytest.mark.parametrize("on", [True, False])
async def test_the_rate_limiters_sleep_obeys_it(on: bool, sleeps: list[float]) -> None:
    """Mutant: `admit` sleeping `wait` regardless (seen failing when on)."""
    backoff.set_testing(no_backoff=on)
    limiter = RateLimiter("p", requests_per_minute=1)
    assert limiter.acquire() == 0.0
    limiter._requests.level = 0.999  # type: ignore[union-attr]  # a refill just short of one
    await limiter.admit(budget=120.0)
    assert len(sleeps) >= 1 and (max(sleeps) == 0.0) is on


@pytest.mark.parametrize("on", [True, False])
def test_the_http_clients_retries_obey_it(on: bool) -> None:
    """The client had no switch: both its waits (tenacity's, and the event stream's) now obey."""
    backoff.set_testing(no_backoff=on)
    policy = ClientRetryPolicy(initial=1.0, cap=8.0)
    busy = _RetryableStatus(httpx.Response(503, headers={"Retry-After": "5"}))
    waits = [policy.wait(failed_state(2, busy)), *(policy.backoff(4) for _ in range(30))]
    assert (max(waits) == 0.0) is on


@pytest.mark.parametrize("on", [True, False])
def test_both_outbox_deliverers_retries_obey_it(on: bool) -> None:
    """The webhook poller and the NATS consumer both take `decide_delivery`'s wait."""
    backoff.set_testing(no_backoff=on)
    settings = DeliverySettings(max_tries=5, backoff_initial_s=30.0, backoff_max_s=600.0)
    decision = decide_delivery(Outcome(False, "HTTP 503", 120.0), 2, settings, now=0.0)
    assert decision.delay_s == (0.0 if on else 120.0)


@pytest.mark.parametrize("on", [True, False])
async def test_the_nats_reconnect_obeys_it(
    on: bool, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """NATS unreachable: the reconnect waits the one backoff (its bound 0.5 s, then 1 s, 2 s),
    zero when on. Mutant: the old doubling `delay` back (seen failing when on)."""
    nats = pytest.importorskip("nats")
    from jobrouter.bus_nats import BusSettings, NatsDelivery

    backoff.set_testing(no_backoff=on)
    refusals = 3

    async def connect(**_: Any) -> Any:
        nonlocal refusals
        if refusals == 0:
            raise asyncio.CancelledError  # ends the loop: the waits are what this test reads
        refusals -= 1
        raise OSError("connection refused")

    monkeypatch.setattr(nats, "connect", connect)
    bus = BusSettings(url="nats://127.0.0.1:1")
    delivery = NatsDelivery(None, {}, DeliverySettings(), bus)  # type: ignore[arg-type]
    with pytest.raises(asyncio.CancelledError):
        await delivery._connect()
    assert len(sleeps) == 3
    if on:
        assert sleeps == [0.0, 0.0, 0.0]
    else:
        assert all(
            0.0 <= wait <= bound for wait, bound in zip(sleeps, (0.5, 1.0, 2.0), strict=True)
        )


@pytest.mark.parametrize("on", [True, False])
async def test_the_postgres_listen_reconnect_obeys_it(
    on: bool, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The LISTEN connection lost and PostgreSQL unreachable: the reconnect waits the one
    backoff (bounds 0.5 s, 1 s, 2 s), zero when on. Mutant: its old doubling `delay` back (seen
    failing when on)."""
    from jobrouter.store.pg_listen import Listener

    backoff.set_testing(no_backoff=on)
    refusals = 3
    listener = Listener("postgresql://127.0.0.1:1/none", "postgresql://127.0.0.1:1/none")

    async def connect() -> None:
        nonlocal refusals
        if refusals == 0:
            listener._closed = True  # ends the loop: the waits are what this test reads
            return
        refusals -= 1
        raise OSError("connection refused")

    monkeypatch.setattr(listener, "_connect", connect)
    await listener._reconnect_loop()
    assert len(sleeps) == 3
    if on:
        assert sleeps == [0.0, 0.0, 0.0]
    else:
        assert all(
            0.0 <= wait <= bound for wait, bound in zip(sleeps, (0.5, 1.0, 2.0), strict=True)
        )
