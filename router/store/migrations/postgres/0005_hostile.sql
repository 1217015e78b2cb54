-- jobrouter schema v5 (PostgreSQL), issue 14.
-- Event sequence numbers are 64-bit, as the HTTP API's `Last-Event-ID` is: a 32-bit column made
-- a large `Last-Event-ID` fail in the driver (int32 overflow). Rewrites both tables once.
ALTER TABLE job_events ALTER COLUMN seq TYPE BIGINT;
ALTER TABLE jobs ALTER COLUMN event_seq TYPE BIGINT;
-- Tokens expire: `jobrouter token create OWNER --expires 30d`; NULL never expires.
ALTER TABLE api_tokens ADD COLUMN expires_at DOUBLE PRECISION;
-- /health/ready proves the database takes a write: it rewrites this one row.
CREATE TABLE readiness (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    checked_at  DOUBLE PRECISION NOT NULL
);
