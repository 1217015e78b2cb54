"""The opening table of docs/benchmarks.md (tests/bench/__main__.py): the router's own CPU per
job is all its processes' CPU less the same transport's when called directly."""

from __future__ import annotations

from typing import Any

from tests.bench.__main__ import all_cpu_ms, headline, median_run


def run(scenario: str, cpu: float, jobs_s: float, **more: Any) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "task": "" if scenario == "openai_http" else "contract",
        "concurrency": 64,
        "jobs": 1000,
        "jobs_per_s": jobs_s,
        "cpu_ms_per_job": cpu,
        "load_average": 1.0,
        **more,
    }


def test_own_cpu_is_the_runs_cpu_less_its_peers() -> None:
    direct = median_run([run("openai_http", 0.2, 5000), run("openai_http", 0.3, 4000)])
    embedded = median_run([run("sqlite_openai", 1.0, 600), run("sqlite_openai", 1.4, 500)])
    fleet = run(
        "postgres1_openai",
        0.5,
        300,
        worker_cpu_ms_per_job=[2.0],
        worker_jobs=[500],  # half the jobs: 1.0 ms per job of the run
        pg_cpu_ms_per_job=1.5,
    )
    assert all_cpu_ms(fleet) == 3.0
    table = headline([direct, embedded, fleet]).splitlines()
    assert table[2].startswith(
        "| openai_http |  | 64 | 4000 (4000 to 5000) | 0.30 (0.20 to 0.30) |  |"
    )
    assert "| 1.40 (1.00 to 1.40) | 1.10 (vs openai_http) | 2 |" in table[3]  # median: slower
    assert "| 3.00 | 2.70 (vs openai_http) | 1 |" in table[4]
