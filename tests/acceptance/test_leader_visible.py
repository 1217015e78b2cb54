"""The leader as operators see it: `/health/ready` names it, `/metrics` shows
`jobrouter_leader` 1 in its process. (SQLite: the process is its own leader; the election
between processes is in test_leader.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from jobrouter import Router
from jobrouter.config import RouterConfig
from jobrouter.http.app import create_app

WAIT_S = 30.0


async def test_ready_and_metrics_show_the_leader(tmp_path: Path) -> None:
    async with Router.open(f"sqlite:///{tmp_path / 'jobs.db'}", RouterConfig()) as router:
        assert router.leader is not None and router.engine is not None
        async with asyncio.timeout(WAIT_S):
            while not router.leader.is_leader:
                router.leader.changed.clear()
                await router.leader.changed.wait()
        transport = httpx.ASGITransport(app=create_app(router))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            ready = (await http.get("/health/ready")).json()
            metrics = (await http.get("/metrics")).text
    assert ready["status"] == "ready"
    assert ready["leader"] == router.engine.worker_id
    assert "\njobrouter_leader 1.0\n" in metrics
    assert 'jobrouter_leader_changes_total{change="elected"}' in metrics


async def test_a_router_without_workers_names_no_leader(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    async with Router.open(url, RouterConfig(), run_workers=False) as router:
        transport = httpx.ASGITransport(app=create_app(router))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            ready = (await http.get("/health/ready")).json()
    assert router.leader is None and ready["leader"] is None
