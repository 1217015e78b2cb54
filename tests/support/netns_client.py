"""The client host of tests/chaos/test_netns.py: `python -m tests.support.netns_client ...`,
run inside its network namespace, so every byte it sends crosses the lossy link.

It submits `--intents` intents through `JobClient`, each with its own key (`chaos-<n>`, made
once with the intent). A submit whose retries run out raises `SubmitUnknown`; the program then
does what the client's documentation says to do with one: look the key up (`find`) and, if no
job has it, submit the same intent again, until the intent has a job; then it waits for that
job to settle (`wait`, over the event stream). Meanwhile it probes the round trip to the
router host with ICMP echoes (the loss rule drops TCP only: ICMP sees the queues, not the
drops). Everything it learned goes to `--out` as JSON; the test reads it and the database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from jobrouter.client import JobClient, JobIntent, RetryPolicy, SubmitUnknown, Unavailable
from jobrouter.models import Job

TASK = "chaos"
READY_S = 300.0  # guard: the router host imports and migrates, seconds under load
FOLLOW_S = 300.0  # guard: how long one SubmitUnknown may take to be resolved
SETTLE_S = 300.0  # guard: how long a followed job may take to settle
PROBE_EVERY_S = 0.05
# Tight on purpose: with 2.5% of the packets lost, a submit whose retries all time out
# (SubmitUnknown) must happen in a run, so that following one is exercised.
RETRY = RetryPolicy(attempts=3, initial=0.05, cap=0.5, deadline=10.0)
TIMEOUT_S = 1.0


@dataclass
class Outcome:
    """What the client learned; written as JSON for the test."""

    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> id, created, path
    submit_unknown: int = 0  # SubmitUnknown raised (the first submit and follow-ups)
    follow_errors: Counter[str] = field(default_factory=Counter)  # errors while following
    followed: dict[str, str] = field(default_factory=dict)  # key -> state it settled in
    submit_ms: list[float] = field(default_factory=list)
    rtt_ms: list[float] = field(default_factory=list)
    probes_sent: int = 0
    wall_s: float = 0.0


async def main(args: argparse.Namespace) -> None:
    began = time.monotonic()
    outcome = Outcome()
    await wait_ready(args.base_url)
    probing = asyncio.create_task(probe(args.probe, outcome))
    token = os.environ["JOBROUTER_NETNS_TOKEN"]
    client = JobClient(args.base_url, token, retry=RETRY, timeout=TIMEOUT_S)
    async with client:
        slots = asyncio.Semaphore(args.concurrency)
        intents = [
            JobIntent(TASK, {"n": n, "text": f"item {n}"}, idempotency_key=f"chaos-{n}")
            for n in range(args.intents)
        ]
        await asyncio.gather(*(run_intent(client, intent, slots, outcome) for intent in intents))
    probing.cancel()
    outcome.wall_s = time.monotonic() - began
    args.out.write_text(json.dumps(outcome.__dict__))


async def wait_ready(base_url: str) -> None:
    """Until the router host answers ready (through the lossy link: failures are retried)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=TIMEOUT_S) as http:
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            try:
                if (await http.get("/health/ready")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit(f"the router host was not ready within {READY_S}s")


async def run_intent(
    client: JobClient, intent: JobIntent, slots: asyncio.Semaphore, outcome: Outcome
) -> None:
    async with slots:
        started = time.monotonic()
        try:
            job = await client.submit(intent)
            path = "direct"
        except SubmitUnknown:
            outcome.submit_unknown += 1
            job, path = await follow(client, intent, outcome)
        outcome.submit_ms.append((time.monotonic() - started) * 1000)
        outcome.jobs[intent.idempotency_key] = {"id": job.id, "created": job.created, "path": path}
    if path != "direct":
        settled = await settle(client, job, outcome)
        outcome.followed[intent.idempotency_key] = str(settled.state)


async def settle(client: JobClient, job: Job, outcome: Outcome) -> Job:
    """`wait` until the job settles; a wait whose reads ran out of retries (Unavailable) is
    waited again, as a caller would."""
    async with asyncio.timeout(SETTLE_S):
        while True:
            try:
                return await client.wait(job.id)
            except Unavailable:
                outcome.follow_errors["Unavailable while waiting"] += 1


async def follow(client: JobClient, intent: JobIntent, outcome: Outcome) -> tuple[Job, str]:
    """What the client's docs say to do with a SubmitUnknown: find the key, else submit the
    same intent again; until the intent has its job."""
    async with asyncio.timeout(FOLLOW_S):
        while True:
            try:
                found = await client.find(intent.idempotency_key)
                if found is not None:
                    return found, "found"
                return await client.submit(intent), "resubmitted"
            except SubmitUnknown:
                outcome.submit_unknown += 1
            except Unavailable:  # the lookup's retries ran out: look again
                outcome.follow_errors["Unavailable while finding"] += 1


# ---- the round trip, by ICMP echo ----------------------------------------------------------------


async def probe(target: str, outcome: Outcome) -> None:
    """An ICMP echo to `target` every PROBE_EVERY_S; each reply's round trip in `rtt_ms`."""
    loop = asyncio.get_running_loop()
    ident = os.getpid() & 0xFFFF
    sent: dict[int, float] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as sock:
        sock.setblocking(False)

        def on_reply() -> None:
            packet = sock.recv(2048)
            header = (packet[0] & 0x0F) * 4  # the IP header comes first on a raw socket
            kind, _, _, echo_id, seq = struct.unpack("!BBHHH", packet[header : header + 8])
            if kind == 0 and echo_id == ident and seq in sent:
                outcome.rtt_ms.append((time.monotonic() - sent.pop(seq)) * 1000)

        loop.add_reader(sock.fileno(), on_reply)
        try:
            for seq in range(1 << 16):
                sent[seq] = time.monotonic()
                await loop.sock_sendto(sock, _echo_request(ident, seq), (target, 0))
                outcome.probes_sent += 1
                await asyncio.sleep(PROBE_EVERY_S)
        finally:
            loop.remove_reader(sock.fileno())


def _echo_request(ident: int, seq: int) -> bytes:
    body = struct.pack("!d", time.time())
    header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    checksum = _checksum(header + body)
    return struct.pack("!BBHHH", 8, 0, checksum, ident, seq) + body


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--probe", required=True, help="address to send ICMP echoes to")
    parser.add_argument("--intents", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--out", type=Path, required=True)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
