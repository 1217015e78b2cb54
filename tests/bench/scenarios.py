"""One benchmark scenario, run in its own process (so its peak memory is its own).

    python -m tests.bench.scenarios --scenario sqlite --concurrency 64 --jobs 2000 --stub-port P

Scenarios: litellm (direct acompletion), litellm_router (litellm.Router with a fallback),
sqlite (jobrouter, workers in process), postgres1 / postgres2 (jobrouter submitting from this
process, one or two `jobrouter worker` processes running the jobs). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

MESSAGES = [{"role": "user", "content": '{"product":"Saffron tea","tone":"warm"}'}]
Call = Callable[[int], Awaitable[None]]


async def drive(call: Call, jobs: int, concurrency: int) -> dict[str, float]:
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
    began = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    wall = time.perf_counter() - began
    ordered = sorted(latencies)
    return {"wall_s": wall, "jobs_per_s": jobs / wall, "p50_ms": statistics.median(ordered),
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]}


def stub_params(port: int) -> dict[str, Any]:
    return {"model": "openai/stub", "api_base": f"http://127.0.0.1:{port}/v1", "api_key": "bench",
            "num_retries": 0, "max_retries": 0}


async def run_litellm(args: argparse.Namespace) -> dict[str, Any]:
    import litellm

    litellm.suppress_debug_info = True
    params = stub_params(args.stub_port)

    async def call(_: int) -> None:
        await litellm.acompletion(messages=MESSAGES, **params)

    return await drive(call, args.jobs, args.concurrency)


async def run_litellm_router(args: argparse.Namespace) -> dict[str, Any]:
    import litellm

    litellm.suppress_debug_info = True
    params = stub_params(args.stub_port)
    params.pop("num_retries")
    router = litellm.Router(
        model_list=[{"model_name": "primary", "litellm_params": params},
                    {"model_name": "fallback", "litellm_params": params}],
        fallbacks=[{"primary": ["fallback"]}], num_retries=0)

    async def call(_: int) -> None:
        await router.acompletion(model="primary", messages=MESSAGES)

    return await drive(call, args.jobs, args.concurrency)


def bench_config(port: int, url: str) -> str:
    return f"""
[database]
url = "{url}"

[providers.stub]
model = "openai/stub"
api_base = "http://127.0.0.1:{port}/v1"
structured_output = "none"
max_concurrency = 256
retry = {{ attempts = 1 }}

[providers.stub_fallback]
model = "openai/stub"
api_base = "http://127.0.0.1:{port}/v1"
structured_output = "none"
max_concurrency = 256
retry = {{ attempts = 1 }}

[tasks.bench]
providers = ["stub", "stub_fallback"]
side_effects = "none"
deadline = 60

[engine]
workers = 256
poll_interval = 0.05
"""


async def run_jobrouter(args: argparse.Namespace, url: str, workers: int) -> dict[str, Any]:
    from router import Router
    from router.store import open_store
    from tests.bench.prefill import prefill_postgres, prefill_sqlite

    store = await open_store(url)  # creates the schema
    await store.close()
    if args.prefill and url.startswith("sqlite"):
        prefill_sqlite(url, args.prefill)
    elif args.prefill:
        await prefill_postgres(url, args.prefill)
    folder = Path(tempfile.mkdtemp(prefix="jobrouter-bench-"))
    config_file = folder / "bench.toml"
    config_file.write_text(bench_config(args.stub_port, url))
    procs = start_workers(config_file, workers)
    router = await Router.open(url, config_file, run_workers=workers == 0)
    run_id = os.urandom(4).hex()
    before = await _db_counters(router)

    async def call(index: int) -> None:
        job = await router.submit("bench", f"{run_id}-{index}", "bench", {"n": index})
        job = await router.wait(job.id, 60)
        if job.state != "succeeded":
            raise RuntimeError(f"job {job.id} ended {job.state}: {job.error}")

    try:
        figures = await drive(call, args.jobs, args.concurrency)
        after = await _db_counters(router)
    finally:
        await router.close()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
    total = args.jobs + min(20, args.jobs)
    figures.update({key: (after[key] - before[key]) / total for key in after})
    return figures


def start_workers(config_file: Path, count: int) -> list[subprocess.Popen[bytes]]:
    """`jobrouter worker` processes (started before the clock runs: blocking is fine here)."""
    return [subprocess.Popen([sys.executable, "-m", "router", "worker", "--config",
                              str(config_file)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) for _ in range(count)]


async def _db_counters(router: Any) -> dict[str, float]:
    counters = {}
    stats = getattr(router.store.connector, "stats", None)
    if stats is not None:
        counters["round_trips_per_job"] = float(stats.round_trips)
        counters["write_transactions_per_job"] = float(stats.write_transactions)
        counters["commits_per_job"] = float(stats.commits)
    if router.store.connector.dialect == "postgres":
        row = await router.store.connector.fetchone(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()", {})
        counters["pg_commits_per_job"] = float(row["xact_commit"])
    return counters


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--stub-port", type=int, required=True)
    parser.add_argument("--database", default="")
    parser.add_argument("--prefill", type=int, default=0)
    parser.add_argument("--profile", type=Path, help="write a pyinstrument profile here (.txt "
                        "and .html); its figures are slowed down by the profiler")
    args = parser.parse_args()
    runners: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
        "litellm": lambda: run_litellm(args),
        "litellm_router": lambda: run_litellm_router(args),
        "sqlite": lambda: run_jobrouter(args, args.database, 0),
        "postgres1": lambda: run_jobrouter(args, args.database, 1),
        "postgres2": lambda: run_jobrouter(args, args.database, 2),
    }
    if args.profile is None:
        figures = asyncio.run(runners[args.scenario]())
    else:
        figures = profiled(runners[args.scenario], args.profile)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    figures.update({"peak_rss_mb": round(own, 1), "worker_peak_rss_mb": round(children, 1)})
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
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".txt").write_text(profiler.output_text(unicode=True, color=False))
    out.with_suffix(".html").write_text(profiler.output_html())
    return figures


if __name__ == "__main__":
    main()
