-- jobrouter schema v2 (PostgreSQL): API tokens of `jobrouter serve`. Only a token's sha256 is
-- stored; the token itself is shown once, by `jobrouter token create`.
CREATE TABLE api_tokens (
    id          TEXT PRIMARY KEY,
    token_hash  TEXT NOT NULL UNIQUE,
    owner       TEXT NOT NULL,
    operator    INTEGER NOT NULL DEFAULT 0,
    created_at  DOUBLE PRECISION NOT NULL,
    revoked_at  DOUBLE PRECISION
);
CREATE INDEX api_tokens_owner ON api_tokens (owner);
