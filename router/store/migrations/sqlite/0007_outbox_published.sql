-- jobrouter schema v7 (SQLite): delivery through a NATS JetStream bus ([delivery] nats_url).
-- The relay publishes an event to the stream and only then, after the publish acknowledgement,
-- sets published_at: an event not yet published is found here again (a relay that died between
-- the two re-publishes it under the same message id, which JetStream de-duplicates).
-- Delivery itself (delivered_at, tries, dead letters) stays in the same columns and tables.
ALTER TABLE outbox ADD COLUMN published_at REAL;
CREATE INDEX outbox_unpublished ON outbox (owner, next_attempt_at)
    WHERE published_at IS NULL AND delivered_at IS NULL;
