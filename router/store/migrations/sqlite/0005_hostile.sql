-- jobrouter schema v5 (SQLite), issue 14.
-- Tokens expire: `jobrouter token create OWNER --expires 30d`; NULL never expires.
ALTER TABLE api_tokens ADD COLUMN expires_at REAL;
-- /health/ready proves the database takes a write: it rewrites this one row.
CREATE TABLE readiness (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    checked_at  REAL NOT NULL
);
