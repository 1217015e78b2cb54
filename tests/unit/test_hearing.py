"""The worker's hearing modes (router/hearing.py): every mode against every claim outcome."""

from __future__ import annotations

import pytest

from router.hearing import BUSY_POLL_S, Hearing

L, B, K, A = Hearing.LISTEN, Hearing.BUSY, Hearing.BACKOFF, Hearing.AWAIT
FULL = -1  # no free slot: nothing claimed, nothing tried

# (mode, claimed, woken) -> next mode
TABLE = {
    (L, FULL, False): L,
    (L, FULL, True): L,
    (L, 0, False): L,
    (L, 0, True): K,
    (L, 1, False): L,
    (L, 1, True): L,
    (L, 2, False): B,
    (L, 5, True): B,
    (B, FULL, False): B,
    (B, 0, False): L,
    (B, 0, True): L,
    (B, 1, False): B,
    (B, 3, True): B,
    (K, FULL, False): K,
    (K, 0, False): K,
    (K, 0, True): K,
    (K, 1, False): L,
    (K, 1, True): L,
    (K, 2, False): B,
    (K, 7, True): B,
}


# Where claims wait on the server (PostgreSQL): the quiet mode is AWAIT, which hears nothing
# (its claim is the wake-up) and loses no race (the wait locks the job it found), so a worker
# is only ever awaiting or busy. `woken` is always False there (nothing is heard).
AWAITING = {
    (A, FULL): A,
    (A, 0): A,
    (A, 1): A,
    (A, 2): B,
    (A, 6): B,
    (B, FULL): B,
    (B, 0): A,
    (B, 1): B,
    (B, 4): B,
}


@pytest.mark.parametrize(("mode", "claimed", "woken"), list(TABLE))
def test_every_mode_and_claim_outcome(mode: Hearing, claimed: int, woken: bool) -> None:
    assert mode.after(claimed, woken) is TABLE[(mode, claimed, woken)]


@pytest.mark.parametrize(("mode", "claimed"), list(AWAITING))
def test_a_worker_whose_claims_wait_on_the_server(mode: Hearing, claimed: int) -> None:
    assert mode.after(claimed, False, quiet=A) is AWAITING[(mode, claimed)]


def test_only_listen_hears_and_busy_polls_fast() -> None:
    assert [m.paused for m in Hearing] == [False, True, True, True]
    assert B.timeout(0.5) == BUSY_POLL_S and L.timeout(0.5) == K.timeout(0.5) == 0.5
    assert B.timeout(0.02) == 0.02  # never slower than the configured poll


def test_an_awaiting_worker_claims_at_once_unless_its_last_claim_could_not_run() -> None:
    """Its claim waits on the server, so it does not wait before it; after a claim that could
    not run (no free slot, or a failure) it rests `poll_s` instead of spinning."""
    assert A.timeout(0.5) == 0.0
    assert A.timeout(0.5, rest=True) == 0.5
    assert B.timeout(0.5, rest=True) == BUSY_POLL_S
