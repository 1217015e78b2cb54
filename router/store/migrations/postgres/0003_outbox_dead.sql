-- jobrouter schema v3 (PostgreSQL): outbox delivery and dead letters.
-- A delivering process claims an event (claimed_by, claim_until) so that no two processes send
-- it at the same moment; a claim whose process died expires and the event is sent again (at
-- least once: receivers de-duplicate on the event id). The retry state lives in the row (tries,
-- next_attempt_at, last_error), never in memory.
ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
ALTER TABLE outbox ADD COLUMN claim_until DOUBLE PRECISION;
-- Delivery claims due events of the owners that have a webhook: by owner, then by due time.
-- Events of owners without one are never read by the deliverer (parked, not spun on).
DROP INDEX outbox_pending;
CREATE INDEX outbox_owner_pending ON outbox (owner, next_attempt_at) WHERE delivered_at IS NULL;

-- An event that failed `[outbox] max_tries` times, until `jobrouter outbox replay` moves it back.
-- Its job is kept by `jobrouter purge` (its completion was never delivered).
CREATE TABLE outbox_dead (
    id          TEXT PRIMARY KEY,
    job_id      TEXT NOT NULL UNIQUE,
    owner       TEXT NOT NULL,
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL,
    tries       INTEGER NOT NULL,
    last_error  TEXT,
    dead_at     DOUBLE PRECISION NOT NULL
);
CREATE INDEX outbox_dead_at ON outbox_dead (dead_at);
