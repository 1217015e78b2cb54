"""API tokens of `jobrouter serve`: bearer tokens mapped to owners, stored only as hashes.

A token lives until it is revoked (`jobrouter token revoke ID`) or, when created with
`--expires`, until its expiry. `TokenStore` is the store's part for them (`SqlStore.tokens`,
used by the HTTP API's authentication and `jobrouter token`); SQL in queries.sql, like every
other store query.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobrouter.models import new_id
from jobrouter.store.connector import Connector

TOKEN_PREFIX = "jr_"
TOKEN_BYTES = 32  # 256 random bits


@dataclass(frozen=True)
class ApiToken:
    id: str
    owner: str
    operator: bool
    created_at: float
    revoked_at: float | None = None
    expires_at: float | None = None  # None: never

    def status(self, now: float | None = None) -> str:
        """`live`, `revoked` or `expired` (revoked wins: it was an operator's decision)."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= (time.time() if now is None else now):
            return "expired"
        return "live"


def hash_token(token: str) -> str:
    """sha256 of the token, hex. A plain fast hash is right here, unlike for passwords: our
    tokens are 256 random bits from `secrets`, so there is no dictionary to try and a preimage
    search is out of reach whatever the hash speed; slow salted hashes (bcrypt, argon2) only
    protect low-entropy secrets. Being deterministic, the hash is also the lookup key, so each
    request costs one indexed read instead of a verify against every stored token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _record(row: Mapping[str, Any]) -> ApiToken:
    def when(name: str) -> float | None:
        value = row.get(name)
        return None if value is None else float(value)

    return ApiToken(
        id=row["id"],
        owner=row["owner"],
        operator=bool(row["operator"]),
        created_at=float(row["created_at"]),
        revoked_at=when("revoked_at"),
        expires_at=when("expires_at"),
    )


class TokenStore:
    """API tokens over the one connector: create, find, list, revoke."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._q = connector.queries

    async def create_token(
        self, owner: str, *, operator: bool = False, expires_in: float | None = None
    ) -> tuple[str, ApiToken]:
        """A new token for `owner`: (the token, shown once and never stored; its record).
        `expires_in`: seconds until it stops working (None: until revoked)."""
        if not owner or not owner.strip():
            raise ValueError("owner must be a non-empty string")
        if expires_in is not None and expires_in <= 0:
            raise ValueError("expires_in must be a positive number of seconds")
        token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        now = time.time()
        record = ApiToken(
            id=new_id(),
            owner=owner,
            operator=operator,
            created_at=now,
            expires_at=None if expires_in is None else now + expires_in,
        )
        async with self.connector.write() as tx:
            await tx.execute(
                self._q["insert_token"],
                {
                    "id": record.id,
                    "token_hash": hash_token(token),
                    "owner": owner,
                    "operator": int(operator),
                    "now": now,
                    "expires_at": record.expires_at,
                },
            )
        return token, record

    async def find_token(self, token: str) -> ApiToken | None:
        """The record of a presented token, live, revoked or expired; None when unknown."""
        row = await self.connector.fetchone(
            self._q["find_token"], {"token_hash": hash_token(token)}
        )
        return None if row is None else _record(row)

    async def authenticate(self, token: str) -> ApiToken | None:
        """The record of a presented token if it is live (not revoked, not expired), or None."""
        record = await self.find_token(token)
        return record if record is not None and record.status() == "live" else None

    async def token_status(self, token_id: str) -> str:
        """`live`, `revoked`, `expired`, or `unknown` (no token of that id): what an open
        stream of the token asks before going on."""
        row = await self.connector.fetchone(self._q["get_token"], {"id": token_id})
        return "unknown" if row is None else _record(row).status()

    async def list_tokens(self) -> list[ApiToken]:
        """Every token's record (never the token: only its hash is stored), oldest first."""
        return [_record(row) for row in await self.connector.fetchall(self._q["list_tokens"], {})]

    async def revoke_token(self, token_id: str) -> bool:
        """Revoke a token by id; False when there is no live-or-expired token of that id."""
        async with self.connector.write() as tx:
            count = await tx.execute(self._q["revoke_token"], {"id": token_id, "now": time.time()})
        return count > 0
