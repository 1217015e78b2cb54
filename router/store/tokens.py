"""API tokens of `jobrouter serve`: bearer tokens mapped to owners, stored only as hashes.

A mixin of `SqlStore` (SQL in queries.sql, like every other store method).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass

from router.models import new_id
from router.store.connector import Connector

TOKEN_PREFIX = "jr_"
TOKEN_BYTES = 32  # 256 random bits


@dataclass(frozen=True)
class ApiToken:
    id: str
    owner: str
    operator: bool
    created_at: float


def hash_token(token: str) -> str:
    """sha256 of the token, hex. A plain fast hash is right here, unlike for passwords: our
    tokens are 256 random bits from `secrets`, so there is no dictionary to try and a preimage
    search is out of reach whatever the hash speed; slow salted hashes (bcrypt, argon2) only
    protect low-entropy secrets. Being deterministic, the hash is also the lookup key, so each
    request costs one indexed read instead of a verify against every stored token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenMethods:
    connector: Connector
    _q: Mapping[str, str]

    async def create_token(self, owner: str, *, operator: bool = False) -> tuple[str, ApiToken]:
        """A new token for `owner`: (the token, shown once and never stored; its record)."""
        if not owner or not owner.strip():
            raise ValueError("owner must be a non-empty string")
        token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        record = ApiToken(id=new_id(), owner=owner, operator=operator, created_at=time.time())
        async with self.connector.write() as tx:
            await tx.execute(self._q["insert_token"], {
                "id": record.id, "token_hash": hash_token(token), "owner": owner,
                "operator": int(operator), "now": record.created_at})  # fmt: skip
        return token, record

    async def authenticate(self, token: str) -> ApiToken | None:
        """The live token record for a presented token, or None."""
        params = {"token_hash": hash_token(token)}
        row = await self.connector.fetchone(self._q["find_token"], params)
        if row is None:
            return None
        return ApiToken(id=row["id"], owner=row["owner"], operator=bool(row["operator"]),
                        created_at=float(row["created_at"]))

    async def revoke_token(self, token_id: str) -> bool:
        async with self.connector.write() as tx:
            count = await tx.execute(self._q["revoke_token"], {"id": token_id, "now": time.time()})
        return count > 0
