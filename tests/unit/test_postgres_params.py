"""The PostgreSQL connector's pure parts: `:name` to `$n`, command tags, password masking."""

from __future__ import annotations

import pytest

from jobrouter.store.connector import load_queries
from jobrouter.store.pg_url import redact
from jobrouter.store.postgres import bind, rowcount, translate


def test_names_become_positions_in_first_use_order_and_repeat_the_same_number() -> None:
    sql, names = translate("UPDATE t SET a = :now, b = :x WHERE c < :now")
    assert sql == "UPDATE t SET a = $1, b = $2 WHERE c < $1"
    assert names == ("now", "x")


def test_casts_strings_quoted_names_and_comments_are_left_alone() -> None:
    query = (
        "SELECT ':not', \"a:b\", x::text, :p::int -- :comment\n"
        "/* :block */ FROM t WHERE s = 'it''s :q' AND y = :y"
    )
    sql, names = translate(query)
    assert names == ("p", "y")
    assert sql == (
        "SELECT ':not', \"a:b\", x::text, $1::int -- :comment\n"
        "/* :block */ FROM t WHERE s = 'it''s :q' AND y = $2"
    )


def test_translation_is_cached_per_query_text() -> None:
    query = "SELECT * FROM jobs WHERE id = :id AND owner = :owner"
    translate(query)
    hits = translate.cache_info().hits
    translate(query)
    assert translate.cache_info().hits == hits + 1


def test_bind_orders_values_and_ignores_extra_parameters() -> None:
    assert bind("SELECT :b, :a, :b", {"a": 1, "b": 2, "unused": 3}) == ("SELECT $1, $2, $1", [2, 1])


def test_bind_names_a_missing_parameter() -> None:
    with pytest.raises(ValueError, match="needs parameters \\['id'\\]"):
        bind("SELECT * FROM jobs WHERE id = :id", {})


def test_every_named_query_translates_without_leftover_colons() -> None:
    for name, query in load_queries("postgres").items():
        sql, _ = translate(query)
        assert ":" not in sql.replace("::", ""), name


@pytest.mark.parametrize(
    ("status", "count"),
    [("UPDATE 1", 1), ("INSERT 0 1", 1), ("INSERT 0 0", 0), ("DELETE 12", 12), ("BEGIN", 0)],
)
def test_rowcount_reads_the_command_tag(status: str, count: int) -> None:
    assert rowcount(status) == count


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://bob:s3cret@db:5432/jobs", "postgresql://bob:***@db:5432/jobs"),
        (
            "postgres://bob@db/jobs?password=s3cret&sslmode=require",
            "postgres://bob@db/jobs?password=***&sslmode=require",
        ),
        ("postgresql://db/jobs", "postgresql://db/jobs"),
        ("postgresql://bob:p%40ss:word@db/jobs", "postgresql://bob:***@db/jobs"),
        # issue 14: the client-certificate key's password, and URLs urlsplit cannot read
        (
            "postgresql://bob@db/jobs?sslpassword=s3cret&sslmode=verify-full",
            "postgresql://bob@db/jobs?sslpassword=***&sslmode=verify-full",
        ),
        (
            "postgresql://bob:s3cret@[db/jobs?sslpassword=s3cret",
            "postgresql://bob:***@[db/jobs?sslpassword=***",
        ),
        (
            "postgresql://bob:s3cret@db:port/jobs?password=s3cret",
            "postgresql://bob:***@db:port/jobs?password=***",
        ),
    ],
)
def test_redact_masks_the_password(url: str, shown: str) -> None:
    assert redact(url) == shown
