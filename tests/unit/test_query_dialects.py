"""The query loader writes the JSON-list expansion per dialect; no override copies a shared
query only to spell that expansion differently."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from jobrouter.store.bus import bus_queries
from jobrouter.store.connector import in_dialect, load_queries, parse_named_queries

DIALECTS = ("sqlite", "postgres")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_json_list_is_written_out(dialect: str) -> None:
    for queries in (load_queries(dialect), bus_queries(dialect)):
        for name, sql in queries.items():
            assert "{json_list" not in sql, (dialect, name)


def test_each_dialect_reads_a_json_list_in_its_own_words() -> None:
    query = "SELECT 1 WHERE x IN ({json_list(:ids)}) AND y IN ({json_list(:owners)})"
    sqlite = in_dialect({"q": query}, "sqlite")["q"]
    postgres = in_dialect({"q": query}, "postgres")["q"]
    assert sqlite == (
        "SELECT 1 WHERE x IN (SELECT value FROM json_each(:ids)) "
        "AND y IN (SELECT value FROM json_each(:owners))"
    )
    assert postgres == (
        "SELECT 1 WHERE x IN (SELECT json_array_elements_text(CAST(:ids AS json)))"
        " AND y IN (SELECT json_array_elements_text(CAST(:owners AS json)))"
    )


def test_the_renew_and_retention_lists_use_the_dialects_expansion() -> None:
    for name in (
        "renew_claims",
        "renew_attempt_leases",
        "purge_outbox",
        "count_purgeable",
        "count_kept_undelivered",
        "purge_jobs",
        "list_jobs_states",
    ):
        assert "json_each(" in load_queries("sqlite")[name], name
        assert "json_array_elements_text(" in load_queries("postgres")[name], name
        assert "json_each" not in load_queries("postgres")[name], name


def test_no_postgres_override_differs_only_in_the_json_list() -> None:
    package = resources.files("jobrouter.store")
    shared = parse_named_queries(package.joinpath("queries.sql").read_text("utf-8"))
    override = parse_named_queries(package.joinpath("queries_postgres.sql").read_text("utf-8"))
    assert override, "queries_postgres.sql holds the real differences (FOR UPDATE, SKIP LOCKED)"

    def words(sql: str) -> str:
        return re.sub(r"\s+", " ", sql).replace("( ", "(").replace(" )", ")")

    for name, sql in override.items():
        if name in shared:
            assert words(sql) != words(shared[name]), name


def test_a_query_name_used_twice_is_refused() -> None:
    """Two `-- name: claim_probe` (the breaker's half-open claim and the golden probes'
    schedule) made the later one answer the breaker's calls: every half-open probe raised
    "query needs parameters ['interval']". mutant: the duplicate check removed: no error."""
    text = "-- name: q\nSELECT 1\n\n-- name: q\nSELECT 2\n"
    with pytest.raises(ValueError, match="query name 'q' is used twice"):
        parse_named_queries(text)
    for dialect in DIALECTS:  # the shipped files load: no name is used twice in them
        assert load_queries(dialect)
    package = resources.files("jobrouter.store")
    for name in ("queries.sql", "queries_postgres.sql", "bus.sql", "leader.sql"):
        parse_named_queries(package.joinpath(name).read_text("utf-8"))
