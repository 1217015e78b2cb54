"""The benchmark: jobrouter's cost side by side with litellm, on SQLite and PostgreSQL.

    python -m tests.bench                      # the full run documented in docs/benchmarks.md
    python -m tests.bench --quick              # a smoke run: 200 jobs, no growth

Starts a zero-latency OpenAI-compatible stub (its own process), then runs each scenario in a
fresh process on the same stub, the whole plan `--repeat` times (3 by default); each table row
is the run with the median jobs/s. Writes bench-results/bench.json (median and every run) and
regenerates the table in docs/benchmarks.md between its markers.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
HEAD_BEGIN, HEAD_END = "<!-- headline:begin -->", "<!-- headline:end -->"
# Each jobrouter scenario's peer: the same transport called directly, no router.
PEERS = {"openai": "openai_http", "litellm": "litellm"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_stub() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.stub_server", "--port", str(port)], cwd=ROOT
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("stub server did not start")


def database_for(scenario: str) -> tuple[str, str | None]:
    if scenario.startswith("sqlite"):
        return f"sqlite:///{tempfile.mkdtemp(prefix='jobrouter-bench-')}/bench.db", None
    if scenario.startswith("postgres"):
        name = f"jobrouter_bench_{os.urandom(4).hex()}"
        subprocess.run(["psql", "-q", PG_ADMIN, "-c", f"CREATE DATABASE {name}"], check=True)
        return f"postgresql://postgres@127.0.0.1:5432/{name}", name
    return "", None


def run_one(
    scenario: str,
    task: str,
    concurrency: int,
    jobs: int,
    stub: tuple[int, int],
    prefill: int,
    profile_dir: Path | None = None,
    statements: bool = False,
) -> dict[str, Any]:
    url, pg_name = database_for(scenario)
    port, stub_pid = stub
    command = [
        sys.executable,
        "-m",
        "tests.bench.scenarios",
        "--scenario",
        scenario,
        "--concurrency",
        str(concurrency),
        "--jobs",
        str(jobs),
        "--stub-port",
        str(port),
        "--stub-pid",
        str(stub_pid),
        "--database",
        url,
        "--prefill",
        str(prefill),
    ]
    if task == "contract" and scenario not in DIRECT:
        command.append("--contract")
    if profile_dir is not None:
        command += ["--profile", str(profile_dir / f"profile-{scenario}-{task}-c{concurrency}")]
    if statements and scenario.startswith("postgres"):
        command += ["--statements", tempfile.mkdtemp(prefix="jobrouter-statements-")]
    print(f"  {scenario:15} {task:8} c={concurrency:<3} prefill={prefill:<8}", end="", flush=True)
    try:
        out = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as failed:  # say why, not just the exit status
        print(
            f" FAILED (exit {failed.returncode}); the scenario's stderr ends with:\n"
            + stderr_tail(failed.stderr),
            file=sys.stderr,
            flush=True,
        )
        raise
    finally:
        if pg_name:
            subprocess.run(
                ["psql", "-q", PG_ADMIN, "-c", f"DROP DATABASE {pg_name} WITH (FORCE)"], check=False
            )
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    figures.update(
        {
            "scenario": scenario,
            "task": task if scenario not in DIRECT else "",
            "concurrency": concurrency,
            "jobs": jobs,
            "prefill": prefill,
            "load_average": os.getloadavg()[0],
        }
    )
    print(
        f" {figures['jobs_per_s']:8.1f} jobs/s  p50 {figures['p50_ms']:7.2f} ms  "
        f"p99 {figures['p99_ms']:7.2f} ms  cpu {figures['cpu_ms_per_job']:.2f} ms/job "
        f"workers {figures.get('worker_cpu_ms_per_job')}  "
        f"pg {_fmt(figures.get('pg_cpu_ms_per_job'), 2)}  "
        f"stub {_fmt(figures.get('stub_cpu_ms_per_job'), 2)}  "
        f"machine {_fmt(figures.get('machine_cpu_ms_per_job'), 2)}  "
        f"pg commits {figures.get('pg_commits_per_job', 0):.2f}  "
        f"load {figures['load_average']:.1f}"
    )
    for name, summary in [
        ("submitter", figures.get("profile")),
        *(("worker", w) for w in figures.get("worker_profiles", [])),
    ]:
        if summary:
            print(f"    profile {name}: " + ", ".join(f"{k} {v:.0f}%" for k, v in summary.items()))
    for kind, counts in figures.get("statements", {}).items():
        print(
            f"    {kind} per job: "
            + ", ".join(f"{n:.2f} {name}" for name, n in counts.items() if n >= 0.01)
        )
    return figures


STDERR_TAIL_LINES = 40


def stderr_tail(stderr: str | None) -> str:
    lines = (stderr or "").rstrip().splitlines()[-STDERR_TAIL_LINES:]
    return "\n".join(f"    | {line}" for line in lines) or "    (nothing on stderr)"


DIRECT = ("litellm", "litellm_router", "openai_http")  # no task, no contract: the peers


def plan(args: argparse.Namespace) -> list[tuple[str, str, int, int]]:
    """(scenario, task, concurrency, prefill): each jobrouter scenario with the contract-gated
    task (the headline) and, beside it, the contract-less one (what contracts cost)."""
    runs = []
    for c in args.concurrency:
        for s in args.scenarios:
            tasks = [""] if s in DIRECT else args.tasks
            runs += [(s, t, c, 0) for t in tasks]
    for size in args.growth:
        runs += [
            (s, args.tasks[0], 64, size) for s in ("sqlite", "postgres1") if s in args.scenarios
        ]
    return runs


def table(results: list[dict[str, Any]]) -> str:
    direct = {r["concurrency"]: r for r in results if r["scenario"] == "litellm"}
    head = (
        "| scenario | task | conc. | finished jobs before | jobs/s (range) | p50 ms | p99 ms "
        "| added p50 ms over (a) | CPU ms / job: submitter | CPU ms / job: each worker "
        "| CPU ms / job: PostgreSQL | CPU ms / job: stub | CPU ms / job: machine "
        "| write tx / job | commits / job | PG commits / job | load avg | peak RSS MB |"
    )
    lines = [head, "|" + "---|" * 18]
    for r in results:
        base = direct.get(r["concurrency"])
        added = f"{r['p50_ms'] - base['p50_ms']:+.2f}" if base else ""
        workers = " / ".join(f"{ms:.1f}" for ms in r.get("worker_cpu_ms_per_job", []))
        lines.append(
            f"| {r['scenario']} | {r.get('task', '')} | {r['concurrency']} | {r['prefill']:,} "
            f"| {_rate(r)} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {added} "
            f"| {r['cpu_ms_per_job']:.1f} | {workers} | {_fmt(r.get('pg_cpu_ms_per_job'))} "
            f"| {_fmt(r.get('stub_cpu_ms_per_job'))} | {_fmt(r.get('machine_cpu_ms_per_job'))} "
            f"| {_fmt(r.get('write_transactions_per_job'))} | {_fmt(r.get('commits_per_job'), 2)} "
            f"| {_fmt(r.get('pg_commits_per_job'))} | {r.get('load_average', 0):.1f} "
            f"| {r['peak_rss_mb']:.0f}{_workers(r)} |"
        )
    return "\n".join(lines)


def all_cpu_ms(r: dict[str, Any]) -> float:
    """CPU per job of every process of the run but the stub: the submitter, each worker
    (weighted by the jobs it ran) and PostgreSQL's."""
    jobs = max(1, int(r.get("jobs", 1)))
    workers = zip(r.get("worker_cpu_ms_per_job", []), r.get("worker_jobs", []), strict=False)
    worker_ms = sum(ms * ran for ms, ran in workers) / jobs
    return float(r["cpu_ms_per_job"]) + worker_ms + float(r.get("pg_cpu_ms_per_job") or 0.0)


def peer_of(scenario: str) -> str | None:
    if scenario in DIRECT:
        return None
    return PEERS["openai" if scenario.endswith("_openai") else "litellm"]


def headline(results: list[dict[str, Any]]) -> str:
    """The opening table of docs/benchmarks.md: per scenario and concurrency, jobs/s (range
    over the rounds), CPU per job of all its processes, and the router's own CPU per job:
    that less the same transport's CPU per call when called directly (`PEERS`)."""
    by_key = {(r["scenario"], r["concurrency"]): r for r in results}
    lines = [
        "| scenario | task | c | jobs/s (range over rounds) | CPU ms / job (range) | "
        "own CPU ms / job (vs the peer) | rounds | load avg |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        peer = by_key.get((peer_of(r["scenario"]) or "", r["concurrency"]))
        own = (
            f"{all_cpu_ms(r) - all_cpu_ms(peer):.2f} (vs {peer['scenario']})"
            if peer is not None
            else ("" if r["scenario"] in DIRECT else "no peer run")
        )
        lines.append(
            f"| {r['scenario']} | {r.get('task', '')} | {r['concurrency']} | {_rate(r)} "
            f"| {_cpu(r)} | {own} | {r.get('runs', 1)} "
            f"| {r.get('load_average', 0):.1f} |"
        )
    return "\n".join(lines)


def _cpu(r: dict[str, Any]) -> str:
    low, high = r.get("all_cpu_ms_range", [all_cpu_ms(r)] * 2)
    return (
        f"{all_cpu_ms(r):.2f}"
        if r.get("runs", 1) <= 1
        else f"{all_cpu_ms(r):.2f} ({low:.2f} to {high:.2f})"
    )


def median_run(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median jobs/s (a real run, not a blend of figures), with the range."""
    ordered = sorted(rows, key=lambda r: float(r["jobs_per_s"]))
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen.update(
        {
            "runs": len(rows),
            "jobs_per_s_min": ordered[0]["jobs_per_s"],
            "jobs_per_s_max": ordered[-1]["jobs_per_s"],
            "all_cpu_ms_range": [min(map(all_cpu_ms, rows)), max(map(all_cpu_ms, rows))],
        }
    )
    return chosen


def _rate(r: dict[str, Any]) -> str:
    if r.get("runs", 1) <= 1:
        return f"{r['jobs_per_s']:.0f}"
    return f"{r['jobs_per_s']:.0f} ({r['jobs_per_s_min']:.0f} to {r['jobs_per_s_max']:.0f})"


def _fmt(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _workers(r: dict[str, Any]) -> str:
    worker = r.get("worker_peak_rss_mb")  # the largest worker's own peak
    return "" if worker is None else f" (+{worker:.0f} per worker)"


def write_docs(results: list[dict[str, Any]], command: str) -> None:
    doc = ROOT / "docs" / "benchmarks.md"
    text = doc.read_text() if doc.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    body = f"{BEGIN}\nMeasured {when} with `{command}` (2 cores):\n\n{table(results)}\n{END}"
    start, end = text.index(BEGIN), text.index(END) + len(END)
    text = text[:start] + body + text[end:]
    if HEAD_BEGIN in text:
        loads = [float(r.get("load_average", 0)) for r in results]
        head = (
            f"{HEAD_BEGIN}\nMeasured {when} with `{command}` (2 cores; load average at the end "
            f"of each run {min(loads):.1f} to {max(loads):.1f}):\n\n{headline(results)}\n{HEAD_END}"
        )
        start, end = text.index(HEAD_BEGIN), text.index(HEAD_END) + len(HEAD_END)
        text = text[:start] + head + text[end:]
    doc.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    parser.add_argument(
        "--scenarios",
        nargs="+",
        default=[
            "litellm",
            "litellm_router",
            "openai_http",
            "sqlite",
            "sqlite_openai",
            "postgres1",
            "postgres1_openai",
            "postgres2",
            "postgres2_openai",
        ],
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=["contract", "plain"],
        choices=["contract", "plain"],
        help="jobrouter's task: contract-gated and certified (the headline), "
        "and without a contract (what contracts cost)",
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="PostgreSQL runs count statements and transactions per job in "
        "every process (tests/bench/statements.py)",
    )
    parser.add_argument("--growth", type=int, nargs="*", default=[10_000, 1_000_000])
    parser.add_argument("--quick", action="store_true", help="200 jobs, no growth, no docs")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile each run with pyinstrument: bench-results/profile-<scenario>"
        "-c<concurrency>.txt and .html; no docs (the profiler slows it)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="rounds of the whole plan; each row is the run with the median "
        "jobs/s, its range shown beside it (default 3; runs on a 2-core "
        "machine vary by about 10%%)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bench.json")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.growth, args.repeat = 200, [], 1
    stub, port = start_stub()
    runs: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {}
    try:
        profiles = args.out.parent if args.profile else None
        for round_no in range(args.repeat):  # whole rounds: slow drift hits every row alike
            print(f"round {round_no + 1} of {args.repeat}")
            for s, t, c, p in plan(args):
                runs.setdefault((s, t, c, p), []).append(
                    run_one(s, t, c, args.jobs, (port, stub.pid), p, profiles, args.statements)
                )
    finally:
        stub.terminate()
    results = [median_run(rows) for rows in runs.values()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "median_runs": results,
                "all_runs": runs and [row for rows in runs.values() for row in rows],
            },
            indent=2,
        )
        + "\n"
    )
    print(table(results))
    print(headline(results))
    if not args.quick and not args.profile:
        write_docs(results, " ".join(["python -m tests.bench", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
