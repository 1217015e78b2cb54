"""One benchmark scenario, run in its own process (so its peak memory is its own).

    python -m tests.bench.scenarios --scenario sqlite --concurrency 64 --jobs 2000 --stub-port P

Scenarios: litellm (direct acompletion), litellm_router (litellm.Router with a fallback),
openai_http (the product's native transport, `jobrouter.providers.openai_http.OpenAIHttpProvider`,
called directly), sqlite (jobrouter, workers in process), postgres1 / postgres2 (jobrouter
submitting from this process, one or two `jobrouter worker` processes running the jobs); each
jobrouter scenario with the suffix `_openai` has its providers configured with `transport =
"openai"` (no litellm in any process). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.bench import cpu, profile_summary, statements
from tests.bench.workers import start_workers, stop_workers

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

MESSAGES = [{"role": "user", "content": '{"product":"Saffron tea","tone":"warm"}'}]
Call = Callable[[int], Awaitable[None]]


async def drive(
    call: Call,
    jobs: int,
    concurrency: int,
    stub_pid: int | None,
    started: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run `jobs` calls, `concurrency` at a time, after 20 warm-up calls; `started()` runs when
    the clock starts. Reports CPU per job over the timed part: this process's (every thread),
    the whole machine's and the stub server's (`stub_pid`)."""
    latencies: list[float] = []
    next_index = 0

    async def lane() -> None:
        nonlocal next_index
        while next_index < jobs:
            index = next_index
            next_index += 1
            began = time.perf_counter()
            await call(index)
            latencies.append((time.perf_counter() - began) * 1000)

    warm = min(20, jobs)
    for i in range(warm):  # connections, caches and imports warm before the clock starts
        await call(-1 - i)
    if started is not None:
        started()
    # The machine and the stub read last at the start and first at the end: the readings of
    # `started()` and its caller (a scan of /proc for PostgreSQL) stay out of the machine's.
    machine, stub = _machine_and_stub_s(stub_pid)
    own_cpu = time.process_time()
    began = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    wall = time.perf_counter() - began
    cpu_ms = (time.process_time() - own_cpu) * 1000 / jobs
    machine_end, stub_end = _machine_and_stub_s(stub_pid)
    ordered = sorted(latencies)
    return {
        "wall_s": wall,
        "jobs_per_s": jobs / wall,
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "cpu_ms_per_job": cpu_ms,
        "machine_cpu_ms_per_job": (machine_end - machine) * 1000 / jobs,
        **({"stub_cpu_ms_per_job": (stub_end - stub) * 1000 / jobs} if stub_pid else {}),
    }


def _machine_and_stub_s(stub_pid: int | None) -> tuple[float, float]:
    """Busy CPU seconds so far of the whole machine and of the stub server (0 without it)."""
    return cpu.machine_busy_s(), cpu.process_cpu_s(stub_pid) if stub_pid else 0.0


def stub_params(port: int) -> dict[str, Any]:
    return {
        "model": "openai/stub",
        "api_base": f"http://127.0.0.1:{port}/v1",
        "api_key": "bench",
        "num_retries": 0,
        "max_retries": 0,
    }


async def run_litellm(args: argparse.Namespace) -> dict[str, Any]:
    import litellm

    litellm.suppress_debug_info = True
    params = stub_params(args.stub_port)

    async def call(_: int) -> None:
        await litellm.acompletion(messages=MESSAGES, **params)

    return await drive(call, args.jobs, args.concurrency, args.stub_pid)


async def run_litellm_router(args: argparse.Namespace) -> dict[str, Any]:
    import litellm

    litellm.suppress_debug_info = True
    params = stub_params(args.stub_port)
    params.pop("num_retries")
    router = litellm.Router(
        model_list=[
            {"model_name": "primary", "litellm_params": params},
            {"model_name": "fallback", "litellm_params": params},
        ],
        fallbacks=[{"primary": ["fallback"]}],
        num_retries=0,
    )

    async def call(_: int) -> None:
        await router.acompletion(model="primary", messages=MESSAGES)

    return await drive(call, args.jobs, args.concurrency, args.stub_pid)


BENCH_CONTRACT = Path(__file__).with_name("bench_contract.yaml")


def bench_config(
    port: int,
    url: str,
    contract: bool,
    poll_s: float = 0.5,
    transport: str = "litellm",
    budget: bool = False,
) -> str:
    """The benchmark's router config. With `contract` the task is the product as its users
    run it: input validated against the contract's schema, the prompt rendered from it, the
    output checked against its schema and checks, and only certified providers called.
    `transport` is the providers' (`litellm`, or `openai`: the native transport). With
    `budget` the providers are priced and one global budget, too large to bind, covers every
    attempt: each start reserves its worst case and each end settles it (docs/spend.md)."""
    task = (
        f'contract = "{BENCH_CONTRACT}"\n'
        if contract
        else 'side_effects = "none"\ncertification = "none"\n'
    )
    structured = "json_schema" if contract else "none"
    providers = "".join(
        f"""
[providers.{name}]
model = "openai/stub"
api_base = "http://127.0.0.1:{port}/v1"
structured_output = "{structured}"
context_window = 16384  # the stub serves any length; litellm does not know "openai/stub"
max_concurrency = 256
retry = {{ attempts = 1 }}
transport = "{transport}"
{PRICE if budget else ""}"""
        for name in ("stub", "stub_fallback")
    )
    budgets = BUDGET if budget else ""
    return f"""
[database]
url = "{url}"
{providers}
[tasks.bench]
providers = ["stub", "stub_fallback"]
deadline = 60
{task}
[engine]
workers = 256
poll_interval = {poll_s}
{budgets}"""


PRICE = "price = { input_usd_per_million = 0.15, output_usd_per_million = 0.6 }\n"
BUDGET = """
[budgets.bench_all]
period = "day"
usd = 1e9
tokens = 1000000000000
"""


async def run_openai_http(args: argparse.Namespace) -> dict[str, Any]:
    """The stub called through the product's native transport directly (no router): what the
    transport itself costs, beside direct litellm."""
    from jobrouter.providers import CompletionRequest, Message, ProviderConfig
    from jobrouter.providers.config import RetryPolicy
    from jobrouter.providers.openai_http import OpenAIHttpProvider

    config = ProviderConfig(
        model="openai/stub",
        api_base=f"http://127.0.0.1:{args.stub_port}/v1",
        max_concurrency=256,
        retry=RetryPolicy(attempts=1),
        transport="openai",
    )
    provider = OpenAIHttpProvider("stub", config)
    request = CompletionRequest(messages=tuple(Message(**m) for m in MESSAGES))

    async def call(_: int) -> None:
        await provider.complete(request)

    try:
        return await drive(call, args.jobs, args.concurrency, args.stub_pid)
    finally:
        await provider.close()


async def prepare(args: argparse.Namespace, url: str, transport: str, workers: int) -> Path:
    """The schema, the prefill, the config file and (with a contract) the certifications,
    before the clock; returns the config file."""
    from jobrouter.store import open_store
    from tests.bench.prefill import prefill_postgres, prefill_sqlite

    store = await open_store(url)  # creates the schema
    await store.close()
    if args.prefill and url.startswith("sqlite"):
        prefill_sqlite(url, args.prefill)
    elif args.prefill:
        await prefill_postgres(url, args.prefill)
    folder = Path(tempfile.mkdtemp(prefix="jobrouter-bench-"))
    config_file = folder / "bench.toml"
    # Worker processes on a SQLite file find new jobs only by polling: often (a read of a
    # local file is cheap); PostgreSQL's workers' claims wait on the server for them.
    poll_s = 0.02 if url.startswith("sqlite") and workers else 0.5
    config_file.write_text(
        bench_config(args.stub_port, url, args.contract, poll_s, transport, args.budget)
    )
    if args.contract:
        await certify(config_file)
    return config_file


async def run_jobrouter(
    args: argparse.Namespace, url: str, workers: int, transport: str = "litellm"
) -> dict[str, Any]:
    from jobrouter import Router

    config_file = await prepare(args, url, transport, workers)
    if args.statements:
        if args.statements.exists() and any(args.statements.iterdir()):
            raise RuntimeError(f"{args.statements} is not empty: counts would mix runs")
        statements.install()
    pg_before = await _pg_commits(url) if url.startswith("postgres") else None
    procs = start_workers(config_file, workers, args.statements, args.profile)
    try:
        router = await Router.open(url, config_file, run_workers=workers == 0)
    except BaseException:
        stop_workers(procs, config_file.parent)
        raise
    try:
        figures = await _timed(args, router, procs, url.startswith("postgres"))
    finally:
        try:
            await router.close()
        finally:
            stop_workers(procs, config_file.parent)
    total = args.jobs + min(20, args.jobs)
    if pg_before is not None:  # every backend gone: the server has counted all their commits
        after_commits, _ = await _pg_commits(url)
        figures["pg_commits_per_job"] = (after_commits - sum(pg_before)) / total
    if args.statements:
        figures["statements"] = _statement_figures(args.statements, total)
    return figures


async def _timed(
    args: argparse.Namespace, router: Any, procs: list[subprocess.Popen[bytes]], postgres: bool
) -> dict[str, Any]:
    """drive() the router; with its figures, over the same timed part: the store's counters,
    each worker's CPU and (`postgres`) the PostgreSQL server's."""
    run_id = os.urandom(4).hex()

    async def call(index: int) -> None:
        payload = {"product": {"name": f"Saffron tea {index}"}, "tone": "warm"}
        job = await router.submit("bench", f"{run_id}-{index}", "bench", payload)
        job = await router.wait(job.id, 60)
        if job.state != "succeeded":
            raise RuntimeError(f"job {job.id} ended {job.state}: {job.error}")

    pids = [proc.pid for proc in procs]
    start: list[cpu.FleetReading] = []
    since: list[float] = []

    def started() -> None:
        since.append(time.time())
        start.append(cpu.read_fleet(pids, postgres))
        for proc in procs if args.profile else ():
            proc.send_signal(signal.SIGUSR1)  # start the worker's profiler

    before = await _db_counters(router)
    figures = await drive(call, args.jobs, args.concurrency, args.stub_pid, started)
    end = cpu.read_fleet(pids, postgres)
    if pids:  # before they stop: a worker's own peak, read while it lives
        figures["worker_peak_rss_mb"] = round(max(cpu.peak_rss_mb(pid) for pid in pids), 1)
    after = await _db_counters(router)
    total = args.jobs + min(20, args.jobs)
    figures.update({key: (after[key] - before[key]) / total for key in after})
    figures.update(_worker_figures(pids, start[0], end, await _jobs_by_pid(router, since[0])))
    if postgres:
        others = await _other_databases_backends(router)
        figures["pg_cpu_ms_per_job"] = (
            cpu.used_s(start[0].postgres, end.postgres, others) * 1000 / args.jobs
        )
    return figures


def _worker_figures(
    pids: list[int], start: cpu.FleetReading, end: cpu.FleetReading, ran: dict[int, int]
) -> dict[str, Any]:
    """Each worker's jobs (its attempts in the timed part) and its CPU per job it ran (not per
    job of the run)."""
    return {
        "worker_jobs": [ran.get(pid, 0) for pid in pids],
        "worker_cpu_ms_per_job": [
            round((b - a) * 1000 / max(1, ran.get(pid, 0)), 2)
            for a, b, pid in zip(start.processes, end.processes, pids, strict=True)
        ],
    }


async def _other_databases_backends(router: Any) -> set[int]:
    """The pids of client backends of other databases than the bench's: on a shared server
    they are other people's work. (The server's background processes, also shared, count.)"""
    rows = await router.store.connector.fetchall(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' "
        "AND datname IS DISTINCT FROM current_database()",
        {},
    )
    return {int(row["pid"]) for row in rows}


async def certify(config_file: Path) -> None:
    """Certify both stub providers for the bench contract, as `jobrouter contracts run` does,
    before the clock starts (through the real certifier: the records are real)."""
    from jobrouter.build import build_providers, build_tasks, resolve_config
    from jobrouter.certifier import certify_pair, pairs_to_certify
    from jobrouter.store import open_store

    config = resolve_config(config_file)
    tasks = build_tasks(config)
    providers = build_providers(config, None)
    store = await open_store(config.database.url)
    try:
        for pair in pairs_to_certify(config, tasks):
            record = await certify_pair(
                store.certifications,
                providers[pair.provider],
                pair,
                ttl_days=config.certification.ttl_days,
            )
            if not record.passed:
                raise RuntimeError(
                    f"bench contract not certified for {pair.provider}: "
                    f"{record.model_dump_json()[:2000]}"
                )
    finally:
        for provider in providers.values():
            await provider.close()
        await store.close()


def _statement_figures(folder: Path, jobs: int) -> dict[str, dict[str, float]]:
    statements.write_now(folder, "submitter")
    merged = statements.merged(folder)
    return {
        kind: {name: round(n / jobs, 3) for name, n in counts.most_common()}
        for kind, counts in merged.items()
    }


async def _jobs_by_pid(router: Any, since: float) -> dict[int, int]:
    """Attempts started since `since`, by the pid in their worker id (host:pid:suffix)."""
    rows = await router.store.connector.fetchall(
        "SELECT worker, COUNT(*) AS n FROM attempts WHERE started_at >= :since GROUP BY worker",
        {"since": since},
    )
    return {int(str(row["worker"]).split(":")[1]): int(row["n"]) for row in rows}


async def _db_counters(router: Any) -> dict[str, float]:
    counters = {}
    stats = getattr(router.store.connector, "stats", None)
    if stats is not None:
        counters["round_trips_per_job"] = float(stats.round_trips)
        counters["write_transactions_per_job"] = float(stats.write_transactions)
        counters["commits_per_job"] = float(stats.commits)
    return counters


async def _pg_commits(url: str) -> tuple[int, int]:
    """The server's commit count for the database, whole fleet. A backend reports its counts
    to the server's statistics lazily (up to 10 s later when idle) but always when it exits,
    so the count is read when no other backend is connected to the database: before the
    fleet starts and after it stopped. The window thus holds start-up and shut-down too
    (a constant, spread over the jobs). Returns (commits, this reading's own statements: each
    a commit the next reading will see, to subtract)."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        own = 0
        for _ in range(200):
            own += 1
            others = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )
            if others == 0:
                break
            await asyncio.sleep(0.05)
        commits = await conn.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
        return int(commits), own + 1
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--stub-port", type=int, required=True)
    parser.add_argument(
        "--stub-pid", type=int, help="the stub server's process: its CPU per job is reported"
    )
    parser.add_argument("--database", default="")
    parser.add_argument("--prefill", type=int, default=0)
    parser.add_argument(
        "--profile",
        type=Path,
        help="write a pyinstrument profile here (.txt "
        "and .html); its figures are slowed down by the profiler",
    )
    parser.add_argument(
        "--contract",
        action="store_true",
        help="the task has a contract (tests/bench/bench_contract.yaml), "
        "certified for both providers before the clock starts",
    )
    parser.add_argument(
        "--budget",
        action="store_true",
        help="price the providers and cover every attempt with one global budget too large "
        "to bind (needs --contract: its max_tokens bounds the worst case)",
    )
    parser.add_argument(
        "--statements",
        type=Path,
        help="count PostgreSQL statements and transactions per job in every "
        "process (tests/bench/statements.py), their files in this folder",
    )
    args = parser.parse_args()
    if args.budget and not args.contract:
        parser.error("--budget needs --contract: a job without max_tokens has no worst case")
    runners: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
        "litellm": lambda: run_litellm(args),
        "litellm_router": lambda: run_litellm_router(args),
        "sqlite": lambda: run_jobrouter(args, args.database, 0),
        "postgres": lambda: run_jobrouter(args, args.database, 0),  # workers in-process
        "postgres1": lambda: run_jobrouter(args, args.database, 1),
        "postgres2": lambda: run_jobrouter(args, args.database, 2),
        "openai_http": lambda: run_openai_http(args),
        "sqlite_openai": lambda: run_jobrouter(args, args.database, 0, "openai"),
        "postgres_openai": lambda: run_jobrouter(args, args.database, 0, "openai"),
        "postgres1_openai": lambda: run_jobrouter(args, args.database, 1, "openai"),
        "postgres2_openai": lambda: run_jobrouter(args, args.database, 2, "openai"),
        # PROTOTYPE of several worker processes on one SQLite file (no change feed: they poll)
        "sqlite_workers1": lambda: run_jobrouter(args, args.database, 1),
        "sqlite_workers2": lambda: run_jobrouter(args, args.database, 2),
    }
    if args.profile is None:
        figures = asyncio.run(runners[args.scenario]())
    else:
        figures = profiled(runners[args.scenario], args.profile)
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(figures))


def profiled(runner: Callable[[], Awaitable[dict[str, Any]]], out: Path) -> dict[str, Any]:
    """Run `runner` under pyinstrument (sampling every 0.5 ms, every thread's time as seen from
    the main one) and write the call tree as text and HTML."""
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    try:
        figures = asyncio.run(runner())
    finally:
        profiler.stop()
    figures["profile"] = profile_summary.write(profiler, out)
    workers = sorted(out.parent.glob(f"{out.name}-worker-*.summary.json"))
    figures["worker_profiles"] = [json.loads(path.read_text()) for path in workers]
    return figures


if __name__ == "__main__":
    main()
