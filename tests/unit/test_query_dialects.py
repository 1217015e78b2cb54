"""The query loader writes the JSON-list expansion per dialect; no override copies a shared
query only to spell that expansion differently."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from jobrouter.store.connector import (
    QUERY_FILES,
    QueryFile,
    combine_query_files,
    in_dialect,
    load_queries,
    parse_named_queries,
)

DIALECTS = ("sqlite", "postgres")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_json_list_is_written_out(dialect: str) -> None:
    for name, sql in load_queries(dialect).items():  # bus.sql's too
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


@pytest.mark.parametrize("stem", QUERY_FILES)
def test_no_postgres_override_differs_only_in_the_json_list(stem: str) -> None:
    package = resources.files("jobrouter.store")
    shared = parse_named_queries(package.joinpath(f"{stem}.sql").read_text("utf-8"))
    override = parse_named_queries(package.joinpath(f"{stem}_postgres.sql").read_text("utf-8"))
    assert override, f"{stem}_postgres.sql holds the real differences (FOR UPDATE, SKIP LOCKED)"

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
    for name in ("queries.sql", "queries_postgres.sql", "bus.sql", "bus_postgres.sql"):
        parse_named_queries(package.joinpath(name).read_text("utf-8"))
    parse_named_queries(package.joinpath("leader.sql").read_text("utf-8"))


def test_every_query_file_overrides_per_dialect_the_same_way() -> None:
    """bus.sql's PostgreSQL spelling is bus_postgres.sql, loaded as queries_postgres.sql is:
    the bus relay reads the connector's one set of queries. mutant seen failing: bus.sql left
    out of QUERY_FILES (no claim_unpublished; SQLite's claim would run on PostgreSQL)."""
    sqlite, postgres = load_queries("sqlite"), load_queries("postgres")
    assert "SKIP LOCKED" in postgres["claim_unpublished"]
    assert "SKIP LOCKED" not in sqlite["claim_unpublished"]
    assert "FOR UPDATE" in postgres["lock_job"] and "FOR UPDATE" not in sqlite["lock_job"]
    assert not any("__" in name for name in postgres), "one override mechanism: the dialect's file"


def test_a_query_name_of_two_files_is_refused() -> None:
    """Each name belongs to one file: in two shared files, or overridden by another file's
    dialect part, the later would silently replace the earlier. mutants seen failing: the
    owner check removed (no error in either case); the dialect part left out of it (the
    second case passes silently)."""
    queries = QueryFile("queries", {"q": "SELECT 1"}, {"r": "SELECT 2"})
    with pytest.raises(ValueError, match=r"'q' is used in queries\.sql and bus\.sql"):
        combine_query_files([queries, QueryFile("bus", {"q": "SELECT 3"}, {})])
    with pytest.raises(ValueError, match=r"'r' is used in queries\.sql and bus\.sql"):
        combine_query_files([queries, QueryFile("bus", {}, {"r": "SELECT 4"})])
    own = QueryFile("bus", {"b": "SELECT 5"}, {"b": "SELECT 6"})
    assert combine_query_files([queries, own]) == {
        "q": "SELECT 1",
        "r": "SELECT 2",
        "b": "SELECT 6",
    }


def test_no_module_outside_the_store_asks_which_dialect_it_is_on() -> None:
    """What differs per backend (SQL, the leader's lock) is behind the connector: outside
    router/store/ no code reads `.dialect`. mutant seen failing: fleet.build_leader branching
    on `store.connector.dialect == "postgres"`."""
    root = Path(__file__).resolve().parents[2]
    asking = [
        str(path.relative_to(root))
        for folder in ("router", "providers", "contracts")
        for path in sorted((root / folder).rglob("*.py"))
        if (root / "router" / "store") not in path.parents
        and re.search(r"\.dialect\b", path.read_text("utf-8"))
    ]
    assert not asking, asking
