"""The migrations of both dialects are one numbered sequence, no number used twice (4 was never
shipped), and the same numbers (and names) in each dialect. Two branches that each add "the next"
migration give two files of one number; a store then fails to open with "UNIQUE constraint
failed: schema_migrations.version" (seen when two such branches were merged), so this catches
it before a store is opened."""

from __future__ import annotations

from jobrouter.store.connector import load_migrations


def test_no_migration_number_is_used_twice() -> None:
    for dialect in ("sqlite", "postgres"):
        numbers = [number for number, _, _ in load_migrations(dialect)]
        assert numbers == sorted(set(numbers)), (dialect, numbers)


def test_both_dialects_have_the_same_migrations() -> None:
    names = {
        dialect: [n for _, n, _ in load_migrations(dialect)] for dialect in ("sqlite", "postgres")
    }
    assert names["sqlite"] == names["postgres"]
