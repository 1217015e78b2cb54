"""The fault server itself: scenario sequence, per-request override, stats, proxy mode."""

from __future__ import annotations

import http.client
import json
import random
import urllib.error
import urllib.request

from tests.providers.fault_server import FaultServer, start_fault_server


def post_chat(server: FaultServer, scenario: str | None = None) -> int | None:
    """Status code of one chat request, or None when the connection was dropped."""
    headers = {"Content-Type": "application/json"}
    if scenario:
        headers["x-fault-scenario"] = scenario
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    request = urllib.request.Request(
        f"{server.api_base}/chat/completions", data=body, headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            json.loads(response.read())
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError):
        return None


def test_sequence_then_default_and_header_override(fault: FaultServer) -> None:
    fault.control(
        sequence=[{"kind": "status", "status": 503}, "drop_after"],
        default={"kind": "status", "status": 400},
    )
    assert [post_chat(fault) for _ in range(3)] == [503, None, 400]
    assert post_chat(fault, scenario="answer") == 200
    stats = fault.stats()
    assert stats["by_scenario"] == {"status_503": 1, "drop_after": 1, "status_400": 1, "answer": 1}
    assert (stats["total"], stats["completed"], stats["dropped"]) == (4, 2, 1)
    assert stats["last_request"]["body"]["messages"][0]["content"] == "hi"
    assert fault.reset()["total"] == 0


def test_proxy_drops_a_seeded_share_after_the_upstream_answered(fault: FaultServer) -> None:
    share, seed, n = 0.5, 7, 12
    with start_fault_server(
        "--upstream", fault.url, "--drop-share", str(share), "--seed", str(seed)
    ) as proxy:
        outcomes = [post_chat(proxy) for _ in range(n)]
        proxy_stats = proxy.stats()
    rng = random.Random(seed)
    expected_drops = sum(rng.random() < share for _ in range(n))
    assert 0 < expected_drops < n  # the seed exercises both branches
    assert outcomes.count(None) == expected_drops
    assert outcomes.count(200) == n - expected_drops
    assert proxy_stats["dropped"] == expected_drops
    assert fault.stats()["total"] == n  # the upstream answered every request, dropped or not
