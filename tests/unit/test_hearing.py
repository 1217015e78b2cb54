"""The worker's hearing modes (router/hearing.py): every mode against every claim outcome."""

from __future__ import annotations

import pytest

from router.hearing import BUSY_POLL_S, Hearing

L, B, K = Hearing.LISTEN, Hearing.BUSY, Hearing.BACKOFF
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


@pytest.mark.parametrize(("mode", "claimed", "woken"), list(TABLE))
def test_every_mode_and_claim_outcome(mode: Hearing, claimed: int, woken: bool) -> None:
    assert mode.after(claimed, woken) is TABLE[(mode, claimed, woken)]


def test_only_listen_hears_and_busy_polls_fast() -> None:
    assert [m.paused for m in Hearing] == [False, True, True]
    assert B.timeout(0.5) == BUSY_POLL_S and L.timeout(0.5) == K.timeout(0.5) == 0.5
    assert B.timeout(0.02) == 0.02  # never slower than the configured poll
