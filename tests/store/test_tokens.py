"""API tokens and readiness queries, on every backend."""

from __future__ import annotations

from jobrouter.store import SqlStore
from jobrouter.store.tokens import hash_token


async def test_a_token_authenticates_its_owner_until_revoked(store: SqlStore) -> None:
    token, record = await store.tokens.create_token("alice", operator=True)
    found = await store.tokens.authenticate(token)
    assert found == record and found.owner == "alice" and found.operator
    assert await store.tokens.authenticate(token + "x") is None
    assert await store.tokens.revoke_token(record.id)
    assert await store.tokens.authenticate(token) is None
    assert not await store.tokens.revoke_token(record.id)


async def test_only_the_hash_is_stored(store: SqlStore) -> None:
    token, record = await store.tokens.create_token("bob")
    rows = await store.connector.fetchall("SELECT * FROM api_tokens", {})
    assert [row["token_hash"] for row in rows] == [hash_token(token)]
    assert all(token not in str(value) for row in rows for value in row.values())
    assert not record.operator and token.startswith("jr_") and len(token) > 40


async def test_tokens_are_unique_per_call(store: SqlStore) -> None:
    first, _ = await store.tokens.create_token("carol")
    second, _ = await store.tokens.create_token("carol")
    assert first != second


async def test_a_fresh_database_has_every_migration(store: SqlStore) -> None:
    assert await store.health.pending_migrations() == []
    assert await store.health.open_job_counts() == {"queued": 0, "running": 0}


async def test_tokens_are_listed_revoked_and_expire(store: SqlStore) -> None:
    """Issue 14: `token list | revoke | create --expires`; before it there was no listing and
    no expiry (this fails on that code: `list_tokens`, `expires_in` did not exist)."""
    live, live_record = await store.tokens.create_token("dora")
    short, short_record = await store.tokens.create_token("dora", expires_in=3600)
    assert (await store.tokens.find_token(short)) == short_record
    assert short_record.expires_at is not None
    assert short_record.status(now=short_record.expires_at + 1) == "expired"
    assert await store.tokens.revoke_token(live_record.id)
    listed = {record.id: record for record in await store.tokens.list_tokens()}
    assert listed[live_record.id].status() == "revoked"
    assert listed[short_record.id].status() == "live"
    revoked = await store.tokens.find_token(live)
    assert revoked is not None and revoked.status() == "revoked"
    assert await store.tokens.authenticate(live) is None
    assert await store.tokens.find_token("jr_never-made") is None


async def test_an_expired_token_is_refused(store: SqlStore) -> None:
    token, _ = await store.tokens.create_token("erin", expires_in=1e-6)
    found = await store.tokens.find_token(token)
    assert found is not None and found.status() == "expired"  # its expiry is in the past
    assert await store.tokens.authenticate(token) is None


async def test_readiness_proves_a_write(store: SqlStore) -> None:
    await store.health.prove_write()
    await store.health.prove_write()  # the same one row, rewritten
    rows = await store.connector.fetchall("SELECT * FROM readiness", {})
    assert len(rows) == 1
