"""Chaos on a real network: test hosts in network namespaces (tests/support/netns.py).

    client --(2.5% TCP loss, tbf queues)-- router: `jobrouter serve` --(cut mid-run)-- database
                                           worker: `jobrouter worker` ----------------/

Four hosts, each a namespace made by the test, linked by veth pairs; the database host runs a
PostgreSQL cluster of its own (tests/support/netns_postgres.py). Each router process calls a
provider beside it (the fault server, answering at once, on its host's loopback), so cutting a
link cuts exactly that link. The client host submits the intents through `JobClient`
(tests/support/netns_client.py); every TCP packet arriving at either end of its link is
dropped with probability 2.5% (nftables), and both ends' egress go through a token bucket
(tbf), behind which packets queue: netem, which would delay every packet by a set amount, is
not in this kernel, so the delay is queueing delay, measured by ICMP echoes during the run.

The host partitioned from the database is the router host: every job submitted to `jobrouter
serve` is created claimed by that process and run by its own workers (router/engine.py), so
it is the worker host that holds the work; the `jobrouter worker` host gets a job only once
its claim expired. Mid-run, once the router host holds attempts in flight, its link to the
database host drops every packet (nftables, both ends) until the leader has swept the attempts
it stranded to `unknown` and the worker host has taken over every open job it held; then the
link heals. Meanwhile the client's submits fail (SubmitUnknown) and are followed. At the end,
read from the database through its Unix socket (the test itself is on no link):

- exactly as many jobs as intents, one per key, no two with one input (0 duplicates), each the
  job the client was given (0 lost);
- every `SubmitUnknown` was followed (`find`, else the same intent again) to its job, which
  settled; every job settled;
- one winner per succeeded job, one terminal event per terminal job, no timeout recorded as
  `failed`, no attempt left `started` (the checks of tests/chaos/test_chaos.py).

The count is `JOBROUTER_NETNS_INTENTS` (default 5,000; .ci/run sets 1,000 to fit CI's time).
Skipped, with the reason, only where this machine cannot make network namespaces; a missing
`nft` fails (.ci/run installs it). Figures: docs/operations.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobrouter.store import SqlStore, open_store
from tests.chaos.test_chaos import OPEN_SQL, check_attempts, check_jobs, gather_facts, wait_until
from tests.support.netns import Host, Lab, Link, NamespacesUnavailable, check_namespaces
from tests.support.netns_postgres import PostgresHost
from tests.support.netns_processes import Process, Processes

INTENTS = int(os.environ.get("JOBROUTER_NETNS_INTENTS", "5000"))
CONCURRENCY = 32
OWNER = "chaos"
LOSS_PER_MILLE = 25
TBF = {"rate": "4mbit", "burst": "4kb", "latency": "400ms"}
# Every job submitted to `jobrouter serve` is created claimed by it (router/engine.py): the
# router host runs them all, and the worker host gets a job only once its claim expired.
ROUTER_WORKERS = 32
WORKER_WORKERS = 16
HTTP_PORT = 8000
CUT_AFTER = 50  # attempts the router host finished before its link to the database is cut
# Guards against a hang only (a 2-core machine under load); nothing is decided by them.
STARTUP_S = 300.0
STALL_S = 120.0
BANNER = "Ctrl-C to stop"

CONFIG = """
[database]
url = "{url}"
command_timeout = 10

[certification]
required = false

[engine]
workers = {workers}
claim = 3
lease = 2
poll_interval = 0.2
sweep_interval = 0.5

[leader]
heartbeat = 1

[breaker]
cooldown = 1
probe_timeout = 3

[providers.primary]
model = "openai/chaos-primary"
api_base = "{api_base}"
transport = "openai"
structured_output = "none"
timeout = {{connect = 1, read = 2}}
retry = {{attempts = 2, initial = 0.05, max = 0.2}}

[providers.fallback]
model = "openai/chaos-fallback"
api_base = "{api_base}"
transport = "openai"
structured_output = "none"
timeout = {{connect = 1, read = 2}}
retry = {{attempts = 2, initial = 0.05, max = 0.2}}

[tasks.chaos]
providers = ["primary", "fallback"]
side_effects = "none"
certification = "none"
max_attempts = 2
deadline = 600
"""


# ---- the hosts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Network:
    lab: Lab
    client: Host
    router: Host
    worker: Host
    database: Host
    client_link: Link  # client (a) - router (b): lossy, shaped
    router_link: Link  # router (a) - database (b)
    worker_link: Link  # worker (a) - database (b): partitioned mid-run


@pytest.fixture
def network() -> Iterator[Network]:
    """The four hosts and their links; all of it removed afterwards, whatever happened."""
    try:
        check_namespaces()
    except NamespacesUnavailable as exc:
        pytest.skip(f"this machine cannot make network namespaces: {exc}")
    lab = Lab()
    try:
        client, router, worker, database = (
            lab.host(role) for role in ("client", "router", "worker", "db")
        )
        net = Network(
            lab,
            client,
            router,
            worker,
            database,
            lab.link(client, router),
            lab.link(router, database),
            lab.link(worker, database),
        )
        lab.lose(net.client_link, LOSS_PER_MILLE)
        lab.shape(net.client_link, **TBF)
        yield net
    finally:
        left = lab.close()
        assert not left, f"the lab was not cleaned up: {left}"


@pytest.fixture
def postgres(network: Network) -> Iterator[PostgresHost]:
    addresses = [network.router_link.b.address, network.worker_link.b.address]
    cluster = PostgresHost.start(network.database, addresses, network.lab.prefix)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def store(postgres: PostgresHost) -> AsyncIterator[SqlStore]:
    """The test's own view of the database (migrated here), through the Unix socket."""
    opened = await open_store(postgres.socket_url())
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    started = Processes(tmp_path)
    try:
        yield started
    finally:
        started.close()


async def start_router_process(
    processes: Processes,
    host: Host,
    name: str,
    database_url: str,
    command: list[str],
    workers: int,
) -> Process:
    """A provider (the fault server) on `host`'s loopback, then `jobrouter <command>` there."""
    provider = processes.start(
        host, f"{name}-provider", [sys.executable, "-m", "tests.providers.fault_server"]
    )
    port = (await processes.wait_for_line(provider, "FAULT_SERVER_PORT=")).split("=", 1)[1]
    config = processes.folder / f"{name}.toml"
    api_base = f"http://127.0.0.1:{int(port)}/v1"
    config.write_text(CONFIG.format(url=database_url, api_base=api_base, workers=workers))
    args = [sys.executable, "-m", "jobrouter", *command, "--config", str(config)]
    return processes.start(host, name, args)


# ---- the partition -----------------------------------------------------------------------------


@dataclass
class Partition:
    cuts: int = 0
    stranded: int = 0  # the router host's attempts left `started` by the cut that held
    swept_unknown: int = 0  # of those, recorded `unknown` by the leader's sweep
    dropped: int = 0  # packets the partition dropped
    jobs_at_cut: int = 0
    held_jobs: int = 0  # open jobs claimed by the router host at the cut
    lasted_s: float = 0.0


async def scalar(store: SqlStore, sql: str, **params: Any) -> int:
    row = await store.connector.fetchone(sql, params)
    return int(row["n"]) if row else 0


FINISHED_BY = "SELECT COUNT(*) AS n FROM attempts WHERE worker {op} :worker AND state <> 'started'"
IN_STATE = (
    "SELECT COUNT(*) AS n FROM attempts WHERE state = :state "
    "AND id IN (SELECT value FROM json_array_elements_text(CAST(:ids AS json)))"
)
HELD_OPEN = (
    "SELECT COUNT(*) AS n FROM jobs WHERE claimed_by = :worker AND state IN ('queued', 'running')"
)


async def finished(store: SqlStore, worker_id: str, *, by_it: bool) -> int:
    """Attempts finished by the worker host's process (`by_it`) or by every other one."""
    sql = FINISHED_BY.format(op="=" if by_it else "<>")
    return await scalar(store, sql, worker=worker_id)


async def in_state(store: SqlStore, ids: list[str], state: str) -> int:
    return await scalar(store, IN_STATE, ids=json.dumps(ids), state=state)


async def router_worker_id(store: SqlStore, standby: str) -> str:
    """The router host's worker id: the one process besides the worker host's."""
    rows = await store.connector.fetchall(
        "SELECT DISTINCT worker FROM attempts WHERE worker <> :standby", {"standby": standby}
    )
    assert len(rows) == 1, f"expected one router process, found {rows}"
    return str(rows[0]["worker"])


async def partition_mid_run(network: Network, store: SqlStore, standby: str) -> Partition:
    """Cut the router host from the database once it holds attempts; heal once the leader
    swept what it stranded and the worker host (`standby`) took over every open job it held.
    A cut that strands nothing (it had just finished all it held) is healed and tried again
    once it is back at work."""
    facts = Partition()
    link = network.router_link
    while True:
        target = CUT_AFTER * (facts.cuts + 1)
        await until_true(
            lambda: finished(store, standby, by_it=False),
            lambda n, target=target: n >= target,
            "the router host at work",
        )
        network.lab.partition(link)
        cut_at = time.monotonic()
        facts.cuts += 1
        facts.jobs_at_cut = await scalar(store, "SELECT COUNT(*) AS n FROM jobs")
        router_id = await router_worker_id(store, standby)
        rows = await store.connector.fetchall(
            "SELECT id FROM attempts WHERE worker = :worker AND state = 'started'",
            {"worker": router_id},
        )
        held = [row["id"] for row in rows]
        if held:
            break
        network.lab.heal(link)
    facts.held_jobs = await scalar(store, HELD_OPEN, worker=router_id)
    await until_true(
        lambda: in_state(store, held, "started"),
        lambda n: n == 0,
        "stranded attempt swept",
        store,
    )
    await until_true(
        lambda: scalar(store, HELD_OPEN, worker=router_id),
        lambda n: n == 0,
        "job of the router host taken over",
        store,
    )
    facts.dropped = network.lab.partition_drops(link)
    network.lab.heal(link)
    facts.lasted_s = round(time.monotonic() - cut_at, 1)
    facts.stranded = len(held)
    facts.swept_unknown = await in_state(store, held, "unknown")
    return facts


async def until_true(
    read: Callable[[], Awaitable[int]],
    holds: Callable[[int], bool],
    what: str,
    store: SqlStore | None = None,
) -> None:
    """Poll `read` until `holds(value)`: a guard against a hang only (STALL_S); with `store`,
    the failure shows the database's sessions."""
    deadline = time.monotonic() + STALL_S
    while not holds(value := await read()):
        if time.monotonic() > deadline:
            sessions = await describe_sessions(store) if store is not None else ""
            raise AssertionError(f"no {what} within {STALL_S}s (last read: {value}){sessions}")
        await asyncio.sleep(0.05)


async def describe_sessions(store: SqlStore) -> str:
    """The server's sessions in a transaction, for a failure message (read once, on failure)."""
    rows = await store.connector.fetchall(
        "SELECT pid, client_addr::text AS client, state, wait_event_type AS waits, "
        "round(extract(epoch FROM now() - xact_start)) AS tx_s, left(query, 80) AS query "
        "FROM pg_stat_activity WHERE xact_start IS NOT NULL ORDER BY xact_start",
        {},
    )
    return "\nsessions in a transaction:\n" + "\n".join(str(dict(row)) for row in rows)


# ---- the test ----------------------------------------------------------------------------------


@pytest.mark.timeout(1200)  # a guard against a hang (see STARTUP_S, STALL_S)
async def test_intents_through_a_lossy_link_and_a_partitioned_worker_make_one_job_each(
    network: Network,
    postgres: PostgresHost,
    store: SqlStore,
    processes: Processes,
    tmp_path: Path,
    record_testsuite_property: Any,
) -> None:
    """Mutants killed (applied by hand): pooled PostgreSQL sessions without TCP keepalive
    (`SERVER_KEEPALIVE` left out of `session_settings`, router/store/postgres.py) or without
    both it and `idle_in_transaction_session_timeout`: the partitioned router host's sessions
    keep their row locks and the leader's sweep waits on them ("no stranded attempt swept");
    `JobClient.submit` sending a fresh Idempotency-Key on each try: two jobs for an intent."""
    began = time.monotonic()
    token, _ = await store.tokens.create_token(OWNER)
    serve_at = network.client_link.b.address
    router = await start_router_process(
        processes,
        network.router,
        "router",
        postgres.url(network.router_link.b.address),
        ["serve", "--host", serve_at, "--port", str(HTTP_PORT)],
        ROUTER_WORKERS,
    )
    worker = await start_router_process(
        processes,
        network.worker,
        "worker",
        postgres.url(network.worker_link.b.address),
        ["worker", "--grace", "2"],
        WORKER_WORKERS,
    )
    out = tmp_path / "client.json"
    client = processes.start(
        network.client,
        "client",
        [
            sys.executable,
            "-m",
            "tests.support.netns_client",
            "--base-url",
            f"http://{serve_at}:{HTTP_PORT}",
            "--probe",
            serve_at,
            "--intents",
            str(INTENTS),
            "--concurrency",
            str(CONCURRENCY),
            "--out",
            str(out),
        ],
        JOBROUTER_NETNS_TOKEN=token,
    )
    worker_id = (await processes.wait_for_line(worker, BANNER)).split()[1]
    partitioning = asyncio.create_task(partition_mid_run(network, store, worker_id))
    waiting = asyncio.create_task(exited(client))
    try:
        await asyncio.wait([partitioning, waiting], return_when=asyncio.FIRST_EXCEPTION)
        if partitioning.done():
            partitioning.result()  # a failed partition first: it says why the client hangs
        await waiting
        assert client.popen.returncode == 0, f"the client failed: {client.tail()}"
        partition = await partitioning
    finally:
        for task in (partitioning, waiting):
            task.cancel()
    outcome = json.loads(out.read_text())
    await wait_until(store, "every job settled and no attempt open", OPEN_SQL)
    settled_s = time.monotonic() - began
    lost_packets = network.lab.lost_packets(network.client_link)
    tbf_drops = network.lab.shaper_drops(network.client_link)
    codes = {process.name: processes.stop(process) for process in (router, worker)}
    facts = await gather_facts(store)
    distinct_inputs = await scalar(store, "SELECT COUNT(DISTINCT input) AS n FROM jobs")

    paths = Counter(job["path"] for job in outcome["jobs"].values())
    summary = {
        "intents": INTENTS,
        "jobs": len(facts.jobs),
        "duplicates": len(facts.jobs) - distinct_inputs,
        "jobs_by_state": dict(Counter(job["state"] for job in facts.jobs.values())),
        "attempts_by_state": dict(Counter(a["state"] for a in facts.attempts)),
        "replayed_answers": sum(not job["created"] for job in outcome["jobs"].values()),
        "submit_unknown": outcome["submit_unknown"],
        "followed_by": {path: n for path, n in paths.items() if path != "direct"},
        "follow_errors": outcome["follow_errors"],
        "tcp_packets_dropped": lost_packets,
        "tbf_drops": tbf_drops,
        "rtt_ms": quantiles(outcome["rtt_ms"]),
        "probes_unanswered": outcome["probes_sent"] - len(outcome["rtt_ms"]),
        "submit_ms": quantiles(outcome["submit_ms"]),
        "partition": partition.__dict__,
        "client_s": round(outcome["wall_s"], 1),
        "settled_s": round(settled_s, 1),
    }
    print(f"\nnetns chaos summary: {json.dumps(summary, sort_keys=True)}")
    for key, value in summary.items():
        record_testsuite_property(f"netns_{key}", json.dumps(value))

    submitted = {key: job["id"] for key, job in outcome["jobs"].items()}
    check_jobs(facts, submitted, INTENTS)
    assert distinct_inputs == INTENTS, "two jobs for one intent"
    check_attempts(facts)
    check_followed(outcome, facts.jobs)
    # The network did what the test says it did.
    assert lost_packets > 0, "the lossy link dropped nothing"
    assert partition.stranded > 0 and partition.dropped > 0, partition
    assert partition.jobs_at_cut < INTENTS, "the partition came after the last submit"
    assert all(code == 0 for code in codes.values()), f"not stopped cleanly: {codes}"


async def exited(process: Process) -> None:
    """Until the process exits (the client has its own guards; this one is for a hang)."""
    deadline = time.monotonic() + STARTUP_S + 10 * STALL_S
    while process.popen.poll() is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"{process.name} still runs: {process.tail()}")
        await asyncio.sleep(0.1)


def check_followed(outcome: dict[str, Any], jobs: dict[str, dict[str, Any]]) -> None:
    """Every intent whose submit raised SubmitUnknown got its job and waited for it to settle;
    the state it saw is the job's."""
    followed = {key for key, job in outcome["jobs"].items() if job["path"] != "direct"}
    assert set(outcome["followed"]) == followed, "a SubmitUnknown not followed to its end"
    for key in followed:
        job = jobs[outcome["jobs"][key]["id"]]
        assert outcome["followed"][key] == job["state"], (key, job["state"])
    if outcome["submit_unknown"]:
        assert followed, "SubmitUnknown raised but no intent followed"


def quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(share: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 1)

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": round(ordered[-1], 1)}
