"""API tokens and readiness queries, on every backend."""

from __future__ import annotations

from router.store import SqlStore
from router.store.tokens import hash_token


async def test_a_token_authenticates_its_owner_until_revoked(store: SqlStore) -> None:
    token, record = await store.create_token("alice", operator=True)
    found = await store.authenticate(token)
    assert found == record and found.owner == "alice" and found.operator
    assert await store.authenticate(token + "x") is None
    assert await store.revoke_token(record.id)
    assert await store.authenticate(token) is None
    assert not await store.revoke_token(record.id)


async def test_only_the_hash_is_stored(store: SqlStore) -> None:
    token, record = await store.create_token("bob")
    rows = await store.connector.fetchall("SELECT * FROM api_tokens", {})
    assert [row["token_hash"] for row in rows] == [hash_token(token)]
    assert all(token not in str(value) for row in rows for value in row.values())
    assert not record.operator and token.startswith("jr_") and len(token) > 40


async def test_tokens_are_unique_per_call(store: SqlStore) -> None:
    first, _ = await store.create_token("carol")
    second, _ = await store.create_token("carol")
    assert first != second


async def test_a_fresh_database_has_every_migration(store: SqlStore) -> None:
    assert await store.pending_migrations() == []
    assert await store.open_job_counts() == {"queued": 0, "running": 0}
