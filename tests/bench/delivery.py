"""Delivery benchmark: completion events to a webhook through the database outbox vs through
NATS JetStream (`[delivery] nats_url`), on SQLite or PostgreSQL.

    python -m tests.bench.delivery                         # SQLite, 1000 + 200 events, 3 rounds
    python -m tests.bench.delivery --db postgres --rounds 1

Two phases per mode and round, each on a fresh database (and, for NATS, a fresh stream):
- throughput: `--events` completed jobs wait in the outbox; delivery starts; events/s is the
  count over the time from the start to the last arrival at the webhook;
- latency: with delivery running, `--trickle` jobs complete one by one at `--rate` per second;
  latency is from the event's creation (the job's terminal commit) to its arrival at the webhook.
The webhook is the tests' uvicorn receiver in this process (both modes alike). Both modes poll
the outbox every `--poll` seconds (the relay does too); prints a table and the load average,
writes bench-results/delivery.json. Not a test: nothing here asserts timings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobrouter.bus_nats import BusSettings, NatsDelivery
from jobrouter.delivery import DeliverySettings
from jobrouter.fleet import Delivery
from jobrouter.outbox import OutboxDeliverer
from jobrouter.store import SqlStore, open_store
from jobrouter.webhook import Webhook
from tests.store.pg import create_database, drop_database
from tests.support.nats_bus import delete_stream, own_bus
from tests.support.outbox_jobs import succeeded_events
from tests.support.webhook_receiver import WebhookReceiver

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Plan:
    db: str
    events: int
    trickle: int
    rate: float
    poll: float
    batch: int


async def fresh_store(plan: Plan) -> tuple[SqlStore, str]:
    if plan.db == "postgres":
        url = await create_database()
    else:
        url = f"sqlite:///{tempfile.mkdtemp(prefix='jobrouter-delivery-')}/bench.db"
    return await open_store(url), url


def make_delivery(mode: str, store: SqlStore, url: str, plan: Plan, bus: BusSettings) -> Delivery:
    hooks = {"shop": Webhook("shop", url, b"bench-secret")}
    settings = DeliverySettings(timeout_s=10.0, claim_s=60.0, poll_s=plan.poll, batch=plan.batch)
    if mode == "outbox":
        return OutboxDeliverer(store.outbox, hooks, settings)
    return NatsDelivery(store.outbox, hooks, settings, bus)


async def completed(store: SqlStore, prefix: str, count: int) -> dict[str, float]:
    """`count` jobs made terminal (each with its outbox event); event id -> its created_at."""
    events = await succeeded_events(store, count, prefix=prefix)
    return {event.id: event.created_at for event in events}


async def one_round(mode: str, plan: Plan) -> dict[str, Any]:
    store, db_url = await fresh_store(plan)
    bus = own_bus("jrbench")
    clock = time.time() - time.monotonic()  # receiver arrivals are monotonic: to wall time
    try:
        async with WebhookReceiver().running() as receiver:
            backlog = await completed(store, "b", plan.events)
            delivery = make_delivery(mode, store, receiver.url, plan, bus)
            began = time.monotonic()
            delivery.start()
            try:
                await receiver.wait_for(plan.events, within=600)
                drained = max(r.at for r in receiver.requests[: plan.events]) - began
                arrivals_before = len(receiver.requests)
                created = {}
                for n in range(plan.trickle):
                    created.update(await completed(store, f"t{n}-", 1))
                    await asyncio.sleep(1.0 / plan.rate)
                await receiver.wait_for(arrivals_before + plan.trickle, within=600)
            finally:
                await delivery.stop()
            first_arrival = {}
            for request in receiver.requests:
                first_arrival.setdefault(request.event_id, request.at + clock)
            latencies = sorted((first_arrival[i] - created[i]) * 1000 for i in created)
            duplicates = len(receiver.requests) - len(receiver.delivered_ids)
            assert set(backlog) | set(created) == receiver.delivered_ids
    finally:
        await store.close()
        if plan.db == "postgres":
            await drop_database(db_url)
        if mode == "nats":
            await delete_stream(bus)
    return {
        "mode": mode,
        "events_per_s": plan.events / drained,
        "latency_p50_ms": statistics.median(latencies),
        "latency_p95_ms": latencies[int(0.95 * (len(latencies) - 1))],
        "latency_p99_ms": latencies[int(0.99 * (len(latencies) - 1))],
        "duplicates": duplicates,
    }


async def main(plan: Plan, rounds: int, modes: list[str]) -> list[dict[str, Any]]:
    results = []
    for round_no in range(rounds):
        for mode in modes:
            result = await one_round(mode, plan)
            result["round"] = round_no + 1
            print(json.dumps(result), flush=True)
            results.append(result)
    return results


def table(results: list[dict[str, Any]], plan: Plan, load: tuple[float, ...]) -> str:
    lines = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {plan.db}, "
        f"{plan.events} backlog events, {plan.trickle} trickled at {plan.rate:g}/s, poll "
        f"{plan.poll:g}s, batch {plan.batch}; load average before/after: "
        f"{load[0]:.2f} / {load[1]:.2f} (2 cores, shared)",
        "",
        "| delivery | events/s (median, range) | latency p50 ms | p95 ms | p99 ms | duplicates |",
        "|---|---|---|---|---|---|",
    ]
    for mode in dict.fromkeys(r["mode"] for r in results):
        rows = [r for r in results if r["mode"] == mode]
        rates = sorted(r["events_per_s"] for r in rows)
        mid = sorted(rows, key=lambda r: r["events_per_s"])[len(rows) // 2]
        lines.append(
            f"| {mode} | {statistics.median(rates):.0f} ({rates[0]:.0f} to "
            f"{rates[-1]:.0f}) | {mid['latency_p50_ms']:.1f} | "
            f"{mid['latency_p95_ms']:.1f} | {mid['latency_p99_ms']:.1f} | "
            f"{sum(r['duplicates'] for r in rows)} |"
        )
    return "\n".join(lines)


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--trickle", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--poll", type=float, default=0.1)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="outbox,nats")
    args = parser.parse_args()
    plan = Plan(args.db, args.events, args.trickle, args.rate, args.poll, args.batch)
    before = os.getloadavg()[0]
    results = asyncio.run(main(plan, args.rounds, args.modes.split(",")))
    after = os.getloadavg()[0]
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    (out / "delivery.json").write_text(
        json.dumps({"plan": plan.__dict__, "load": [before, after], "runs": results}, indent=2)
    )
    print(table(results, plan, (before, after)))


if __name__ == "__main__":
    cli()
