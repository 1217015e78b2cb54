"""Bounded memory per call, whatever the peer sends (issue 31 item 1), over both transports.

Each hostile shape is called from a process of its own (`tests.providers.hostile_client`), which
reports the growth of its peak RSS over the call and the longest its event loop was blocked: a
1 GiB gzip or deflate bomb (answering 200, and 500), a 2 GiB plain body, a body trickled for
ever. The answer cap here is the default for max_tokens 16: 256 KiB + 1 KiB. Without the cap the
bombs took the process past 1 GiB and blocked the loop for over a second (the mutants named in
each test's docstring were applied and seen failing).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobrouter.providers import bounded_body
from tests.providers.conftest import TRANSPORTS
from tests.providers.fault_server import FaultServer

ROOT = Path(__file__).resolve().parents[2]
RSS_BOUND_KIB = 64 * 1024  # the cap is 257 KiB: tens of MiB are interpreter noise, not a body
# The loop blocked at most 100 ms, counted in the CPU time of its thread between two ticks (a
# wait for a core on a loaded machine is no block); the wall-clock gap only has to stay under a
# second, which an unbounded read (over a second of decompressing on the loop) still crosses.
LOOP_CPU_BOUND = 0.1
LAG_BOUND = 1.0
TRICKLE_DEADLINE = 1.0
CAP = bounded_body.answer_cap(None, 16)

SHAPES: dict[str, dict[str, Any]] = {
    "gzip_bomb_200": {"scenario": {"kind": "bomb", "encoding": "gzip"}},
    "deflate_bomb_200": {"scenario": {"kind": "bomb", "encoding": "deflate"}},
    "gzip_bomb_500": {"scenario": {"kind": "bomb", "encoding": "gzip", "status": 500}},
    "deflate_bomb_500": {"scenario": {"kind": "bomb", "encoding": "deflate", "status": 500}},
    "plain_2gib": {"scenario": {"kind": "huge", "bytes": 1 << 31}},
    "trickled": {
        "scenario": {"kind": "huge", "bytes": 1 << 31, "block": 1024, "pause": 0.05},
        "timeout": TRICKLE_DEADLINE,
    },
}


@pytest.fixture(scope="module", params=TRANSPORTS)
def outcomes(
    request: pytest.FixtureRequest, fault_server_process: FaultServer
) -> Iterator[dict[str, dict[str, Any]]]:
    """Every shape called once through one transport: shape -> what the call cost."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.providers.hostile_client",
            "--transport",
            request.param,
            "--port",
            str(fault_server_process.port),
            "--shapes",
            json.dumps(SHAPES),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    yield {row["shape"]: row for row in rows}
    fault_server_process.reset()


def _bounded(row: dict[str, Any]) -> None:
    assert row["rss_growth_kib"] < RSS_BOUND_KIB, row
    assert row["worst_loop_cpu"] < LOOP_CPU_BOUND, row
    assert row["worst_lag"] < LAG_BOUND, row


@pytest.mark.parametrize("shape", ["gzip_bomb_200", "deflate_bomb_200", "plain_2gib"])
def test_a_success_answer_past_the_cap_is_rejected_and_memory_stays_bounded(
    outcomes: dict[str, dict[str, Any]], shape: str
) -> None:
    """An answer longer than the cap, decoded, is `AnswerTooLarge` (rejected: the provider
    answered and may have acted), naming the cap; reading stopped there. Mutants seen failing:
    native `auto_decompress=True` + `await response.read()` (RSS past 1 GiB, loop blocked
    seconds); litellm transport without the bounded client (litellm's own client reads it
    whole)."""
    row = outcomes[shape]
    assert (row["kind"], row["error"]) == ("rejected", "AnswerTooLarge"), row
    assert f"larger than {CAP} bytes" in row["message"], row
    _bounded(row)


@pytest.mark.parametrize("shape", ["gzip_bomb_500", "deflate_bomb_500"])
def test_an_error_answer_bomb_is_read_only_to_its_limit(
    outcomes: dict[str, dict[str, Any]], shape: str
) -> None:
    """A 500 whose body is a bomb stays what its status proves (rejected, HTTP 500), its body
    decoded only to the error body limit. Mutant seen failing: the error body's `Inflater`
    limit raised to 2 GiB (RSS past 1 GiB)."""
    row = outcomes[shape]
    assert (row["kind"], row["status"]) == ("rejected", 500), row
    _bounded(row)


def test_a_trickled_body_ends_at_the_deadline(outcomes: dict[str, dict[str, Any]]) -> None:
    """A body trickled faster than any inactivity timeout never ends by itself: the call's
    deadline ends it, an outcome unknown (the answer was still arriving). Mutant seen failing:
    the adapter's `asyncio.timeout_at` scope removed (the call ran to the subprocess's
    timeout)."""
    row = outcomes["trickled"]
    assert row["kind"] == "unknown", row
    assert row["seconds"] < TRICKLE_DEADLINE + 5, row
    _bounded(row)
