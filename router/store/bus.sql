-- Named queries of router/store/bus.py: delivery through a NATS JetStream bus, and the outbox
-- re-claim of the leader's periodic work. PostgreSQL's own spellings are in bus_postgres.sql
-- (loaded as queries_postgres.sql is: router/store/connector.py, load_queries).

-- name: claim_unpublished
-- Undelivered events of the owners with a webhook that are not on the bus yet, claimed for
-- :worker until :claim_until (an expired claim, whose relay died, is taken over).
UPDATE outbox SET claimed_by = :worker, claim_until = :claim_until
WHERE id IN (
    SELECT id FROM outbox
    WHERE published_at IS NULL AND delivered_at IS NULL
      AND (claim_until IS NULL OR claim_until < :now)
      AND owner IN ({json_list(:owners)})
    ORDER BY next_attempt_at
    LIMIT :limit)
RETURNING *

-- name: outbox_published
-- After the stream acknowledged the publishes (:ids, a JSON array); the claims are given up.
UPDATE outbox SET published_at = :now, claimed_by = NULL, claim_until = NULL
WHERE id IN ({json_list(:ids)}) AND published_at IS NULL

-- name: outbox_unclaim
UPDATE outbox SET claimed_by = NULL, claim_until = NULL WHERE id = :id AND claimed_by = :worker

-- name: outbox_bus_try
-- A failed webhook try of a bus message: the count is the stream's delivery count.
UPDATE outbox SET tries = :tries, last_error = :error WHERE id = :id AND delivered_at IS NULL

-- name: take_undelivered_outbox
DELETE FROM outbox WHERE id = :id AND delivered_at IS NULL RETURNING *

-- name: reclaim_outbox
-- Claims whose process died (expired, still set): freed, so `jobrouter outbox` shows no ghost
-- owner and the next claim need not step over them.
UPDATE outbox SET claimed_by = NULL, claim_until = NULL
WHERE claim_until IS NOT NULL AND claim_until < :now AND delivered_at IS NULL
